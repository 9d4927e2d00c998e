//! The embedded engine's fast way for a [`PublishRun`] (see [`crate::api::Queues::publish_run`]):
//! a run its subscribers can all take directly is handed to them under one hold of the state
//! lock (see the state's `run` module); any other goes message by message.

use super::store::{Class, EmbeddedStore};
use super::writer;
use crate::api::{PublishRun, RunStored};

impl EmbeddedStore {
    /// Publishes `run` directly when it can go that way; `None`, with nothing done, when it
    /// must go message by message.
    pub(super) async fn publish_run_direct(&self, run: &PublishRun) -> Option<RunStored> {
        if run.persistent {
            return None;
        }
        // What `send_batch` checks first; a refusal is its to give, for every message.
        if self.admit(Class::Quiet).await.is_err() || self.writable().await.is_err() {
            return None;
        }
        let (first, ticket) = {
            let mut st = self.state();
            let mut log = self.log.lock();
            let first = st.publish_run_direct(&mut log, run)?;
            st.flush_direct();
            // Only a new sender's registration is written.
            let ticket = log.ticket_if_appended();
            (first, ticket)
        };
        let count = u32::try_from(run.bodies.len()).ok()?;
        Some(match writer::wait(ticket).await {
            Ok(()) => RunStored::Consecutive { first, count },
            Err(e) => RunStored::Each(vec![Err(e); run.bodies.len()]),
        })
    }
}
