//! Users on PostgreSQL: the `users` table (migration 12), shared by every node. Every call
//! reads or writes the table itself, so a change made through one node holds on all of them
//! from their next read.

use async_trait::async_trait;

use super::inner::Inner;
use super::tx::{retrying, TxError};
use crate::error::StoreError;
use crate::users::{UserRecord, Users};

fn record(row: &tokio_postgres::Row) -> Result<UserRecord, tokio_postgres::Error> {
    Ok(UserRecord {
        name: row.try_get(0)?,
        credential: row.try_get(1)?,
        grants: row.try_get(2)?,
    })
}

impl Inner {
    /// Runs one statement that changes one user's row; `UserNotFound` when none matched.
    async fn update_user(
        &self,
        name: &str,
        sql: &'static str,
        value: &(dyn tokio_postgres::types::ToSql + Sync),
    ) -> Result<(), StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let n = conn.execute(sql, &[&name, value]).await?;
            if n == 0 {
                return Err(TxError::Store(StoreError::UserNotFound(name.to_owned())));
            }
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl Users for Inner {
    async fn create_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let n = conn
                .execute(
                    "INSERT INTO users (name, credential, grants) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO NOTHING",
                    &[&user.name, &user.credential, &user.grants],
                )
                .await?;
            if n == 0 {
                return Err(TxError::Store(StoreError::UserExists(user.name.clone())));
            }
            Ok(())
        })
        .await
    }

    async fn set_user_credential(&self, name: &str, credential: &str) -> Result<(), StoreError> {
        let sql = "UPDATE users SET credential = $2 WHERE name = $1";
        self.update_user(name, sql, &credential).await
    }

    async fn set_user_grants(&self, name: &str, grants: &[String]) -> Result<(), StoreError> {
        let sql = "UPDATE users SET grants = $2 WHERE name = $1";
        self.update_user(name, sql, &grants).await
    }

    async fn delete_user(&self, name: &str) -> Result<(), StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let n = conn
                .execute("DELETE FROM users WHERE name = $1", &[&name])
                .await?;
            if n == 0 {
                return Err(TxError::Store(StoreError::UserNotFound(name.to_owned())));
            }
            Ok(())
        })
        .await
    }

    async fn user(&self, name: &str) -> Result<Option<UserRecord>, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let row = conn
                .query_opt(
                    "SELECT name, credential, grants FROM users WHERE name = $1",
                    &[&name],
                )
                .await?;
            Ok(row.as_ref().map(record).transpose()?)
        })
        .await
    }

    async fn list_users(&self) -> Result<Vec<UserRecord>, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let rows = conn
                .query(
                    "SELECT name, credential, grants FROM users ORDER BY name COLLATE \"C\"",
                    &[],
                )
                .await?;
            Ok(rows.iter().map(record).collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn has_users(&self) -> Result<bool, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let row = conn
                .query_one("SELECT EXISTS (SELECT 1 FROM users)", &[])
                .await?;
            Ok(row.try_get(0)?)
        })
        .await
    }
}
