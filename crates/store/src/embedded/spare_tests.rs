//! Reusing compacted segment files: spares are kept up to their limit and reused; the old
//! records a reused file holds never come back, whatever a crash leaves; a store written in
//! format version 1 opens and continues in the current version.

use std::path::PathBuf;

use ferry_protocol::{AckMode, ReceiveMode};

use super::engine_tests::{bodies, config, message, open, seg_dir, spec};
use super::format::record::{self, Scan};
use super::format::{header, FORMAT_VERSION};
use super::{
    parse_segment_name, CrashMode, EmbeddedStore, FaultKind, FaultyBackend, FsyncPolicy,
    DEFAULT_SPARE_SEGMENTS,
};
use crate::api::Store;

/// The files in the segments directory named `*.<extension>`, in name order.
fn files(disk: &FaultyBackend, extension: &str) -> Vec<PathBuf> {
    disk.files()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| {
            p.parent() == Some(seg_dir().as_path())
                && p.extension().and_then(|e| e.to_str()) == Some(extension)
        })
        .collect()
}

/// Message `i`'s body: every message has the same size, so every `MessageAdded` record does,
/// and a reused file's old records line up with the new segment's.
fn body(i: usize) -> String {
    format!("message {i:06}")
}

async fn prepare(store: &EmbeddedStore) {
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
}

async fn send(store: &EmbeddedStore, range: std::ops::Range<usize>) {
    for i in range {
        store
            .queues()
            .send(message(&["q"], None, &body(i), "x"))
            .await
            .unwrap();
    }
}

/// Takes every message on the queue.
async fn drain(store: &EmbeddedStore) {
    let take = spec("q", ReceiveMode::Take, AckMode::Auto, 1);
    while !store.queues().receive(&take, 100).await.unwrap().is_empty() {}
}

async fn compact(store: &EmbeddedStore) {
    for _ in 0..10 {
        store.upkeep().maintain().await.unwrap();
    }
}

#[tokio::test]
async fn compacted_segments_become_spares_and_new_segments_reuse_them() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await;
    send_and_take(&store, 60).await;
    compact(&store).await;
    let kept = files(&disk, "spare");
    assert!(
        kept.len() >= 6 && kept.len() <= DEFAULT_SPARE_SEGMENTS,
        "{kept:?}"
    );
    assert_eq!(store.spare_segments(), kept.len());
    let logs = files(&disk, "log").len();
    let head = *store.segments().last().unwrap();
    send(&store, 60..80).await;
    let rolled = *store.segments().last().unwrap() - head;
    assert!(rolled >= 3, "the sends rolled over {rolled} segments");
    // Each new segment took a spare's place: no file was created.
    let left = files(&disk, "spare");
    assert_eq!(left.len(), kept.len() - rolled as usize);
    assert_eq!(files(&disk, "log").len(), logs + rolled as usize);
    assert!(left.iter().all(|p| kept.contains(p)));
    drop(store);
    let store = open(&disk, 512).await;
    let expected: Vec<String> = (60..80).map(body).collect();
    assert_eq!(bodies(&store, "q").await, expected);
    assert_eq!(store.spare_segments(), left.len());
}

#[tokio::test]
async fn spares_are_kept_up_to_the_limit_and_trimmed_to_it_at_open() {
    // A limit of 0 keeps none: compacted segments are deleted.
    let disk = FaultyBackend::new();
    let mut cfg = config(&disk, 512);
    cfg.spare_segments = 0;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    send_and_take(&store, 60).await;
    compact(&store).await;
    assert!(files(&disk, "spare").is_empty());
    assert!(files(&disk, "log").len() <= 3, "{:?}", files(&disk, "log"));
    drop(store);

    // A limit of 3 keeps 3, and a store reopened with a limit of 1 deletes the others.
    let disk = FaultyBackend::new();
    let mut cfg = config(&disk, 512);
    cfg.spare_segments = 3;
    let store = EmbeddedStore::open(cfg.clone()).await.unwrap();
    send_and_take(&store, 60).await;
    compact(&store).await;
    assert_eq!(files(&disk, "spare").len(), 3);
    drop(store);
    cfg.spare_segments = 1;
    let store = EmbeddedStore::open(cfg).await.unwrap();
    assert_eq!(files(&disk, "spare").len(), 1);
    assert_eq!(store.spare_segments(), 1);
}

