//! The connections a location starts its interactions on. SPECjms drives each interaction
//! of a location from driver threads of its own, each with its own session, as many as the
//! interaction's rate and the time of one start need, so that a start is not held up by
//! another one still waiting for its commit. Here a location's pool keeps a spare: when a
//! start takes the last idle connection, the pool opens another in the background (up to
//! `--start-connections`), and a start that finds none idle takes whichever comes first, one
//! given back or the one being opened. Under a steady load the pool thus holds as many
//! connections as the rate times a start's time (plus the spare) and a start finds one ready;
//! it waits only when all `--start-connections` are busy. A late start is thus late because
//! the generator could not start it in time (see [`super::pacing`]) or because the broker
//! kept every connection of the location busy, not because one other start's commit (the
//! broker's fsync) or a connect was in its way.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{anyhow, Result};
use tokio::sync::Notify;

use crate::drivers::{Connection, Driver};

/// Connections a pool opens before the run: one in use and one spare.
pub const OPENED_UP_FRONT: u32 = 2;

/// The start connections of one location: idle ones, and room to open more.
pub struct StartPool {
    inner: Arc<Inner>,
}

struct Inner {
    driver: Arc<dyn Driver>,
    name: String,
    /// Most connections.
    max: u32,
    idle: Mutex<Vec<Arc<dyn Connection>>>,
    /// A connection became idle (given back or opened).
    ready: Notify,
    /// Every connection opened, to close at the end.
    all: Mutex<Vec<Arc<dyn Connection>>>,
    opened: AtomicU32,
    /// A spare is being opened.
    opening: AtomicBool,
}

/// A connection taken from a [`StartPool`]; back to the pool when dropped.
pub struct StartConnection {
    inner: Arc<Inner>,
    conn: Arc<dyn Connection>,
}

impl Inner {
    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn Connection>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn give_back(&self, c: Arc<dyn Connection>) {
        self.lock_idle().push(c);
        self.ready.notify_one();
    }

    async fn connect(&self) -> Result<Arc<dyn Connection>> {
        let n = self.opened.fetch_add(1, Ordering::Relaxed);
        let c: Arc<dyn Connection> = match self.driver.connect(&format!("{}-{n}", self.name)).await
        {
            Ok(c) => c.into(),
            Err(e) => {
                self.opened.fetch_sub(1, Ordering::Relaxed);
                return Err(anyhow!(e.message));
            }
        };
        self.all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(c.clone());
        Ok(c)
    }

    /// Opens a spare in the background when none is idle and there is room (one at a time).
    fn keep_a_spare(self: &Arc<Self>) {
        let room = self.opened.load(Ordering::Relaxed) < self.max;
        if !room || !self.lock_idle().is_empty() || self.opening.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.clone();
        tokio::spawn(async move {
            // A failed connect leaves the pool as it was: starts wait for the ones it has.
            if let Ok(c) = inner.connect().await {
                inner.give_back(c);
            }
            inner.opening.store(false, Ordering::Release);
            // Taken at once: the next spare (its take saw `opening` set and left it).
            inner.keep_a_spare();
        });
    }
}

impl StartPool {
    /// A pool of at most `max` connections (at least 1), `up_front` of them (at most `max`)
    /// opened now; `name` names the ones it opens.
    pub async fn open(
        driver: Arc<dyn Driver>,
        name: String,
        max: u32,
        up_front: u32,
    ) -> Result<StartPool> {
        let max = max.max(1);
        let inner = Arc::new(Inner {
            driver,
            name,
            max,
            idle: Mutex::new(Vec::new()),
            ready: Notify::new(),
            all: Mutex::new(Vec::new()),
            opened: AtomicU32::new(0),
            opening: AtomicBool::new(false),
        });
        for _ in 0..up_front.min(max) {
            let c = inner.connect().await?;
            inner.lock_idle().push(c);
        }
        Ok(StartPool { inner })
    }

    /// An idle connection (a spare opened in the background when it was the last); when none
    /// is idle, the first that is: given back, or opened when there is room.
    pub async fn take(&self) -> Result<StartConnection, String> {
        loop {
            let ready = self.inner.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            let idle = self.inner.lock_idle().pop();
            self.inner.keep_a_spare();
            if let Some(conn) = idle {
                return Ok(StartConnection {
                    inner: self.inner.clone(),
                    conn,
                });
            }
            if self.inner.opened.load(Ordering::Relaxed) == 0
                && !self.inner.opening.load(Ordering::Acquire)
            {
                return Err(format!(
                    "{}: no connection could be opened",
                    self.inner.name
                ));
            }
            ready.await;
        }
    }

    /// Connections opened so far.
    pub fn opened(&self) -> u32 {
        self.inner.opened.load(Ordering::Relaxed)
    }

    /// Closes every connection the pool opened, once the starts using them are done.
    pub async fn close(&self) {
        // Every connection idle (and no spare being opened): no start is inside a transaction
        // on a connection closed here.
        loop {
            let ready = self.inner.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            let opening = self.inner.opening.load(Ordering::Acquire);
            if !opening && self.inner.lock_idle().len() >= self.opened() as usize {
                break;
            }
            let _ = tokio::time::timeout(std::time::Duration::from_millis(10), ready).await;
        }
        let all = std::mem::take(
            &mut *self
                .inner
                .all
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        self.inner.lock_idle().clear();
        for c in all {
            c.close().await;
        }
    }
}

impl std::ops::Deref for StartConnection {
    type Target = Arc<dyn Connection>;

    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl Drop for StartConnection {
    fn drop(&mut self) {
        self.inner.give_back(self.conn.clone());
    }
}

#[cfg(test)]
#[path = "starts_tests.rs"]
mod tests;
