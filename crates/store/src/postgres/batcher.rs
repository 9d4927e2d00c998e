//! The per-store batcher: a task that gathers concurrent sends and acks into one transaction
//! (group commit at the node).
//!
//! Callers queue [`Work`] with a reply channel. The task takes what is waiting, up to
//! `batch_max` messages and ids, runs it as one batch, replies, and repeats: while one batch
//! commits, the next one fills up. Batches run one at a time, so message ids increase in the
//! order sends were accepted. When a batch fails as a whole for a reason other than the
//! database being unavailable, its items are retried one by one so that a bad item fails
//! alone.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::batch::{Done, Work};
use super::inner::Inner;
use crate::error::StoreError;

/// One queued item and where its result goes.
struct Job {
    work: Work,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// The handle callers use; dropping it stops the task.
#[derive(Debug)]
pub struct Batcher {
    jobs: mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.work.fmt(f)
    }
}

impl Batcher {
    /// Starts the task on the current tokio runtime.
    pub fn start(inner: Arc<Inner>, batch_max: usize) -> Batcher {
        let (jobs, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(inner, rx, batch_max.max(1)));
        Batcher { jobs }
    }

    /// Queues `work` and waits for its result.
    pub async fn submit(&self, work: Work) -> Result<Done, StoreError> {
        let (reply, done) = oneshot::channel();
        self.jobs
            .send(Job { work, reply })
            .map_err(|_| StoreError::Internal("the batcher has stopped".into()))?;
        done.await
            .map_err(|_| StoreError::Internal("the batcher dropped a request".into()))?
    }
}

async fn run(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Job>, batch_max: usize) {
    while let Some(first) = rx.recv().await {
        let mut size = first.work.size();
        let mut jobs = vec![first];
        while size < batch_max {
            match rx.try_recv() {
                Ok(job) => {
                    size += job.work.size();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        execute(&inner, jobs).await;
    }
}

async fn execute(inner: &Inner, jobs: Vec<Job>) {
    let (work, replies): (Vec<Work>, Vec<_>) = jobs.into_iter().map(|j| (j.work, j.reply)).unzip();
    let result = run_retrying(inner, &work).await;
    match result {
        Ok(done) => {
            for (reply, d) in replies.into_iter().zip(done) {
                let _ = reply.send(Ok(d));
            }
        }
        Err(e) if work.len() > 1 && !matches!(e, StoreError::Unavailable(_)) => {
            tracing::debug!(error = %e, items = work.len(), "batch failed; running items alone");
            for (w, reply) in work.into_iter().zip(replies) {
                let one = [w];
                let r = run_retrying(inner, &one).await.and_then(|mut d| {
                    d.pop()
                        .ok_or_else(|| StoreError::Internal("empty batch".into()))
                });
                let _ = reply.send(r);
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

async fn run_retrying(inner: &Inner, work: &[Work]) -> Result<Vec<Done>, StoreError> {
    super::tx::retrying(|| inner.run_batch(work)).await
}
