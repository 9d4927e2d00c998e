//! Users on the embedded engine: the [`Users`] role of [`EmbeddedStore`], over its users file
//! (see [`super::user_file`]).

use async_trait::async_trait;

use super::store::EmbeddedStore;
use crate::error::StoreError;
use crate::users::{UserRecord, Users};

fn missing(name: &str) -> StoreError {
    StoreError::UserNotFound(name.to_owned())
}

#[async_trait]
impl Users for EmbeddedStore {
    async fn create_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        self.users
            .change(|users| {
                if users.contains_key(&user.name) {
                    return Err(StoreError::UserExists(user.name.clone()));
                }
                users.insert(user.name.clone(), user.clone());
                Ok(())
            })
            .await
    }

    async fn set_user_credential(&self, name: &str, credential: &str) -> Result<(), StoreError> {
        self.users
            .change(|users| {
                users.get_mut(name).ok_or_else(|| missing(name))?.credential = credential.into();
                Ok(())
            })
            .await
    }

    async fn set_user_grants(&self, name: &str, grants: &[String]) -> Result<(), StoreError> {
        self.users
            .change(|users| {
                users.get_mut(name).ok_or_else(|| missing(name))?.grants = grants.to_vec();
                Ok(())
            })
            .await
    }

    async fn delete_user(&self, name: &str) -> Result<(), StoreError> {
        self.users
            .change(|users| users.remove(name).map(drop).ok_or_else(|| missing(name)))
            .await
    }

    async fn user(&self, name: &str) -> Result<Option<UserRecord>, StoreError> {
        Ok(self.users.get(name).await)
    }

    async fn list_users(&self) -> Result<Vec<UserRecord>, StoreError> {
        Ok(self.users.list().await)
    }

    async fn has_users(&self) -> Result<bool, StoreError> {
        Ok(!self.users.is_empty().await)
    }
}
