//! The client registry in the log: segment headers do not grow with it, registrations are
//! compacted like messages and survive reopens and crashes, forgotten names stay forgotten,
//! a version 2 store keeps the clients its headers listed, and an idle store's compaction
//! comes to rest whatever its registry or header size.

use ferry_protocol::{AckMode, ReceiveMode};

use super::engine_tests::{bodies, message, open, seg_dir, spec};
use super::format::header::{self, TopicSnapshot};
use super::format::record::{self, kind};
use super::{parse_segment_name, segment_path, CrashMode, EmbeddedStore, FaultyBackend};
use crate::api::{Registration, Store};
use crate::clock::wall_ms;

/// Every segment on `disk` with its header length and total length, by number.
fn segments(disk: &FaultyBackend) -> Vec<(u64, usize, usize)> {
    disk.files()
        .into_iter()
        .filter(|(p, _)| p.parent() == Some(seg_dir().as_path()))
        .filter_map(|(p, len)| {
            let n = parse_segment_name(p.file_name()?.to_str()?)?;
            let (_, header_len) = header::decode(&disk.file(&p)?).ok()?;
            Some((n, header_len, len))
        })
        .collect()
}

/// A client name of 100 bytes.
fn client(i: usize) -> String {
    format!("{i:06}-{}", "x".repeat(93))
}

async fn register(store: &EmbeddedStore, range: std::ops::Range<usize>) {
    for i in range {
        store.sessions().register_client(&client(i)).await.unwrap();
    }
}

/// Runs compaction until it writes nothing more (at most `rounds` times); returns how many
/// runs wrote something.
async fn settle(store: &EmbeddedStore, disk: &FaultyBackend, rounds: usize) -> usize {
    let mut busy = 0;
    for _ in 0..rounds {
        let before = (disk.write_count(), disk.files());
        store.upkeep().maintain().await.unwrap();
        if (disk.write_count(), disk.files()) == before {
            return busy;
        }
        busy += 1;
    }
    busy
}

#[tokio::test]
async fn headers_do_not_grow_with_the_registry() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 4096).await;
    store.queues().create_queue("q").await.unwrap();
    register(&store, 0..2000).await;
    let segs = segments(&disk);
    assert!(
        segs.len() > 40,
        "the registrations rolled the log: {segs:?}"
    );
    // The first header was written before queue "q" existed; every later one names "q".
    assert!(
        segs[1..].iter().all(|&(_, h, _)| h == segs[1].1),
        "every header is the size of the second: {segs:?}"
    );
    // The log holds the registrations' records, a header per segment, and nothing else.
    let records = 2000 * record::name_len(&client(0)) + record::name_len("q");
    let total: usize = segs.iter().map(|&(_, _, len)| len).sum();
    let headers: usize = segs.iter().map(|&(_, h, _)| h).sum();
    assert_eq!(total - headers, records);
    assert_eq!(store.client_count(), 2000);
}

#[tokio::test]
async fn registrations_are_compacted_and_survive_reopen_and_crash() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 1024).await;
    store.queues().create_queue("q").await.unwrap();
    register(&store, 0..20).await;
    let first = *store.segments().first().unwrap();
    // Messages come and go until the segments holding the registrations are compacted away.
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    for round in 0..40 {
        for i in 0..10 {
            let body = format!("m{round}-{i}");
            store
                .queues()
                .send(message(&["q"], None, &body, "x"))
                .await
                .unwrap();
        }
        while !store.queues().receive(&take, 100).await.unwrap().is_empty() {}
        store.upkeep().maintain().await.unwrap();
    }
    assert!(
        *store.segments().first().unwrap() > first + 2,
        "compaction deleted the first segments: {:?}",
        store.segments()
    );
    let check = |store: std::sync::Arc<EmbeddedStore>| async move {
        for i in 0..20 {
            assert!(
                store.sessions().client_exists(&client(i)).await.unwrap(),
                "{i}"
            );
        }
        assert_eq!(store.client_count(), 21, "20 clients and the sender");
    };
    check(open(&disk.crash(CrashMode::Process), 1024).await).await;
    drop(store);
    check(open(&disk, 1024).await).await;
}

#[tokio::test]
async fn forgotten_names_stay_forgotten_and_their_keys_serve_new_names() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await;
    store.queues().create_queue("q").await.unwrap();
    register(&store, 0..5).await;
    assert_eq!(
        store
            .upkeep()
            .expire_clients(wall_ms() + 10, 0)
            .await
            .unwrap(),
        5,
        "every name holds nothing"
    );
    store.sessions().register_client("late").await.unwrap();
    let mut addressed = message(&["q"], None, "for late", "x");
    addressed.receiver = Some("late".into());
    store.queues().send(addressed).await.unwrap();
    drop(store);
    let store = open(&disk, 512).await;
    for i in 0..5 {
        assert!(
            !store.sessions().client_exists(&client(i)).await.unwrap(),
            "{i}"
        );
    }
    assert!(store.sessions().client_exists("late").await.unwrap());
    let mut take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    take.client = "late".into();
    let got = store.queues().receive(&take, 10).await.unwrap();
    assert_eq!(got.len(), 1, "the message addressed to the new name");
}

