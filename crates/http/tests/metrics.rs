//! `/metrics` read by a real Prometheus parser (`prometheus_client`'s strict OpenMetrics
//! parser, in Python: `scripts/test` installs it) after a scripted workload on the real binary,
//! and checked against the counts that workload makes.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{client, start, Api};
use ferry_protocol::requests::{Receive, SubscribeTopic};
use ferry_protocol::{AckMode, OutgoingMessage, QueueOptions, ReceiveMode, Source};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// The parsed exposition: family types, and every sample by name and labels.
struct Parsed {
    families: BTreeMap<String, String>,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Parsed {
    /// The value of sample `name` with exactly `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|(n, l, _)| n == name && *l == want)
            .map(|s| s.2)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }
}

/// Parses `text` with the Python parser; panics with its error if the text is not valid
/// OpenMetrics.
fn parse(text: &str) -> Parsed {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/parse_metrics.py"
    );
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/test installs it with prometheus_client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("No module named"),
        "prometheus_client is missing: pip install prometheus_client (scripts/test does)\n{err}"
    );
    assert!(
        out.status.success(),
        "the OpenMetrics parser refuses the exposition: {err}\n{text}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    Parsed {
        families: v["families"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, t)| (k.clone(), t.as_str().unwrap().to_owned()))
            .collect(),
        samples: v["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let labels = s[1]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect();
                (
                    s[0].as_str().unwrap().to_owned(),
                    labels,
                    s[2].as_f64().unwrap(),
                )
            })
            .collect(),
    }
}

fn receive(queue: &str, ack: AckMode) -> Receive {
    Receive {
        source: Source::Queue(queue.into()),
        order: ferry_protocol::Order::Priority,
        mode: ReceiveMode::Take,
        ack,
        wait_ms: 0,
        selector: String::new(),
    }
}

