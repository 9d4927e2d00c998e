//! The embedded engine's users file: one small JSON file, `users`, beside the log's segments.
//!
//! Users change rarely and are few, so the whole file is rewritten on every change: written to
//! `users.tmp`, synced, renamed over `users`, and the directory synced. A crash leaves either
//! the old file or the new one, never a mix (a leftover `users.tmp` is ignored). Keeping users
//! out of the log keeps them out of compaction and of the segment headers' snapshots, and an
//! offline `ferry user add --data-dir` needs nothing but this file (the directory lock still
//! keeps it from racing a running broker).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::backend::Backend;
use crate::error::StoreError;
use crate::users::UserRecord;

/// The file's name in the data directory.
pub const USERS_FILE: &str = "users";
const TMP_FILE: &str = "users.tmp";
const FORMAT_VERSION: u64 = 1;

/// The users, in memory and in their file.
#[derive(Debug)]
pub struct UserFile {
    backend: Arc<dyn Backend>,
    dir: PathBuf,
    /// Changes are serialised by this lock, held across the file write.
    users: tokio::sync::Mutex<BTreeMap<String, UserRecord>>,
}

impl UserFile {
    /// Reads the users of `dir` (none when the file does not exist).
    pub fn load(backend: Arc<dyn Backend>, dir: &Path) -> Result<UserFile, StoreError> {
        let path = dir.join(USERS_FILE);
        let exists = backend
            .list(dir)
            .map_err(|e| StoreError::Unavailable(format!("listing {}: {e}", dir.display())))?
            .iter()
            .any(|n| n == USERS_FILE);
        let users = if exists {
            let bytes = backend
                .read(&path)
                .map_err(|e| StoreError::Unavailable(format!("reading {}: {e}", path.display())))?;
            decode(&bytes).map_err(|why| {
                StoreError::Unavailable(format!(
                    "the users file {} is damaged: {why}",
                    path.display()
                ))
            })?
        } else {
            BTreeMap::new()
        };
        Ok(UserFile {
            backend,
            dir: dir.to_owned(),
            users: tokio::sync::Mutex::new(users),
        })
    }

    /// The user called `name`.
    pub async fn get(&self, name: &str) -> Option<UserRecord> {
        self.users.lock().await.get(name).cloned()
    }

    /// Every user, by name.
    pub async fn list(&self) -> Vec<UserRecord> {
        self.users.lock().await.values().cloned().collect()
    }

    /// Whether there is no user.
    pub async fn is_empty(&self) -> bool {
        self.users.lock().await.is_empty()
    }

    /// Applies `change` to a copy of the users, writes it, and keeps it once durable.
    pub async fn change(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, UserRecord>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut users = self.users.lock().await;
        let mut next = users.clone();
        change(&mut next)?;
        let bytes = encode(&next);
        let (backend, dir) = (self.backend.clone(), self.dir.clone());
        tokio::task::spawn_blocking(move || write(&*backend, &dir, &bytes))
            .await
            .map_err(|e| StoreError::Internal(format!("writing users panicked: {e}")))?
            .map_err(|e| StoreError::Unavailable(format!("writing the users file: {e}")))?;
        *users = next;
        Ok(())
    }
}

fn write(backend: &dyn Backend, dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(TMP_FILE);
    let mut file = backend.create(&tmp)?;
    file.append(bytes)?;
    file.sync()?;
    drop(file);
    backend.rename(&tmp, &dir.join(USERS_FILE))?;
    backend.sync_dir(dir)
}

fn encode(users: &BTreeMap<String, UserRecord>) -> Vec<u8> {
    let list: Vec<Value> = users
        .values()
        .map(|u| json!({"name": u.name, "credential": u.credential, "grants": u.grants}))
        .collect();
    let doc = json!({"version": FORMAT_VERSION, "users": list});
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

fn decode(bytes: &[u8]) -> Result<BTreeMap<String, UserRecord>, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if doc.get("version").and_then(Value::as_u64) != Some(FORMAT_VERSION) {
        return Err(format!(
            "unknown format version (this build reads {FORMAT_VERSION})"
        ));
    }
    let list = doc
        .get("users")
        .and_then(Value::as_array)
        .ok_or("no user list")?;
    let mut out = BTreeMap::new();
    for u in list {
        let text = |k: &str| {
            u.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(format!("a user without '{k}'"))
        };
        let grants = u
            .get("grants")
            .and_then(Value::as_array)
            .ok_or("a user without grants")?
            .iter()
            .map(|g| {
                g.as_str()
                    .map(str::to_owned)
                    .ok_or("a grant that is not text")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let record = UserRecord {
            name: text("name")?,
            credential: text("credential")?,
            grants,
        };
        out.insert(record.name.clone(), record);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_damage_is_refused() {
        let mut users = BTreeMap::new();
        users.insert(
            "alice".to_owned(),
            UserRecord {
                name: "alice".into(),
                credential: "SCRAM-SHA-256$4096:c2FsdA==$a:b".into(),
                grants: vec!["send queue orders-*".into(), "monitor".into()],
            },
        );
        assert_eq!(decode(&encode(&users)).unwrap(), users);
        assert!(decode(b"{").is_err());
        assert!(decode(br#"{"version": 99, "users": []}"#).is_err());
        assert!(decode(br#"{"version": 1, "users": [{"name": "a"}]}"#).is_err());
    }
}