#[tokio::test]
async fn ephemeral_names_are_written_nowhere_and_come_back_only_with_their_messages() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 1 << 20).await;
    store.queues().create_queue("q").await.unwrap();
    let before = disk.write_count();
    store
        .sessions()
        .claim_session("cli-1", 1, Registration::Ephemeral)
        .await
        .unwrap();
    store
        .sessions()
        .claim_session("cli-2", 2, Registration::Ephemeral)
        .await
        .unwrap();
    assert_eq!(
        disk.write_count(),
        before,
        "an ephemeral claim writes nothing"
    );
    let mut m = message(&["q"], None, "from cli-2", "x");
    m.sender = "cli-2".into();
    store.queues().send(m).await.unwrap();
    store.sessions().end_session("cli-1", 1).await.unwrap();
    store.sessions().end_session("cli-2", 2).await.unwrap();
    assert!(!store.sessions().client_exists("cli-1").await.unwrap());
    assert!(
        store.sessions().client_exists("cli-2").await.unwrap(),
        "its message"
    );
    drop(store);
    let store = open(&disk, 1 << 20).await;
    assert!(!store.sessions().client_exists("cli-1").await.unwrap());
    assert!(
        store.sessions().client_exists("cli-2").await.unwrap(),
        "the stored message names it"
    );
    assert_eq!(bodies(&store, "q").await, ["from cli-2"]);
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    store.queues().receive(&take, 1).await.unwrap();
    assert_eq!(
        store
            .upkeep()
            .expire_clients(wall_ms(), 3_600_000)
            .await
            .unwrap(),
        1
    );
    assert!(!store.sessions().client_exists("cli-2").await.unwrap());
    let log: usize = segments(&disk).iter().map(|s| s.2).sum();
    let bytes: Vec<u8> = segments(&disk)
        .iter()
        .flat_map(|s| disk.file(&segment_path(&seg_dir(), s.0)).unwrap())
        .collect();
    assert_eq!(bytes.len(), log);
    assert!(
        !bytes.windows(5).any(|w| w == b"cli-1"),
        "no record names cli-1"
    );
}

/// Builds a store as format version 2 wrote it: one segment whose header lists the clients.
fn version_2_store(disk: &FaultyBackend, clients: &[String]) {
    let head = header::encode(
        1,
        1,
        ["q"].into_iter(),
        clients.iter().map(String::as_str),
        &[],
        &[],
        &TopicSnapshot::default(),
    );
    let mut bytes = header::as_version(head, 2);
    let at = bytes.len();
    record::encode_name(&mut bytes, kind::QUEUE_CREATED, "r");
    record::mask_crc(&mut bytes[at..], record::segment_mask(1));
    disk.set_file(&segment_path(&seg_dir(), 1), bytes);
}

#[tokio::test]
async fn a_version_2_store_keeps_the_clients_its_header_listed() {
    let disk = FaultyBackend::new();
    let names: Vec<String> = (0..30).map(client).collect();
    version_2_store(&disk, &names);
    let store = open(&disk, 1024).await;
    for n in &names {
        assert!(store.sessions().client_exists(n).await.unwrap());
    }
    // Enough traffic to roll and to compact the version 2 segment away.
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    for round in 0..30 {
        for i in 0..10 {
            let body = format!("m{round}-{i}");
            store
                .queues()
                .send(message(&["q"], None, &body, "x"))
                .await
                .unwrap();
        }
        while !store.queues().receive(&take, 100).await.unwrap().is_empty() {}
        store.upkeep().maintain().await.unwrap();
    }
    assert!(
        store.segments().first().is_some_and(|&n| n > 1),
        "the version 2 segment is gone: {:?}",
        store.segments()
    );
    assert!(segments(&disk).iter().all(|&(n, _, _)| header::decode(
        &disk.file(&segment_path(&seg_dir(), n)).unwrap()
    )
    .unwrap()
    .0
    .clients
    .is_empty()));
    drop(store);
    let store = open(&disk, 1024).await;
    for n in &names {
        assert!(store.sessions().client_exists(n).await.unwrap(), "{n}");
    }
    let queues: Vec<String> = store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(queues, ["q", "r"]);
}

#[tokio::test]
async fn an_idle_store_with_a_big_registry_comes_to_rest() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 64 * 1024).await;
    store.queues().create_queue("q").await.unwrap();
    register(&store, 0..3000).await;
    for i in 0..20 {
        store
            .queues()
            .send(message(&["q"], None, &format!("m{i}"), "x"))
            .await
            .unwrap();
    }
    let busy = settle(&store, &disk, 50).await;
    assert!(busy < 50, "compaction never came to rest");
    let at_rest = (disk.write_count(), disk.sync_count(), disk.files());
    for _ in 0..20 {
        store.upkeep().maintain().await.unwrap();
    }
    assert_eq!(
        (disk.write_count(), disk.sync_count(), disk.files()),
        at_rest,
        "an idle store writes nothing"
    );
    assert_eq!(bodies(&store, "q").await.len(), 20);
}

#[tokio::test]
async fn a_header_larger_than_a_segment_neither_rolls_at_every_record_nor_keeps_compacting() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 16 * 1024).await;
    // About 45 KB of queue names in every header: three segments' worth.
    for i in 0..300 {
        store
            .queues()
            .create_queue(&format!("{i:04}-{}", "q".repeat(145)))
            .await
            .unwrap();
    }
    store.queues().create_queue("q").await.unwrap();
    let before = store.segments().len();
    for i in 0..400 {
        store
            .queues()
            .send(message(&["q"], None, &format!("message {i:04}"), "x"))
            .await
            .unwrap();
    }
    let rolled = store.segments().len() - before;
    assert!(rolled <= 6, "400 small messages rolled {rolled} segments");
    // More live records than a segment holds: rewriting them rolls the log.
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    store.queues().receive(&take, 100).await.unwrap();
    let busy = settle(&store, &disk, 50).await;
    assert!(busy < 50, "compaction never came to rest");
    let at_rest = (disk.write_count(), disk.files());
    for _ in 0..20 {
        store.upkeep().maintain().await.unwrap();
    }
    assert_eq!((disk.write_count(), disk.files()), at_rest);
    assert_eq!(bodies(&store, "q").await.len(), 300);
}
