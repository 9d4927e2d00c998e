//! Client names to row ids and back, and queue ids to names, with in-process caches. Ids come
//! from sequences and are never reused, so a cached pair is never wrong about another name; it
//! is stale once the name expired (see [`upkeep`](super::upkeep)), possibly on another node.
//! Where that matters the row is read again: a send locks its receivers' rows by name, a
//! receive by sender looks the sender up afresh, a claim refreshes its own name's pair.

use std::collections::HashMap;
use std::sync::Mutex;

use deadpool_postgres::{GenericClient, Transaction};

use super::tx::TxResult;

/// Cache of client ids by name, and of names by id.
#[derive(Debug, Default)]
pub struct ClientIds {
    known: Mutex<HashMap<String, i64>>,
    names: Mutex<HashMap<i64, String>>,
}

impl ClientIds {
    /// The cached id of `name`.
    pub fn cached(&self, name: &str) -> Option<i64> {
        self.known.lock().ok()?.get(name).copied()
    }

    /// Drops `name` from the cache (it expired).
    pub fn forget(&self, name: &str) {
        let id = self.known.lock().ok().and_then(|mut k| k.remove(name));
        if let (Some(id), Ok(mut names)) = (id, self.names.lock()) {
            names.remove(&id);
        }
    }

    /// Caches the id of `name`.
    pub fn remember(&self, name: String, id: i64) {
        if let Ok(mut names) = self.names.lock() {
            names.insert(id, name.clone());
        }
        if let Ok(mut known) = self.known.lock() {
            known.insert(name, id);
        }
    }

    /// The names of client `ids` (from the cache or the database); unknown ids are left out.
    pub async fn names<C: GenericClient>(
        &self,
        client: &C,
        ids: &[i64],
    ) -> TxResult<HashMap<i64, String>> {
        let sql = "SELECT id, name FROM clients WHERE id = ANY($1)";
        names_by_id(&self.names, client, ids, sql, |name, id| {
            self.remember(name, id)
        })
        .await
    }

    /// Ids of those `names` that are registered (from the cache or the database).
    pub async fn lookup<C: GenericClient>(
        &self,
        tx: &C,
        names: &[&str],
    ) -> TxResult<HashMap<String, i64>> {
        let mut found = HashMap::new();
        let mut missing: Vec<&str> = Vec::new();
        for n in names {
            match self.cached(n) {
                Some(id) => {
                    found.insert((*n).to_owned(), id);
                }
                None if !missing.contains(n) => missing.push(n),
                None => {}
            }
        }
        if !missing.is_empty() {
            let stmt = tx
                .prepare_cached("SELECT id, name FROM clients WHERE name = ANY($1)")
                .await?;
            for row in tx.query(&stmt, &[&missing]).await? {
                let (id, name): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
                self.remember(name.clone(), id);
                found.insert(name, id);
            }
        }
        Ok(found)
    }

    /// Ids of those `names` that are registered, read from the database (and cached).
    /// `lock`: the rows are locked `FOR KEY SHARE` until the transaction ends, so that they
    /// cannot expire meanwhile.
    pub async fn lookup_fresh<C: GenericClient>(
        &self,
        tx: &C,
        names: &[&str],
        lock: bool,
    ) -> TxResult<HashMap<String, i64>> {
        let mut found = HashMap::new();
        if names.is_empty() {
            return Ok(found);
        }
        let sql = if lock {
            "SELECT id, name FROM clients WHERE name = ANY($1) ORDER BY id FOR KEY SHARE"
        } else {
            "SELECT id, name FROM clients WHERE name = ANY($1)"
        };
        let stmt = tx.prepare_cached(sql).await?;
        for row in tx.query(&stmt, &[&names]).await? {
            let (id, name): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
            self.remember(name.clone(), id);
            found.insert(name, id);
        }
        Ok(found)
    }

    /// Registers `names` (those not yet known) and returns every one's id.
    pub async fn ensure(
        &self,
        tx: &Transaction<'_>,
        names: &[&str],
    ) -> TxResult<HashMap<String, i64>> {
        let mut found = self.lookup(tx, names).await?;
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !found.contains_key(*n))
            .collect();
        if missing.is_empty() {
            return Ok(found);
        }
        let insert = tx
            .prepare_cached(
                "INSERT INTO clients (name) SELECT unnest($1::text[]) \
                 ON CONFLICT (name) DO NOTHING",
            )
            .await?;
        tx.execute(&insert, &[&missing]).await?;
        found.extend(self.lookup(tx, &missing).await?);
        Ok(found)
    }
}

/// Cache of queue names by id (a queue deleted and created again gets a new id).
#[derive(Debug, Default)]
pub struct QueueNames {
    names: Mutex<HashMap<i64, String>>,
}

impl QueueNames {
    /// The names of queue `ids` (from the cache or the database); ids of queues deleted
    /// meanwhile are left out.
    pub async fn names<C: GenericClient>(
        &self,
        client: &C,
        ids: &[i64],
    ) -> TxResult<HashMap<i64, String>> {
        let sql = "SELECT id, name FROM queues WHERE id = ANY($1)";
        names_by_id(&self.names, client, ids, sql, |name, id| {
            if let Ok(mut names) = self.names.lock() {
                names.insert(id, name);
            }
        })
        .await
    }
}

/// The names of `ids`: from `cache`, and for the others from the database with `sql` (which
/// selects `id, name` for the ids in `$1`), handing each fetched pair to `remember`.
async fn names_by_id<C: GenericClient>(
    cache: &Mutex<HashMap<i64, String>>,
    client: &C,
    ids: &[i64],
    sql: &str,
    remember: impl Fn(String, i64),
) -> TxResult<HashMap<i64, String>> {
    let mut found = HashMap::new();
    let mut missing: Vec<i64> = Vec::new();
    if let Ok(names) = cache.lock() {
        for id in ids {
            match names.get(id) {
                Some(n) => {
                    found.insert(*id, n.clone());
                }
                None if !missing.contains(id) => missing.push(*id),
                None => {}
            }
        }
    }
    if !missing.is_empty() {
        let stmt = client.prepare_cached(sql).await?;
        for row in client.query(&stmt, &[&missing]).await? {
            let (id, name): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
            remember(name.clone(), id);
            found.insert(id, name);
        }
    }
    Ok(found)
}
