//! Who consumes which topic subscription on this node: a non-shared durable subscription has at
//! most one consuming session at a time (`SubscriptionInUse` for a second), and a subscription
//! with consumers cannot be unsubscribed.
//!
//! This is per broker node. Nodes sharing a PostgreSQL store do not see each other's
//! consumers (`docs/semantics.md` says so).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use ferry_protocol::{ErrorCode, ErrorReply};

/// Consumers per subscription queue (`topic:name`).
#[derive(Default)]
pub struct Consumers {
    // std mutex: held for a map lookup only, never across an await.
    by_queue: Mutex<HashMap<String, Attached>>,
}

#[derive(Debug, Clone, Copy)]
struct Attached {
    shared: bool,
    count: usize,
}

impl Consumers {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Attached>> {
        self.by_queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a consumer of `queue`. Refused when the subscription is not shared and has a
    /// consumer already (or is shared and has non-shared ones, which cannot happen as the store
    /// keeps the flag, but is refused all the same).
    pub fn attach(&self, queue: &str, shared: bool) -> Result<(), ErrorReply> {
        let mut map = self.map();
        match map.get_mut(queue) {
            Some(a) if a.count > 0 && !(a.shared && shared) => Err(ErrorReply::new(
                ErrorCode::SubscriptionInUse,
                format!("subscription '{queue}' is not shared and another session consumes it"),
            )),
            Some(a) => {
                a.count += 1;
                a.shared = shared;
                Ok(())
            }
            None => {
                map.insert(queue.to_owned(), Attached { shared, count: 1 });
                Ok(())
            }
        }
    }

    /// Unregisters a consumer of `queue`.
    pub fn detach(&self, queue: &str) {
        let mut map = self.map();
        if let Some(a) = map.get_mut(queue) {
            a.count = a.count.saturating_sub(1);
            if a.count == 0 {
                map.remove(queue);
            }
        }
    }

    /// Whether `queue` has consumers on this node.
    pub fn in_use(&self, queue: &str) -> bool {
        self.map().get(queue).is_some_and(|a| a.count > 0)
    }
}
