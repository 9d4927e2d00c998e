//! Crash test: the real `ferry` binary under pipelined sends and client-ack receives from several
//! clients is killed with SIGKILL at a random moment, restarted, and checked against what the
//! clients were told:
//! - every acknowledged send is present unless its ack was acknowledged (or it was handed out);
//! - no message whose ack (or auto-ack take) was acknowledged comes back;
//! - no multi-queue message is on only some of its queues (unless consumed from the others);
//! - a message handed out with client ack and not acked comes back flagged redelivered;
//! - message ids keep increasing across restarts;
//! - a session that dies (reset or end of stream) while it waits (long-poll receives with auto
//!   and client ack, subscriptions) takes nothing: every message sent to its queue once the
//!   broker's machine has the reset or end of stream (its socket no longer established) is still
//!   there after the restart.
//!
//! A second test runs 10 cycles with 64 KiB segments, so that the kills land in reused segment
//! files (it checks that spares were reused; that old records never replay is proved in-process,
//! where records can be made to line up, by `ferry-store`'s `spare_tests`). A third runs 10
//! cycles under `--fsync never`: records reach the operating system before their operation is
//! acknowledged, so a process kill loses nothing acknowledged under any policy.
//!
//! A fifth runs 10 cycles with authentication on: a user made before the first start, every
//! client authenticating with SCRAM (the dying sessions anonymously, with the grants
//! `anonymous_grants` gives them).
//!
//! `FERRY_CRASH_CYCLES` sets the number of kill cycles (default 20; CI runs the default, longer
//! runs are documented in docs/operations.md). Needs the `ferry` binary built (`cargo build`).
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ferry_client::Client;
use ferry_protocol::{AckMode, ErrorCode, MessageId, Order, OutgoingMessage, ReceiveMode};
use ferry_testkit::BinaryServer;
use rand::{Rng, SeedableRng};

const QUEUES: [&str; 3] = ["c0", "c1", "c2"];
/// How long a cycle waits for its first acknowledged send before its run time starts.
const FIRST_ACK_LIMIT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Model {
    /// Sessions that died with waits pending (messages were sent to their queue after each).
    dead_sessions: usize,
    /// body -> intended queues (recorded before the send goes out).
    intended: HashMap<String, Vec<String>>,
    /// acknowledged sends: body -> id.
    acked_sends: HashMap<String, MessageId>,
    /// (id, queue) handed to a consumer (client ack or auto ack).
    delivered: HashSet<(MessageId, String)>,
    /// (id, queue) whose removal was acknowledged (client ack acked, or auto-ack take returned).
    removed: HashSet<(MessageId, String)>,
    max_id: MessageId,
    /// Queues of auto-ack takes still waiting for their reply when the broker died, one per
    /// consumer at most: such a take may have removed a message the consumer never saw
    /// (at-most-once), so each excuses one missing message on its queue.
    pending_auto: HashMap<usize, String>,
}

/// The broker address, and the user the test's clients authenticate as when authentication
/// is on: `user:password@host:port`.
fn split_addr(addr: &str) -> (&str, Option<(&str, &str)>) {
    match addr.split_once('@') {
        Some((cred, host)) => (host, cred.split_once(':')),
        None => (addr, None),
    }
}

