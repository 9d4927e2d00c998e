//! Recovery from damaged logs: a torn or corrupt tail of the last segment is truncated; damage
//! anywhere else refuses to open with a clear error.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::PathBuf;

use ferry_protocol::{AckMode, ReceiveMode};
use ferry_store::embedded::FaultyBackend;
use ferry_store::{Store, StoreError};

mod common;
use common::{bodies, msg, open, peek_all, segments, spec};

const BIG: u64 = 1 << 30;

/// A disk with queue q and messages m0..m4, plus the segment bytes before and after m5.
async fn five_then_one() -> (std::path::PathBuf, Vec<u8>, usize) {
    let disk = FaultyBackend::new();
    let store = open(&disk, BIG).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    for i in 0..5 {
        store
            .queues()
            .send(msg(&["q"], &format!("m{i}")))
            .await
            .unwrap();
    }
    let (path, before) = segments(&disk).pop().unwrap();
    store.queues().send(msg(&["q"], "m5")).await.unwrap();
    drop(store);
    let bytes = disk.file(&path).unwrap();
    assert!(bytes.len() > before);
    (path, bytes, before)
}

async fn reopen_with(path: &std::path::Path, bytes: Vec<u8>) -> Result<Vec<String>, StoreError> {
    let disk = FaultyBackend::new();
    disk.set_file(path, bytes);
    let store = open(&disk, BIG).await?;
    let got = bodies(&peek_all(&store, "q").await);
    // The repaired log takes new records and replays them.
    store.queues().send(msg(&["q"], "new")).await.unwrap();
    drop(store);
    let store = open(&disk, BIG).await.unwrap();
    let again = bodies(&peek_all(&store, "q").await);
    let mut expect = got.clone();
    expect.push("new".into());
    assert_eq!(again, expect);
    Ok(got)
}

fn first_five() -> Vec<String> {
    (0..5).map(|i| format!("m{i}")).collect()
}

#[tokio::test]
async fn torn_tail_at_every_byte_loses_only_that_record() {
    let (path, bytes, before) = five_then_one().await;
    for cut in before..bytes.len() {
        let got = reopen_with(&path, bytes[..cut].to_vec()).await.unwrap();
        assert_eq!(got, first_five(), "cut at {cut}");
    }
    let mut all = first_five();
    all.push("m5".into());
    assert_eq!(reopen_with(&path, bytes.clone()).await.unwrap(), all);
}

#[tokio::test]
async fn flipped_bit_in_last_record_is_truncated() {
    let (path, bytes, before) = five_then_one().await;
    for at in before..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        let got = reopen_with(&path, b).await.unwrap();
        assert_eq!(got, first_five(), "flip at {at}");
    }
}

#[tokio::test]
async fn garbage_after_the_last_record_is_truncated() {
    let (path, mut bytes, _) = five_then_one().await;
    bytes.extend_from_slice(&[0u8; 100]);
    assert_eq!(reopen_with(&path, bytes.clone()).await.unwrap().len(), 6);
    bytes.truncate(bytes.len() - 100);
    bytes.extend_from_slice(&[0xAB; 3]);
    assert_eq!(reopen_with(&path, bytes).await.unwrap().len(), 6);
}

/// A disk whose log spans several segments.
async fn several_segments() -> FaultyBackend {
    let disk = FaultyBackend::new();
    let store = open(&disk, 200).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    for i in 0..20 {
        store
            .queues()
            .send(msg(&["q"], &format!("message {i}")))
            .await
            .unwrap();
    }
    drop(store);
    assert!(segments(&disk).len() >= 3);
    disk
}

#[tokio::test]
async fn corrupt_non_last_segment_refuses_to_open() {
    let disk = several_segments().await;
    let (first, len) = segments(&disk)[0].clone();
    let mut bytes = disk.file(&first).unwrap();
    bytes[len - 3] ^= 0x01; // inside the last record of the first segment
    disk.set_file(&first, bytes);
    let err = open(&disk, 200).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Internal(_)), "{text}");
    assert!(
        text.contains("corrupt") && text.contains("00000000000000000001.log"),
        "{text}"
    );

    // A torn tail in a non-last segment is corruption too (sealed segments are synced).
    let disk = several_segments().await;
    let (second, len) = segments(&disk)[1].clone();
    let bytes = disk.file(&second).unwrap();
    disk.set_file(&second, bytes[..len - 1].to_vec());
    assert!(open(&disk, 200)
        .await
        .unwrap_err()
        .to_string()
        .contains("corrupt"));

    // So is a damaged header.
    let disk = several_segments().await;
    let (first, _) = segments(&disk)[0].clone();
    let mut bytes = disk.file(&first).unwrap();
    bytes[20] ^= 0xff;
    disk.set_file(&first, bytes);
    assert!(open(&disk, 200)
        .await
        .unwrap_err()
        .to_string()
        .contains("header"));
}