#[tokio::test]
async fn metrics_parse_and_count_a_scripted_workload() {
    let server = start();
    let api = Api::of(&server);
    let producer = client(&server, "producer").await;
    let consumer = client(&server, "consumer").await;
    producer.create_queue("work.dead").await.unwrap();
    producer
        .create_queue_with(
            "work",
            QueueOptions {
                max_deliveries: 1,
                dead_letter_queue: Some("work.dead".into()),
                expiry_queue: Some("work.dead".into()),
            },
        )
        .await
        .unwrap();
    let msgs: Vec<OutgoingMessage> = (0..10)
        .map(|i| OutgoingMessage::new("work", format!("job {i}")))
        .collect();
    for r in producer.send_batch(msgs).await.unwrap() {
        r.unwrap();
    }
    let mut short = OutgoingMessage::new("work", "short-lived");
    short.ttl_ms = 1;
    short.priority = 1;
    producer.send(short).await.unwrap();
    api.call(reqwest::Method::PUT, "/api/topics/news", None)
        .await;
    for name in ["a", "b"] {
        // Created without consuming it: nothing is pushed, so the delivery count below is
        // the receives' alone.
        consumer
            .ensure_subscription(SubscribeTopic::new("news").durable(name))
            .await
            .unwrap();
    }
    let mut news = OutgoingMessage::new("", "headline");
    news.queues.clear();
    news.topic = Some("news".into());
    producer.send(news).await.unwrap();

    // 4 auto-ack takes; 3 client-ack takes: 2 acked, 1 nacked back (max 1: dead-lettered);
    // one more nacked without requeue (dropped).
    for _ in 0..4 {
        consumer
            .receive(receive("work", AckMode::Auto))
            .await
            .unwrap()
            .unwrap();
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(
            consumer
                .receive(receive("work", AckMode::Client))
                .await
                .unwrap()
                .unwrap()
                .delivery_id,
        );
    }
    consumer.ack(&held[..2]).await.unwrap();
    consumer.nack(&held[2..], true).await.unwrap();
    let last = consumer
        .receive(receive("work", AckMode::Client))
        .await
        .unwrap()
        .unwrap();
    consumer.nack(&[last.delivery_id], false).await.unwrap();
    // Closes: one client leaves, one is disconnected by the operator, one speaks garbage.
    producer.disconnect().await.unwrap();
    let (s, _) = api
        .call(
            reqwest::Method::POST,
            "/api/clients/consumer/disconnect",
            None,
        )
        .await;
    assert_eq!(s, 200);
    let mut raw = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    raw.write_all(&[0xff; 64]).await.unwrap();

    // The upkeep moves the expired message within a second or two.
    let deadline = Instant::now() + Duration::from_secs(15);
    let m = loop {
        let m = parse(&api.text("/metrics").await);
        let closed = m.value(
            "ferry_connections_closed_total",
            &[("reason", "protocol_error")],
        );
        if m.value("ferry_messages_expired_total", &[]) == 1.0 && closed == 1.0 {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the expiry and the closes were never counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let types = [
        ("ferry_messages_received", "counter"),
        ("ferry_connections_closed", "counter"),
        ("ferry_sessions", "gauge"),
        ("ferry_store_fsync_seconds", "histogram"),
        ("ferry_store_commit_batch_size", "histogram"),
        ("ferry_build", "info"),
        ("ferry_queue_messages_ready", "gauge"),
        ("ferry_queue_messages_entered", "counter"),
        ("ferry_subscription_messages_ready", "gauge"),
    ];
    for (family, kind) in types {
        assert_eq!(
            m.families.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }
    let counts = [
        ("ferry_messages_received_total", 12.0),
        ("ferry_messages_published_total", 1.0),
        ("ferry_messages_delivered_total", 8.0),
        ("ferry_messages_acknowledged_total", 2.0),
        ("ferry_messages_requeued_total", 1.0),
        ("ferry_messages_rejected_total", 1.0),
        ("ferry_messages_expired_total", 1.0),
        ("ferry_messages_dropped_target_missing_total", 0.0),
        ("ferry_sessions_opened_total", 2.0),
        ("ferry_sessions", 0.0),
        ("ferry_queues", 2.0),
        ("ferry_store_refusing_writes", 0.0),
    ];
    for (name, want) in counts {
        assert_eq!(m.value(name, &[]), want, "{name}");
    }
    for (reason, want) in [("max_deliveries", 1.0), ("expired", 1.0)] {
        assert_eq!(
            m.value("ferry_messages_dead_lettered_total", &[("reason", reason)]),
            want,
            "dead-lettered for {reason}"
        );
    }
    for (reason, want) in [
        ("client_closed", 1.0),
        ("operator", 1.0),
        ("protocol_error", 1.0),
        ("server_full", 0.0),
    ] {
        assert_eq!(
            m.value("ferry_connections_closed_total", &[("reason", reason)]),
            want,
            "closed for {reason}"
        );
    }
    // 10 + 1 sent to work: 4 taken, 2 acked, 1 dead-lettered, 1 dropped, 1 expired.
    let work = [("queue", "work")];
    assert_eq!(m.value("ferry_queue_messages_ready", &work), 2.0);
    assert_eq!(m.value("ferry_queue_messages_in_flight", &work), 0.0);
    assert_eq!(m.value("ferry_queue_messages_ready_bytes", &work), 10.0);
    assert_eq!(m.value("ferry_queue_messages_entered_total", &work), 11.0);
    assert_eq!(m.value("ferry_queue_messages_left_total", &work), 9.0);
    let dead = [("queue", "work.dead")];
    assert_eq!(m.value("ferry_queue_messages_ready", &dead), 2.0);
    assert!(m.value("ferry_queue_oldest_message_age_seconds", &dead) >= 0.0);
    for name in ["a", "b"] {
        let sub = [("topic", "news"), ("subscription", name)];
        assert_eq!(m.value("ferry_subscription_messages_ready", &sub), 1.0);
    }
    // Histograms: cumulative buckets ending in +Inf, which equals the count.
    let count = m.value("ferry_store_fsync_seconds_count", &[]);
    assert!(count > 0.0, "the workload synced the log");
    assert_eq!(
        m.value("ferry_store_fsync_seconds_bucket", &[("le", "+Inf")]),
        count
    );
    let info = m
        .samples
        .iter()
        .find(|s| s.0 == "ferry_build_info")
        .expect("ferry_build_info");
    assert_eq!(info.1["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info.1["engine"], "embedded");
    assert!(m.value("ferry_process_resident_memory_bytes", &[]) > 1e6);
}

#[tokio::test]
async fn per_object_series_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    std::fs::write(&config, "metrics_per_object = false\n").unwrap();
    let server = ferry_testkit::BinaryServer::start(&["--config", config.to_str().unwrap()])
        .expect("ferry serve starts");
    let api = Api::of(&server);
    api.call(reqwest::Method::PUT, "/api/queues/q", None).await;
    let m = parse(&api.text("/metrics").await);
    assert_eq!(m.value("ferry_queues", &[]), 1.0);
    assert!(
        !m.families.keys().any(|f| f.starts_with("ferry_queue_")),
        "{:?}",
        m.families.keys()
    );
}

#[tokio::test]
async fn the_datagram_ingest_counts_what_it_reads_drops_and_publishes() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let server =
        ferry_testkit::BinaryServer::start(&["--udp-listen", &listen, "--udp-topic", "monitoring"])
            .expect("ferry serve starts with the datagram ingest");
    let api = Api::of(&server);
    // The broker answers on its TCP listener before its datagram socket is bound: a datagram
    // sent before then is gone (UDP), so wait until the kernel lists the socket.
    let bound = |port: u16| {
        std::fs::read_to_string("/proc/net/udp")
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| {
                l.split_whitespace()
                    .nth(1)?
                    .rsplit_once(':')
                    .map(|(_, p)| p.to_owned())
            })
            .any(|p| u16::from_str_radix(&p, 16) == Ok(port))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !bound(port) {
        assert!(
            Instant::now() < deadline,
            "the datagram socket is never bound"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut packer = ferry_udp::Packer::new(None, 1400).unwrap();
    assert!(packer.push(b"first record"));
    assert!(packer.push(b"second record"));
    let good = packer.datagram().to_vec();
    let misses_a_topic = ferry_udp::Packer::new(Some("no-such-topic"), 1400).map(|mut p| {
        assert!(p.push(b"lost"));
        p.datagram().to_vec()
    });
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&good, &listen).await.unwrap();
    sock.send_to(b"not a datagram of records", &listen)
        .await
        .unwrap();
    sock.send_to(&misses_a_topic.unwrap(), &listen)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let m = loop {
        let m = parse(&api.text("/metrics").await);
        if m.value("ferry_udp_datagrams_received_total", &[]) == 3.0
            && m.value("ferry_udp_datagrams_dropped_total", &[]) == 1.0
        {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the datagrams were never counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(m.families["ferry_udp_records_published"], "counter");
    assert_eq!(m.value("ferry_udp_datagrams_malformed_total", &[]), 1.0);
    assert_eq!(m.value("ferry_udp_records_published_total", &[]), 2.0);
    assert_eq!(m.value("ferry_messages_published_total", &[]), 2.0);
}