async fn connect(addr: &str, name: &str) -> Client {
    let (host, user) = split_addr(addr);
    let mut opts = ferry_client::ConnectOptions::new(host, name);
    if let Some((u, pw)) = user {
        opts = opts.user(u, pw);
    }
    let mut last = None;
    for _ in 0..200 {
        match Client::connect_with(opts.clone()).await {
            Ok(c) => return c,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("cannot connect {name} to {host}: {last:?}");
}

async fn producer(addr: String, p: usize, model: Arc<Mutex<Model>>, seed: u64) {
    let c = connect(&addr, &format!("producer{p}")).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut seq = 0u64;
    loop {
        // A pipelined window of sends on one connection.
        let mut window = Vec::new();
        for _ in 0..32 {
            seq += 1;
            let body = format!("p{p}-s{seed}-{seq}");
            let n = rng.gen_range(1..=QUEUES.len());
            let mut qs: Vec<String> = QUEUES.iter().map(|q| q.to_string()).collect();
            qs.truncate(n);
            let start = rng.gen_range(0..QUEUES.len());
            qs.rotate_left(start % n.max(1));
            model
                .lock()
                .unwrap()
                .intended
                .insert(body.clone(), qs.clone());
            let msg = OutgoingMessage {
                queues: qs,
                topic: None,
                persistent: true,
                receiver: None,
                priority: rng.gen_range(1..=10),
                context: 0,
                properties: Default::default(),
                body: Bytes::from(body.clone()),
                ttl_ms: 0,
                delay_ms: 0,
            };
            let c = c.clone();
            window.push(async move { (body, c.send(msg).await) });
        }
        for (body, r) in futures::future::join_all(window).await {
            match r {
                Ok(id) => {
                    let mut m = model.lock().unwrap();
                    m.acked_sends.insert(body, id);
                    m.max_id = m.max_id.max(id);
                }
                Err(_) => return, // the broker is gone
            }
        }
    }
}

async fn consumer(addr: String, n: usize, model: Arc<Mutex<Model>>, seed: u64) {
    let c = connect(&addr, &format!("consumer{n}")).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    loop {
        let q = QUEUES[rng.gen_range(0..QUEUES.len())];
        let auto = rng.gen_bool(0.3);
        let ack = if auto { AckMode::Auto } else { AckMode::Client };
        if auto {
            model.lock().unwrap().pending_auto.insert(n, q.to_string());
        }
        let r = c
            .receive(common::from_queue(
                q,
                Order::Priority,
                ReceiveMode::Take,
                ack,
                0,
            ))
            .await;
        if auto && r.is_ok() {
            model.lock().unwrap().pending_auto.remove(&n);
        }
        let d = match r {
            Ok(Some(d)) => d,
            Ok(None) => {
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            }
            Err(_) => return,
        };
        let key = (d.message.id, q.to_string());
        model.lock().unwrap().delivered.insert(key.clone());
        if auto {
            model.lock().unwrap().removed.insert(key);
            continue;
        }
        if rng.gen_bool(0.1) {
            continue; // leave it unacked: it must come back flagged after the crash
        }
        match c.ack(&[d.delivery_id]).await {
            Ok(()) => {
                model.lock().unwrap().removed.insert(key);
            }
            Err(_) => return,
        }
    }
}

/// Sessions that die while they wait: each creates a queue of its own, connects (raw, so that
/// it can reset), starts long-poll receives with auto and client ack and sometimes a
/// subscription on it, makes sure they are in progress, resets the connection (or closes it),
/// and then a sender sends messages to that queue: acknowledged sends that nobody may take.
async fn dying_sessions(addr: String, n: usize, model: Arc<Mutex<Model>>, seed: u64) {
    use ferry_protocol::requests::Subscribe;
    use ferry_protocol::{Request, Response};
    let sender = connect(&addr, &format!("wsender{n}")).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut seq = 0u64;
    for round in 0.. {
        let queue = format!("w{n}-{seed}-{round}");
        if sender.create_queue(&queue).await.is_err() {
            return;
        }
        let queue = queue.as_str();
        // Anonymous (what `anonymous_grants` allows when authentication is on).
        let host = split_addr(&addr).0;
        // The last round's session died a moment ago: the broker frees its name once it has
        // ended that session (its receives stopped, its deliveries handed back), which on a
        // loaded machine may take a moment longer than this task's sends; never longer than
        // a few seconds.
        let mut tries = 0;
        let mut raw = loop {
            match ferry_testkit::RawConn::connect(host, &format!("waiter{n}")).await {
                Ok((raw, Response::Connected(_))) => break raw,
                Ok((_, Response::Error(e)))
                    if e.code == ErrorCode::AlreadyOnline && tries < 100 =>
                {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok((_, refused)) => panic!("waiter{n} cannot connect again: {refused:?}"),
                Err(_) => return, // the broker is gone
            }
        };
        let waits = rng.gen_range(1..20);
        for i in 0..waits {
            let ack = if rng.gen_bool(0.5) {
                AckMode::Auto
            } else {
                AckMode::Client
            };
            let wait = common::from_queue(queue, Order::Time, ReceiveMode::Take, ack, 30_000);
            if raw.send(10 + i, &Request::Receive(wait)).await.is_err() {
                return;
            }
        }
        if rng.gen_bool(0.5) {
            let ack = if rng.gen_bool(0.5) {
                AckMode::Auto
            } else {
                AckMode::Client
            };
            let sub = Subscribe {
                queue: queue.into(),
                order: Order::Time,
                ack,
                prefetch: 100,
                selector: String::new(),
            };
            if raw.send(5, &Request::Subscribe(sub)).await.is_err() {
                return;
            }
        }
        // Answered after everything before it has started.
        if raw.send(9, &Request::Ping).await.is_err() {
            return;
        }
        loop {
            match raw.recv().await {
                Ok((9, Response::Pong)) => break,
                Ok((_, Response::Subscribed { .. })) => {}
                Ok((rid, other)) => panic!("waiter request {rid} answered {other:?}"),
                Err(_) => return,
            }
        }
        let from = raw.local_addr().expect("the waiter's address");
        // Seen before the end, so that waiting for the end below cannot pass for lack of a
        // table to look in.
        assert_eq!(
            socket_state(port_of(host), from.port()),
            Some(ESTABLISHED),
            "the broker's socket for the waiter is in the kernel's table"
        );
        if rng.gen_bool(0.75) {
            raw.reset();
        } else {
            drop(raw);
        }
        end_arrived(host, from).await;
        model.lock().unwrap().dead_sessions += 1;
        for _ in 0..rng.gen_range(1..6) {
            seq += 1;
            let body = format!("w{n}-s{seed}-{seq}");
            model
                .lock()
                .unwrap()
                .intended
                .insert(body.clone(), vec![queue.to_string()]);
            let msg = OutgoingMessage {
                queues: vec![queue.to_string()],
                topic: None,
                persistent: true,
                receiver: None,
                priority: 5,
                context: 0,
                properties: Default::default(),
                body: Bytes::from(body.clone()),
                ttl_ms: 0,
                delay_ms: 0,
            };
            match sender.send(msg).await {
                Ok(id) => {
                    let mut m = model.lock().unwrap();
                    m.acked_sends.insert(body, id);
                    m.max_id = m.max_id.max(id);
                }
                Err(_) => return,
            }
        }
    }
}

/// Returns once the broker's end of the connection from `from` has taken in its reset or end
/// of stream (its socket is no longer established, or is gone). Until then TCP may hand the
/// broker what another connection sends afterwards first, and nothing on the broker's side
/// can know that the client is gone: what the broker promises starts from there (see "Auto
/// ack and a connection that dies" in docs/semantics.md). The kernel's table of sockets tells.
async fn end_arrived(broker: &str, from: std::net::SocketAddr) {
    let started = std::time::Instant::now();
    while socket_state(port_of(broker), from.port()) == Some(ESTABLISHED) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the broker's socket for {from} still established 10 s after the client ended it"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The kernel's number for an established TCP socket.
const ESTABLISHED: u8 = 1;

/// The port of `host:port`.
fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("an address with a port")
}

/// The state (as the kernel numbers them) of the socket with local port `local` and remote
/// port `remote`, from `/proc/net/tcp` and `/proc/net/tcp6`; `None` when there is none.
fn socket_state(local: u16, remote: u16) -> Option<u8> {
    let port = |field: &str| {
        field
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
    };
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .map(|line| {
                    line.split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .find(|f| f.len() > 3 && port(&f[1]) == Some(local) && port(&f[2]) == Some(remote))
        .and_then(|f| u8::from_str_radix(&f[3], 16).ok())
}

/// Drains every queue of the restarted broker: (queue, id, body, redelivered). Uses an auto-ack
/// subscription per queue so that one durability wait covers a batch of takes.
async fn drain(addr: &str) -> Drained {
    let c = connect(addr, "checker").await;
    let mut out = Vec::new();
    let listed = c.list_queues().await.expect("list");
    let names = listed.iter().map(|q| q.name.clone()).collect();
    for info in listed {
        assert_eq!(
            info.in_flight, 0,
            "nothing is in flight right after a restart"
        );
        if info.ready == 0 {
            continue;
        }
        let mut sub = c
            .subscribe(ferry_protocol::requests::Subscribe {
                queue: info.name.clone(),
                order: Order::Time,
                ack: AckMode::Auto,
                prefetch: 1000,
                selector: String::new(),
            })
            .await
            .expect("subscribe");
        for _ in 0..info.ready {
            let d = tokio::time::timeout(Duration::from_secs(30), sub.next())
                .await
                .expect("drain does not stall")
                .expect("subscription open")
                .expect("delivery");
            out.push((
                info.name.clone(),
                d.message.id,
                String::from_utf8_lossy(&d.message.body).into_owned(),
                d.message.redelivered(),
            ));
        }
        sub.cancel().await;
    }
    for q in QUEUES {
        let left = c
            .receive(common::from_queue(
                q,
                Order::Time,
                ReceiveMode::Peek,
                AckMode::Auto,
                0,
            ))
            .await
            .expect("peek");
        assert!(left.is_none(), "queue {q} drained");
    }
    // Every queue, the dying sessions' too: what the listing counted was all there was.
    for info in c.list_queues().await.expect("list") {
        assert_eq!(
            (info.ready, info.in_flight),
            (0, 0),
            "queue {} holds messages its listing did not count",
            info.name
        );
    }
    c.disconnect().await.expect("disconnect");
    Drained {
        present: out,
        queues: names,
    }
}

/// What [`drain`] found after a restart.
struct Drained {
    /// (queue, id, body, redelivered) of every message taken.
    present: Vec<(String, MessageId, String, bool)>,
    /// The queues the restarted broker listed.
    queues: HashSet<String>,
}

fn check(model: &Model, drained: &Drained, cycle: usize) {
    let present = &drained.present;
    let present_keys: HashSet<(MessageId, String)> = present
        .iter()
        .map(|(q, id, _, _)| (*id, q.clone()))
        .collect();
    // Copies that should be there but are not, and were never handed to a consumer.
    let mut missing: HashSet<(MessageId, String, String)> = HashSet::new();
    // 1. Acknowledged sends survive unless handed out (whose removal may have been made durable).
    for (body, id) in &model.acked_sends {
        for q in &model.intended[body] {
            let key = (*id, q.clone());
            if !model.delivered.contains(&key) && !present_keys.contains(&key) {
                missing.insert((*id, q.clone(), body.clone()));
            }
        }
    }
    for (q, id, body, redelivered) in present {
        let key = (*id, q.clone());
        // 2. Nothing whose removal was acknowledged comes back.
        assert!(
            !model.removed.contains(&key),
            "cycle {cycle}: {body} (id {id}) on {q} came back after its ack"
        );
        // 3. No partial multi-queue message.
        let intended = model
            .intended
            .get(body)
            .unwrap_or_else(|| panic!("cycle {cycle}: unknown message {body} on {q}"));
        assert!(
            intended.contains(q),
            "cycle {cycle}: {body} on {q}, which it was not sent to"
        );
        for other in intended {
            let k = (*id, other.clone());
            if !present_keys.contains(&k) && !model.delivered.contains(&k) {
                missing.insert((*id, other.clone(), body.clone()));
            }
        }
        // 4. Handed out with client ack and not acked: flagged.
        if model.delivered.contains(&key) {
            assert!(redelivered, "cycle {cycle}: {body} (id {id}) on {q} was handed out but is not flagged redelivered");
        }
    }
    // An auto-ack take cut off by the kill may have removed one message from its queue without
    // the consumer seeing it; anything else missing is a lost acknowledged send or a partial send.
    let mut excuses: Vec<&String> = model.pending_auto.values().collect();
    for (id, q, body) in missing {
        match excuses.iter().position(|e| **e == q) {
            Some(i) => {
                excuses.swap_remove(i);
            }
            None => panic!(
                "cycle {cycle}: {body} (id {id}) is missing from {q} ({}): an acknowledged send lost or a partial send",
                if drained.queues.contains(&q) {
                    "the queue was listed after the restart"
                } else {
                    "the queue was not listed after the restart"
                }
            ),
        }
    }
}

/// When [`crash_cycles`] lets a test look at the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// Just before the kill.
    BeforeKill,
    /// After the restart, once everything was drained.
    AfterRestart,
}

/// Runs `cycles` kill cycles against `server`, calling `observe` with its data directory at each
/// [`Moment`]. Returns how many sessions died waiting.
fn crash_cycles(
    server: BinaryServer,
    cycles: usize,
    observe: impl FnMut(Moment, &std::path::Path),
) -> usize {
    crash_cycles_as(server, None, cycles, observe)
}

/// As [`crash_cycles`], the clients authenticating as `user` (name, password) when given.
fn crash_cycles_as(
    mut server: BinaryServer,
    user: Option<(&str, &str)>,
    cycles: usize,
    mut observe: impl FnMut(Moment, &std::path::Path),
) -> usize {
    let address = |s: &BinaryServer| match user {
        Some((u, pw)) => format!("{u}:{pw}@{}", s.addr()),
        None => s.addr().to_string(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(
        std::env::var("FERRY_CRASH_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(7),
    );
    rt.block_on(async {
        let c = connect(&address(&server), "setup").await;
        for q in QUEUES {
            c.create_queue(q).await.unwrap();
        }
        c.disconnect().await.unwrap();
    });
    let mut last_max_id = 0;
    let mut dead_sessions = 0;
    let mut idle_cycles = 0;
    for cycle in 0..cycles {
        let model = Arc::new(Mutex::new(Model::default()));
        let addr = address(&server);
        // Counted from the first acknowledged send: a debug broker on a loaded machine (or
        // clients deriving their keys, PBKDF2, when there is authentication) may take longer to
        // get going than a whole run, and a cycle that acknowledged nothing tests nothing.
        let run_ms = rng.gen_range(100..700);
        let seed: u64 = rng.gen();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for p in 0..3 {
                tasks.push(tokio::spawn(producer(
                    addr.clone(),
                    p,
                    model.clone(),
                    seed + p as u64,
                )));
            }
            for n in 0..2 {
                tasks.push(tokio::spawn(consumer(
                    addr.clone(),
                    n,
                    model.clone(),
                    seed + 100 + n as u64,
                )));
            }
            for n in 0..2 {
                tasks.push(tokio::spawn(dying_sessions(
                    addr.clone(),
                    n,
                    model.clone(),
                    seed + 200 + n as u64,
                )));
            }
            let started = tokio::time::Instant::now();
            while model.lock().unwrap().acked_sends.is_empty()
                && started.elapsed() < FIRST_ACK_LIMIT
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(run_ms)).await;
            observe(Moment::BeforeKill, server.data_dir());
            server.kill9();
            for t in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
            }
        });
        server.restart().expect("ferry serve restarts");
        let drained = rt.block_on(drain(&address(&server)));
        observe(Moment::AfterRestart, server.data_dir());
        let model = model.lock().unwrap();
        if model.acked_sends.is_empty() {
            // A short run on a busy machine may end before the first send is acknowledged;
            // many such runs would test nothing (checked below).
            eprintln!("crash cycle {cycle}: no send was acknowledged in {run_ms} ms");
            idle_cycles += 1;
        }
        check(&model, &drained, cycle);
        let present = &drained.present;
        // Every previous cycle's messages were drained, so everything here is newer.
        for (_, id, _, _) in present {
            assert!(*id > last_max_id, "cycle {cycle}: id {id} is not above the previous cycle's ids (up to {last_max_id})");
        }
        assert!(
            model.max_id == 0 || model.max_id > last_max_id,
            "cycle {cycle}: ids went backwards across a restart"
        );
        last_max_id = present
            .iter()
            .map(|p| p.1)
            .chain([model.max_id, last_max_id])
            .max()
            .unwrap_or(0);
        eprintln!(
            "crash cycle {cycle}: ran {run_ms} ms, {} sends acknowledged, {} removals acknowledged, {} sessions died waiting, {} messages recovered",
            model.acked_sends.len(),
            model.removed.len(),
            model.dead_sessions,
            present.len()
        );
        dead_sessions += model.dead_sessions;
    }
    assert!(
        idle_cycles * 10 <= cycles,
        "{idle_cycles} of {cycles} cycles acknowledged no send"
    );
    dead_sessions
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged() {
    let cycles: usize = std::env::var("FERRY_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let server = BinaryServer::start(&[]).expect("ferry serve starts");
    let dead = crash_cycles(server, cycles, |_, _| {});
    eprintln!("{cycles} cycles, {dead} sessions died waiting");
    assert!(dead >= cycles, "too few sessions died waiting to tell");
}

/// The spare segment files in a data directory.
fn spares(data_dir: &std::path::Path) -> HashSet<String> {
    std::fs::read_dir(data_dir.join("store").join("segments"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".spare"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn kill_9_over_reused_segment_files_loses_nothing_acknowledged() {
    // 64 KiB segments: each cycle rolls over many of them, the compaction every start (and
    // every second) turns the drained ones into spares, and the next cycle's segments reuse
    // them, so the kills land in reused files holding older records past their end.
    let config = tempfile::tempdir().unwrap();
    let path = config.path().join("ferry.toml");
    std::fs::write(&path, "segment_bytes = 65536\n").unwrap();
    let server =
        BinaryServer::start(&["--config", path.to_str().unwrap()]).expect("ferry serve starts");
    let mut after_restart = HashSet::new();
    let mut reused = 0;
    let _ = crash_cycles(server, 10, |moment, dir| match moment {
        Moment::AfterRestart => after_restart = spares(dir),
        Moment::BeforeKill => {
            // A spare that went away was renamed to a new segment: compaction only adds.
            reused += after_restart.difference(&spares(dir)).count();
        }
    });
    eprintln!("spare files reused during the runs: {reused}");
    assert!(reused > 0, "no run reused a spare segment file");
}

#[test]
fn kill_9_under_fsync_never_loses_nothing_acknowledged() {
    // Without fsyncs a record still reaches the operating system before its operation is
    // acknowledged, so killing the process (not the machine) loses nothing acknowledged. Small
    // segments add seals, spare reuse and the background writeback's syncs to what a kill can
    // interrupt.
    let server = BinaryServer::start(&["--fsync", "never", "--segment-bytes", "65536"])
        .expect("ferry serve starts");
    let _ = crash_cycles(server, 10, |_, _| {});
}

#[test]
fn kill_9_with_authentication_on_loses_nothing_acknowledged() {
    // A user created before the first start: every client authenticates with SCRAM, except
    // the sessions that die waiting, which connect anonymously with the grants
    // `anonymous_grants` gives them. Users are kept outside the log: they survive every kill.
    let dir = tempfile::tempdir().unwrap();
    let mut add = std::process::Command::new(ferry_testkit::ferry_bin())
        .args(["user", "add", "crash", "--password-stdin", "--data-dir"])
        .arg(dir.path())
        .args(["--grant", "manage queue *", "--grant", "send queue *"])
        .args(["--grant", "receive queue *", "--grant", "client *"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ferry user add");
    {
        use std::io::Write;
        let mut stdin = add.stdin.take().expect("stdin");
        stdin.write_all(b"crash-pw\n").expect("password");
    }
    assert!(add.wait().expect("ferry user add").success());
    let server = BinaryServer::start_in(
        dir.path(),
        &["--anonymous-grants", "receive queue w*,client waiter*"],
    )
    .expect("ferry serve starts");
    let _ = crash_cycles_as(server, Some(("crash", "crash-pw")), 10, |_, _| {});
}
