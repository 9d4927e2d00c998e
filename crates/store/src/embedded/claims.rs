//! [`Claims`]: which session holds each client name, in memory (one process owns an embedded
//! store, so this is the whole truth; it starts empty on every open).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::api::SessionId;
use crate::error::StoreError;

/// Client name to the session holding it.
#[derive(Debug, Default)]
pub struct Claims {
    /// Never held across an `.await`.
    held: Mutex<HashMap<String, SessionId>>,
}

impl Claims {
    fn held(&self) -> MutexGuard<'_, HashMap<String, SessionId>> {
        // Every update is a single insert or remove, so a poisoned map is still consistent.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a session holds `client`.
    pub fn is_online(&self, client: &str) -> bool {
        self.held().contains_key(client)
    }

    /// Claims `client` for `session`; `AlreadyOnline` if another session holds it.
    pub fn claim(&self, client: &str, session: SessionId) -> Result<(), StoreError> {
        let mut held = self.held();
        match held.get(client) {
            Some(s) if *s != session => Err(StoreError::AlreadyOnline(client.to_owned())),
            Some(_) => Ok(()),
            None => {
                held.insert(client.to_owned(), session);
                Ok(())
            }
        }
    }

    /// Frees `client` if `session` holds it; whether it did.
    pub fn end(&self, client: &str, session: SessionId) -> bool {
        let mut held = self.held();
        if held.get(client) == Some(&session) {
            held.remove(client);
            return true;
        }
        false
    }
}