/// Writes messages until the log rolls onto a reused spare, then `extra` more; returns the
/// bodies sent.
async fn send_into_a_reused_segment(
    store: &EmbeddedStore,
    disk: &FaultyBackend,
    from: usize,
    extra: usize,
) -> Vec<String> {
    let spares = files(disk, "spare").len();
    assert!(spares > 0, "no spare to reuse");
    let mut i = from;
    while files(disk, "spare").len() == spares {
        send(store, i..i + 1).await;
        i += 1;
    }
    send(store, i..i + extra).await;
    (from..i + extra).map(body).collect()
}

/// Creates the client and queue, sends `n` messages and takes them all: their segments are
/// dead, ready for compaction.
async fn send_and_take(store: &EmbeddedStore, n: usize) {
    prepare(store).await;
    send(store, 0..n).await;
    drain(store).await;
}

/// Sends 40 messages and takes them, and compacts: their segments become spares.
async fn churn_into_spares(store: &EmbeddedStore) {
    send_and_take(store, 40).await;
    compact(store).await;
}

#[tokio::test]
async fn old_records_of_a_reused_file_never_come_back_after_kill_9() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 1024).await;
    churn_into_spares(&store).await;
    let sent = send_into_a_reused_segment(&store, &disk, 1000, 1).await;
    let head = files(&disk, "log").pop().unwrap();
    let image = disk.crash(CrashMode::Process);
    drop(store);
    let left = image.file(&head).unwrap().len();
    let store = open(&image, 1024).await;
    // The reused file held an older segment's records past the new end, lined up with the
    // new records: recovery stopped at the real end and cut them off.
    let now = image.file(&head).unwrap().len();
    assert!(now < left, "{left} bytes before recovery, {now} after");
    let got = bodies(&store, "q").await;
    assert_eq!(
        got, sent,
        "exactly the messages sent since, none of the old"
    );
}

#[tokio::test]
async fn a_torn_write_over_old_records_keeps_a_prefix_and_nothing_old() {
    for seed in 0..40 {
        let disk = FaultyBackend::new();
        let mut cfg = config(&disk, 1024);
        // Nothing synced until the segment is sealed: the whole reused segment is at stake.
        cfg.fsync = FsyncPolicy::Never;
        let store = EmbeddedStore::open(cfg).await.unwrap();
        churn_into_spares(&store).await;
        let sent = send_into_a_reused_segment(&store, &disk, 1000, 4).await;
        let mode = if seed % 2 == 0 {
            CrashMode::Machine { seed }
        } else {
            CrashMode::MachineGarbled { seed }
        };
        let image = disk.crash(mode);
        drop(store);
        let store = open(&image, 1024).await;
        let got = bodies(&store, "q").await;
        assert!(
            sent.starts_with(&got),
            "seed {seed}: recovered {got:?}, not a prefix of {sent:?}"
        );
    }
}

/// Rewrites every segment on `disk` as format version 1 wrote it: version 1 in the header, and
/// records with plain CRCs.
fn rewrite_as_version_1(disk: &FaultyBackend) {
    for path in files(disk, "log") {
        let name = path.file_name().unwrap().to_str().unwrap();
        let n = parse_segment_name(name).unwrap();
        let mut bytes = disk.file(&path).unwrap();
        let (_, header_len) = header::decode(&bytes).unwrap();
        let old = header::as_version(bytes[..header_len].to_vec(), 1);
        bytes[..header_len].copy_from_slice(&old);
        let mask = record::segment_mask(n);
        let mut pos = header_len;
        loop {
            match record::next_frame(&bytes[pos..], mask) {
                Scan::End => break,
                Scan::Record { size, .. } => {
                    record::mask_crc(&mut bytes[pos..], mask);
                    pos += size;
                }
                Scan::Torn(why) => panic!("segment {n}: {why}"),
            }
        }
        disk.set_file(&path, bytes);
    }
}

#[tokio::test]
async fn a_version_1_store_opens_and_continues_in_a_new_segment() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await;
    prepare(&store).await;
    send(&store, 0..12).await;
    let last = *store.segments().last().unwrap();
    drop(store);
    rewrite_as_version_1(&disk);

    let store = open(&disk, 512).await;
    let mut expected: Vec<String> = (0..12).map(body).collect();
    assert_eq!(bodies(&store, "q").await, expected);
    assert_eq!(*store.segments().last().unwrap(), last + 1);
    send(&store, 12..16).await;
    drop(store);

    let store = open(&disk, 512).await;
    expected.extend((12..16).map(body));
    assert_eq!(bodies(&store, "q").await, expected);
    let versions: Vec<u16> = files(&disk, "log")
        .iter()
        .map(|p| header::decode(&disk.file(p).unwrap()).unwrap().0.version)
        .collect();
    let old = versions.iter().filter(|&&v| v == 1).count();
    assert!(old >= 2, "{versions:?}");
    assert!(versions[..old].iter().all(|&v| v == 1), "{versions:?}");
    assert!(
        versions[old..].iter().all(|&v| v == FORMAT_VERSION),
        "{versions:?}"
    );
}

