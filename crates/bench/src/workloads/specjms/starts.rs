//! The connections a location starts its interactions on. SPECjms drives each interaction
//! of a location from threads of its own, each with its own session, so that a start is never
//! held up by another one still waiting for its commit: a start due while the location's
//! connections are all inside a transaction takes another one, opened on demand up to
//! [`MAX_PER_LOCATION`] (then it waits, and is late if it waits too long). A start that is late
//! is thus late because the generator could not start it in time, not because another start's
//! commit (the broker's fsync) was in the way; the broker's slowness shows in delivery times.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{anyhow, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::drivers::{Connection, Driver};

/// Connections one location (or one shared group, with `--pool`) starts on, at most.
pub const MAX_PER_LOCATION: usize = 4;

/// The start connections of one location: idle ones, and room to open more.
pub struct StartPool {
    driver: Arc<dyn Driver>,
    name: String,
    room: Arc<Semaphore>,
    idle: Mutex<Vec<Arc<dyn Connection>>>,
    /// Every connection opened, to close at the end.
    all: Mutex<Vec<Arc<dyn Connection>>>,
    opened: AtomicU32,
}

/// A connection taken from a [`StartPool`]; back to the pool when dropped.
pub struct StartConnection<'p> {
    pool: &'p StartPool,
    conn: Arc<dyn Connection>,
    _permit: OwnedSemaphorePermit,
}

impl StartPool {
    /// A pool with one connection open (`name` names the ones it opens).
    pub async fn open(driver: Arc<dyn Driver>, name: String) -> Result<StartPool> {
        let pool = StartPool {
            driver,
            name,
            room: Arc::new(Semaphore::new(MAX_PER_LOCATION)),
            idle: Mutex::new(Vec::new()),
            all: Mutex::new(Vec::new()),
            opened: AtomicU32::new(0),
        };
        let first = pool.connect().await?;
        pool.lock_idle().push(first);
        Ok(pool)
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn Connection>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn connect(&self) -> Result<Arc<dyn Connection>> {
        let n = self.opened.fetch_add(1, Ordering::Relaxed);
        let c: Arc<dyn Connection> = self
            .driver
            .connect(&format!("{}-{n}", self.name))
            .await
            .map_err(|e| anyhow!(e.message))?
            .into();
        self.all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(c.clone());
        Ok(c)
    }

    /// An idle connection, or a new one when none is idle and there is room; waits otherwise.
    pub async fn take(&self) -> Result<StartConnection<'_>, String> {
        let permit = self
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let idle = self.lock_idle().pop();
        let conn = match idle {
            Some(c) => c,
            None => self.connect().await.map_err(|e| e.to_string())?,
        };
        Ok(StartConnection {
            pool: self,
            conn,
            _permit: permit,
        })
    }

    /// Connections opened so far.
    pub fn opened(&self) -> u32 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Closes every connection the pool opened, once the starts using them are done.
    pub async fn close(&self) {
        // Every permit back: no start is inside a transaction on a connection closed here.
        let _all_idle = self.room.acquire_many(MAX_PER_LOCATION as u32).await;
        let all = std::mem::take(&mut *self.all.lock().unwrap_or_else(PoisonError::into_inner));
        self.lock_idle().clear();
        for c in all {
            c.close().await;
        }
    }
}

impl std::ops::Deref for StartConnection<'_> {
    type Target = Arc<dyn Connection>;

    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl Drop for StartConnection<'_> {
    fn drop(&mut self) {
        // Idle again before the permit (dropped after this) lets another start in.
        self.pool.lock_idle().push(self.conn.clone());
    }
}
