//! The start pool against a driver seam whose connects and sends are slow: starts due every
//! 10 ms that each hold their connection for 50 ms (a transaction waiting for several
//! fsyncs) need five connections at once; the pool has them ready, so no start waits.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::*;
use crate::drivers::{
    Capabilities, Consumer, DriverError, DriverLimits, OutMessage, ReceiveOne, Received,
};
use crate::workloads::specjms::pacing::PACING_TOLERANCE;

/// Connects in `CONNECT`; its connections do nothing (the starts below hold them as a slow
/// send would).
struct SlowDriver;

const CONNECT: Duration = Duration::from_millis(20);
const HOLD: Duration = Duration::from_millis(50);
const EVERY: Duration = Duration::from_millis(10);

struct Idle;

fn no(what: &str) -> DriverError {
    DriverError::unsupported("test", what, "the start pool's seam")
}

#[async_trait]
impl Driver for SlowDriver {
    fn name(&self) -> &'static str {
        "test"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn durability(&self) -> String {
        String::new()
    }
    async fn connect(&self, _: &str) -> Result<Box<dyn Connection>, DriverError> {
        tokio::time::sleep(CONNECT).await;
        Ok(Box::new(Idle))
    }
}

#[async_trait]
impl Connection for Idle {
    fn limits(&self) -> DriverLimits {
        DriverLimits {
            max_batch: 1,
            max_prefetch: 1,
        }
    }
    async fn ensure_queues(&self, _: &[String]) -> Result<(), DriverError> {
        Err(no("ensure_queues"))
    }
    async fn send(&self, _: OutMessage) -> Result<(), DriverError> {
        Err(no("send"))
    }
    async fn send_batch(
        &self,
        _: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        Err(no("send_batch"))
    }
    async fn receive_one(&self, _: ReceiveOne) -> Result<Option<Received>, DriverError> {
        Err(no("receive_one"))
    }
    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError> {
        Err(no("waiting_queues"))
    }
    async fn consume(&self, _: &str, _: u32) -> Result<Box<dyn Consumer>, DriverError> {
        Err(no("consume"))
    }
    async fn close(&self) {}
}

/// Starts due every [`EVERY`] for `warm_up` then `counted` more, each holding its connection
/// for [`HOLD`]; returns how many of the counted ones waited longer than the tolerance for
/// their connection, and the connections opened.
async fn late_starts(max: u32, warm_up: u32, counted: u32) -> (u32, u32) {
    let pool = Arc::new(
        StartPool::open(Arc::new(SlowDriver), "t".into(), max, OPENED_UP_FRONT)
            .await
            .unwrap(),
    );
    let begin = Instant::now();
    let mut starts = Vec::new();
    for k in 0..warm_up + counted {
        let due = begin + EVERY * k;
        tokio::time::sleep_until(due).await;
        let pool = pool.clone();
        starts.push(tokio::spawn(async move {
            let conn = pool.take().await.unwrap();
            let waited = due.elapsed();
            tokio::time::sleep(HOLD).await;
            drop(conn);
            waited
        }));
    }
    let mut late = 0;
    for (k, s) in starts.into_iter().enumerate() {
        let waited = s.await.unwrap();
        if k as u32 >= warm_up && waited > PACING_TOLERANCE {
            late += 1;
        }
    }
    pool.close().await;
    (late, pool.opened())
}

#[tokio::test(start_paused = true)]
async fn a_slow_send_does_not_make_the_next_start_late() {
    // 50 ms held every 10 ms: five busy at once, a sixth ready as the spare.
    let (late, opened) = late_starts(16, 50, 200).await;
    assert_eq!(late, 0, "{opened} connections");
    assert!((5..=8).contains(&opened), "{opened} connections");
}

#[tokio::test(start_paused = true)]
async fn too_few_connections_make_starts_late() {
    // At most four (as before the spare): 80 starts a second where 100 are due, so starts
    // queue for a connection.
    let (late, opened) = late_starts(4, 50, 200).await;
    assert_eq!(opened, 4);
    assert!(late >= 50, "{late} late of 200");
    // One, 20 starts a second where 100 are due: most wait.
    let (late, _) = late_starts(1, 10, 40).await;
    assert!(late >= 30, "{late} late of 40");
}

#[tokio::test(start_paused = true)]
async fn a_pool_opened_empty_opens_its_first_connection_when_taken() {
    let pool = StartPool::open(Arc::new(SlowDriver), "t".into(), 2, 0)
        .await
        .unwrap();
    assert_eq!(pool.opened(), 0);
    let begin = Instant::now();
    let conn = pool.take().await.unwrap();
    assert_eq!(begin.elapsed(), CONNECT, "one connect");
    drop(conn);
    pool.close().await;
    assert!(pool.opened() >= 1);
}