#[tokio::test]
async fn a_segment_that_cannot_become_a_spare_is_deleted() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await;
    send_and_take(&store, 60).await;
    disk.fail_renames(u32::MAX, FaultKind::Io);
    compact(&store).await;
    assert!(files(&disk, "spare").is_empty());
    assert!(files(&disk, "log").len() <= 3, "{:?}", files(&disk, "log"));
    send(&store, 60..70).await;
    drop(store);
    let store = open(&disk, 512).await;
    let expected: Vec<String> = (60..70).map(body).collect();
    assert_eq!(bodies(&store, "q").await, expected);
}

#[tokio::test]
async fn a_spare_that_cannot_be_reused_gives_way_to_a_new_file() {
    let disk = FaultyBackend::new();
    let store = open(&disk, 512).await;
    churn_into_spares(&store).await;
    let spares = files(&disk, "spare");
    assert!(!spares.is_empty());
    disk.fail_renames(u32::MAX, FaultKind::Io);
    let head = *store.segments().last().unwrap();
    send(&store, 100..120).await;
    assert!(*store.segments().last().unwrap() > head, "the log rolled");
    // Every spare was tried once and dropped from the pool; the files stay for the next open.
    assert_eq!(store.spare_segments(), 0);
    assert_eq!(files(&disk, "spare"), spares);
    drop(store);
    disk.fail_renames(0, FaultKind::Io);
    let store = open(&disk, 512).await;
    let expected: Vec<String> = (100..120).map(body).collect();
    assert_eq!(bodies(&store, "q").await, expected);
    assert_eq!(store.spare_segments(), spares.len());
}

/// Sends messages until the log has rolled once, then one more; returns how many.
async fn send_past_one_roll(store: &EmbeddedStore) -> usize {
    let mut n = 0;
    while store.segments().len() < 2 {
        send(store, n..n + 1).await;
        n += 1;
    }
    send(store, n..n + 1).await;
    n + 1
}

#[tokio::test]
async fn garbage_spare_files_are_overwritten_and_odd_names_ignored() {
    let dir = seg_dir();
    // Where the second segment ends when it is a new file.
    let probe = FaultyBackend::new();
    let store = open(&probe, 512).await;
    prepare(&store).await;
    let sent = send_past_one_roll(&store).await;
    let end = probe.file(&files(&probe, "log")[1]).unwrap().len();
    drop(store);

    // A spare holding garbage up to that end, then intact records that add a "junk" message
    // (unmasked, as a version 1 segment or a hostile file would hold them), lined up to be
    // read right after the new segment's last record; and files whose names only look like
    // spares.
    let props = ferry_protocol::Properties::new();
    let junk_message = record::MessageFields {
        id: 1_000,
        created_at: 1,
        context: 0,
        priority: 5,
        sender: "p",
        receiver: None,
        properties: &props,
        body: b"junk",
        deliver_at: 0,
        expires_at: 0,
    };
    let mut junk = vec![0xA5u8; end];
    for _ in 0..100 {
        record::encode_message_added(&mut junk, &junk_message, [("q", 0u32)].into_iter());
    }
    let disk = FaultyBackend::new();
    disk.set_file(&super::spare_path(&dir, 3), junk);
    let odd = ["3.spare", "00000000000000000004.spare.tmp", "x.spare"];
    for name in odd {
        disk.set_file(&dir.join(name), b"FERRYLOG junk".to_vec());
    }
    let store = open(&disk, 512).await;
    assert_eq!(store.spare_segments(), 1);
    prepare(&store).await;
    assert_eq!(send_past_one_roll(&store).await, sent);
    assert_eq!(store.spare_segments(), 0, "the log rolled onto the spare");
    let image = disk.crash(CrashMode::Process);
    drop(store);
    let store = open(&image, 512).await;
    let expected: Vec<String> = (0..sent).map(body).collect();
    assert_eq!(bodies(&store, "q").await, expected);
    for name in odd {
        assert!(image.file(&dir.join(name)).is_some(), "{name} left alone");
    }
}
