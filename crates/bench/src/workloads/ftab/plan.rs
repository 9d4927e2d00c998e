//! What every client of a run shares: the queues, the message shape, the names of the clients
//! that messages are addressed to, and the body text.

use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::Rng;

use crate::drivers::{Connection, OutMessage};

use super::args::Priority;
use super::ops::Recorder;
use super::text::TextSource;

/// The queue Carl sends requests to and Ricks read from.
pub const REQUEST_QUEUE: &str = "ftab-requests";

/// The queue of Tola/Maruja pair `i`.
pub fn pair_queue(i: u32) -> String {
    format!("ftab-pair-{i}")
}

/// The shared set-up of a run.
#[derive(Debug)]
pub struct Plan {
    /// The queues Alice, Bob and Larry choose from.
    pub queues: Vec<String>,
    /// Queues per Alice send.
    pub targets_per_send: usize,
    /// Body size in bytes.
    pub size: usize,
    /// Message priority.
    pub priority: Priority,
    /// Whether reads take the highest priority first (the target supports priorities).
    pub by_priority: bool,
    /// Client names of the Larrys.
    pub larrys: Vec<String>,
    /// The run, stamped in bodies.
    pub run_id: u64,
    /// Body text.
    pub text: TextSource,
}

impl Plan {
    /// A random queue of the list.
    pub fn random_queue(&self) -> String {
        let i = rand::thread_rng().gen_range(0..self.queues.len());
        self.queues.get(i).cloned().unwrap_or_default()
    }

    /// `n` distinct random queues of the list (all of them when `n` is larger).
    pub fn random_queues(&self, n: usize) -> Vec<String> {
        self.queues
            .choose_multiple(&mut rand::thread_rng(), n)
            .cloned()
            .collect()
    }

    /// A random Larry other than `me` (or `me` when it is the only one).
    pub fn random_larry(&self, me: &str) -> String {
        let others: Vec<&String> = self.larrys.iter().filter(|l| *l != me).collect();
        match others.choose(&mut rand::thread_rng()) {
            Some(l) => (*l).clone(),
            None => me.to_string(),
        }
    }

    /// A message to `queues` with a fresh body carrying `context`.
    pub fn message(&self, queues: Vec<String>, to: Option<String>, context: u64) -> OutMessage {
        OutMessage {
            queues,
            body: self.text.body(self.size, context, self.run_id),
            priority: Some(self.priority.pick()),
            to,
            persistent: true,
            properties: Default::default(),
            routing_key: None,
        }
    }
}

/// One client: its connection, name, recorder and the plan.
pub struct Client {
    /// Its connection.
    pub conn: Arc<dyn Connection>,
    /// Its client name.
    pub name: String,
    /// Where its operations are recorded.
    pub rec: Recorder,
    /// The run's set-up.
    pub plan: Arc<Plan>,
}

impl Client {
    /// Whether the run is over.
    pub fn stopping(&self) -> bool {
        self.rec.shared().stopping()
    }
}