/// A store of several segments, what it holds, its last segment's path and the path the next
/// segment would have.
async fn before_the_next_segment() -> (FaultyBackend, Vec<String>, PathBuf, PathBuf) {
    let disk = several_segments().await;
    let store = open(&disk, 200).await.unwrap();
    let before = bodies(&peek_all(&store, "q").await);
    drop(store);
    let (last, _) = segments(&disk).pop().unwrap();
    let n: u64 = last.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let next = last.with_file_name(format!("{:020}.log", n + 1));
    (disk, before, last, next)
}

#[tokio::test]
async fn torn_header_of_last_segment_removes_it() {
    let (disk, before, _, next) = before_the_next_segment().await;
    // A crash while creating segment n+1 leaves a few bytes of its header.
    disk.set_file(&next, b"FERRYL".to_vec());
    let store = open(&disk, 200).await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "q").await), before);
    assert!(disk.file(&next).is_none(), "the torn segment was removed");
}

#[tokio::test]
async fn unknown_format_version_refuses_to_open() {
    let disk = FaultyBackend::new();
    drop(open(&disk, BIG).await.unwrap());
    let (path, _) = segments(&disk)[0].clone();
    let mut bytes = disk.file(&path).unwrap();
    bytes[16] = 4; // version 4
    let body_len = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let crc = crc32c::crc32c(&bytes[16..16 + body_len]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    disk.set_file(&path, bytes);
    let err = open(&disk, BIG).await.unwrap_err().to_string();
    assert!(err.contains("version 4"), "{err}");
    assert!(err.contains("reads versions 1 to 3"), "{err}");
}

#[tokio::test]
async fn a_last_segment_still_holding_another_segments_header_is_removed() {
    let (disk, before, last, next) = before_the_next_segment().await;
    // A crash right after a spare file was renamed to segment n+1, before its new header was
    // written: the file still holds an older segment's header and records.
    disk.set_file(&next, disk.file(&last).unwrap());
    let store = open(&disk, 200).await.unwrap();
    assert_eq!(bodies(&peek_all(&store, "q").await), before);
    assert!(disk.file(&next).is_none(), "the reused file was removed");
}

#[tokio::test]
async fn a_sealed_segment_holding_another_segments_header_is_corruption() {
    let disk = several_segments().await;
    let all = segments(&disk);
    assert!(all.len() >= 3, "{all:?}");
    // The second segment's file holds the first one's bytes: no crash leaves that.
    disk.set_file(&all[1].0, disk.file(&all[0].0).unwrap());
    let err = open(&disk, 200).await.unwrap_err().to_string();
    assert!(err.contains("header says segment"), "{err}");
    assert!(err.contains("refusing to open"), "{err}");
}

#[tokio::test]
async fn leased_messages_come_back_redelivered_after_a_crash() {
    let disk = FaultyBackend::new();
    let store = open(&disk, BIG).await.unwrap();
    store.sessions().register_client("c").await.unwrap();
    store.queues().create_queue("q").await.unwrap();
    store.queues().send(msg(&["q"], "a")).await.unwrap();
    store.queues().send(msg(&["q"], "b")).await.unwrap();
    let lease = spec("q", ReceiveMode::Take, AckMode::Client, 1);
    let d = store.queues().receive(&lease, 1).await.unwrap();
    store
        .queues()
        .nack(1, &[d[0].delivery_id], true)
        .await
        .unwrap();
    store.queues().receive(&lease, 2).await.unwrap();
    let image = disk.crash(ferry_store::embedded::CrashMode::Machine { seed: 1 });
    let store2 = open(&image, BIG).await.unwrap();
    let got = peek_all(&store2, "q").await;
    assert_eq!(bodies(&got), vec!["a", "b"]);
    assert_eq!(got[0].message.delivery_count, 2);
    assert_eq!(got[1].message.delivery_count, 1);
    drop(store);
}
