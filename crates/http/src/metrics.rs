//! `GET /metrics`: the Prometheus / OpenMetrics text exposition, names in RabbitMQ's style
//! (`ferry_...`), written with the `prometheus-client` crate.
//!
//! Nothing is kept between scrapes: a scrape reads the broker's counters, the live sessions,
//! the store's figures and every queue's figures (one call: a lock hold on the embedded
//! engine, one aggregate query on PostgreSQL) into a [`Snapshot`], and a collector encodes it.
//! Per-queue and per-subscription series can be turned off (`metrics_per_object = false`) for
//! brokers with very many queues; the global series stay.

use std::collections::HashMap;

use ferry_broker::stats::{CloseKind, Stats};
use ferry_store::{EngineStats, Histogram, QueueDetails};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::Management;

/// Everything one scrape reports.
#[derive(Debug, Default)]
pub struct Snapshot {
    counters: Vec<(&'static str, &'static str, u64)>,
    closed: Vec<(&'static str, u64)>,
    sessions: u64,
    queues: Option<Vec<QueueDetails>>,
    queue_count: u64,
    consumers: HashMap<String, u64>,
    engine: EngineStats,
    now_ms: u64,
    uptime: f64,
    rss: Option<u64>,
    open_fds: Option<u64>,
    version: &'static str,
    node: String,
    engine_name: &'static str,
}

/// Reads what a scrape reports.
pub async fn snapshot(mgmt: &Management) -> Snapshot {
    let s = mgmt.stats();
    let get = Stats::get;
    let counters = vec![
        (
            "ferry_messages_received",
            "Messages stored by sends and publishes.",
            get(&s.messages_sent),
        ),
        (
            "ferry_messages_published",
            "Messages published to topics.",
            get(&s.messages_published),
        ),
        (
            "ferry_messages_delivered",
            "Deliveries handed out (receives and pushes).",
            get(&s.deliveries),
        ),
        (
            "ferry_messages_redelivered",
            "Deliveries of messages delivered before.",
            get(&s.redeliveries),
        ),
        (
            "ferry_messages_acknowledged",
            "Client-ack deliveries acknowledged.",
            get(&s.acks),
        ),
        (
            "ferry_messages_requeued",
            "Deliveries nacked back to their queue.",
            get(&s.nacks_requeued),
        ),
        (
            "ferry_messages_rejected",
            "Deliveries nacked without requeue (dropped).",
            get(&s.nacks_dropped),
        ),
        (
            "ferry_connections_accepted",
            "Connections accepted.",
            get(&s.connections_accepted),
        ),
        (
            "ferry_sessions_opened",
            "Sessions started.",
            get(&s.sessions_opened),
        ),
        (
            "ferry_requests",
            "Batches of requests answered.",
            get(&s.requests),
        ),
        (
            "ferry_udp_datagrams_received",
            "Datagrams the datagram ingest read.",
            get(&s.udp.datagrams_received),
        ),
        (
            "ferry_udp_datagrams_malformed",
            "Datagrams that did not parse, dropped whole.",
            get(&s.udp.datagrams_malformed),
        ),
        (
            "ferry_udp_datagrams_dropped",
            "Well-formed datagrams dropped: the ingest was behind or the publish was refused.",
            get(&s.udp.datagrams_dropped),
        ),
        (
            "ferry_udp_records_published",
            "Records the datagram ingest published.",
            get(&s.udp.records_published),
        ),
        (
            "ferry_auth_succeeded",
            "Authentications that proved their user (SCRAM, passwords of gateways and the API).",
            get(&s.auth_succeeded),
        ),
        (
            "ferry_auth_failed",
            "Authentications that failed: wrong proof or password, unknown user, malformed or abandoned exchange.",
            get(&s.auth_failed),
        ),
        (
            "ferry_auth_refused_rate",
            "Authentications refused unstarted: the address was over its failed-attempt rate.",
            get(&s.auth_refused_rate),
        ),
        (
            "ferry_tls_handshakes_failed",
            "TLS handshakes that failed or timed out: not TLS, a refused certificate, a client gone mid-handshake.",
            get(&s.tls_handshakes_failed),
        ),
    ];
    let closed = CloseKind::ALL
        .iter()
        .map(|k| (k.label(), s.closed(*k)))
        .collect();
    let details = mgmt
        .store()
        .admin()
        .queue_details()
        .await
        .unwrap_or_default();
    let mut consumers: HashMap<String, u64> = HashMap::new();
    for session in mgmt.sessions() {
        for sub in session.subscriptions {
            *consumers.entry(sub.queue).or_default() += 1;
        }
    }
    Snapshot {
        counters,
        closed,
        sessions: mgmt.session_count() as u64,
        queue_count: details
            .iter()
            .filter(|q| ferry_protocol::split_subscription_queue(&q.name).is_none())
            .count() as u64,
        queues: mgmt.metrics_per_object().then_some(details),
        consumers,
        engine: mgmt.store().admin().engine_stats(),
        now_ms: mgmt.now_ms(),
        uptime: mgmt.uptime_secs(),
        rss: process_rss(),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64),
        version: mgmt.version(),
        node: mgmt.node().to_owned(),
        engine_name: mgmt.engine(),
    }
}

/// This process's resident memory in bytes, from `/proc/self/status`.
fn process_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The exposition text of `snapshot` (OpenMetrics, ending in `# EOF`).
pub fn encode(snapshot: Snapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector(snapshot)));
    let mut out = String::with_capacity(64 * 1024);
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

#[derive(Debug)]
struct SnapshotCollector(Snapshot);

fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(v);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

fn gauge<T>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: T,
) -> Result<(), std::fmt::Error>
where
    ConstGauge<T>: EncodeMetric,
{
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

fn histogram(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &Histogram,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    let mut buckets: Vec<(f64, u64)> = h
        .bounds
        .iter()
        .copied()
        .zip(h.counts.iter().copied())
        .collect();
    // The crate writes the bucket bounded by f64::MAX as `+Inf`, and sums the counts into
    // cumulative ones itself.
    buckets.push((f64::MAX, h.counts.last().copied().unwrap_or(0)));
    let count = h.counts.iter().sum();
    m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(h.sum, count, &buckets, None)
}

/// One gauge family over per-object label sets.
fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Vec<(&'static str, String)>, f64)],
) -> Result<(), std::fmt::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        let e = m.encode_family(labels)?;
        ConstGauge::new(*v).encode(e)?;
    }
    Ok(())
}

/// One counter family over per-object label sets.
fn counter_family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Vec<(&'static str, String)>, u64)],
) -> Result<(), std::fmt::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        let e = m.encode_family(labels)?;
        ConstCounter::new(*v).encode(e)?;
    }
    Ok(())
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        for (name, help, v) in &s.counters {
            counter(&mut enc, name, help, *v)?;
        }
        {
            let mut m = enc.encode_descriptor(
                "ferry_connections_closed",
                "Connections closed, by reason.",
                None,
                MetricType::Counter,
            )?;
            for (reason, v) in &s.closed {
                let labels = [("reason", *reason)];
                ConstCounter::new(*v).encode(m.encode_family(&labels)?)?;
            }
        }
        let c = &s.engine.counters;
        {
            let mut m = enc.encode_descriptor(
                "ferry_messages_dead_lettered",
                "Messages moved to a dead-letter or expiry queue, by reason.",
                None,
                MetricType::Counter,
            )?;
            for (reason, v) in [
                ("max_deliveries", c.dead_lettered_max_deliveries),
                ("expired", c.dead_lettered_expired),
            ] {
                let labels = [("reason", reason)];
                ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
            }
        }
        counter(
            &mut enc,
            "ferry_messages_expired",
            "Messages that expired.",
            c.expired,
        )?;
        counter(
            &mut enc,
            "ferry_messages_dropped_target_missing",
            "Messages dropped because their dead-letter or expiry queue no longer exists.",
            c.dropped_target_missing,
        )?;
        gauge(
            &mut enc,
            "ferry_sessions",
            "Live sessions on this node.",
            s.sessions as i64,
        )?;
        gauge(
            &mut enc,
            "ferry_queues",
            "Queues (subscription queues not counted).",
            s.queue_count as i64,
        )?;
        let e = &s.engine;
        if let Some(v) = e.log_bytes {
            gauge(
                &mut enc,
                "ferry_store_log_bytes",
                "Bytes of the log's segment files.",
                v as i64,
            )?;
        }
        if let Some(v) = e.segments {
            gauge(
                &mut enc,
                "ferry_store_segments",
                "Segment files of the log.",
                v as i64,
            )?;
        }
        if let Some(v) = e.live_ratio {
            gauge(
                &mut enc,
                "ferry_store_live_ratio",
                "Live bytes over the log's bytes.",
                v,
            )?;
        }
        if let Some(v) = e.spare_segments {
            gauge(
                &mut enc,
                "ferry_store_spare_segments",
                "Spare segment files kept for reuse.",
                v as i64,
            )?;
        }
        if let Some(h) = &e.fsync_seconds {
            histogram(
                &mut enc,
                "ferry_store_fsync_seconds",
                "Time per fsync of the log.",
                h,
            )?;
        }
        if let Some(h) = &e.commit_batch {
            histogram(
                &mut enc,
                "ferry_store_commit_batch_size",
                "Operations completed by one group commit.",
                h,
            )?;
        }
        if let Some(v) = e.index_bytes {
            gauge(
                &mut enc,
                "ferry_store_index_bytes",
                "Bytes of the in-memory index of stored messages, about.",
                v as i64,
            )?;
        }
        if let Some(v) = e.cache_bytes {
            gauge(
                &mut enc,
                "ferry_store_body_cache_bytes",
                "Bytes of message bodies in the cache of recent bodies.",
                v as i64,
            )?;
        }
        if let Some(v) = e.cache_hits {
            counter(
                &mut enc,
                "ferry_store_body_cache_hits",
                "Deliveries whose body was in the cache.",
                v,
            )?;
        }
        if let Some(v) = e.cache_misses {
            counter(
                &mut enc,
                "ferry_store_body_cache_misses",
                "Deliveries whose body was read from the log.",
                v,
            )?;
        }
        if let Some(v) = e.compactions {
            counter(
                &mut enc,
                "ferry_store_compactions",
                "Compaction runs that freed a segment.",
                v,
            )?;
        }
        if let Some(v) = e.recovery_seconds {
            gauge(
                &mut enc,
                "ferry_store_recovery_seconds",
                "Time recovery took when the store opened.",
                v,
            )?;
        }
        if let Some(v) = e.recovered_messages {
            gauge(
                &mut enc,
                "ferry_store_recovered_messages",
                "Messages recovery found when the store opened.",
                v as i64,
            )?;
        }
        gauge(
            &mut enc,
            "ferry_store_refusing_writes",
            "1 while the store refuses writes (failed fsync, failing disk).",
            i64::from(e.refusing_writes),
        )?;
        if let Some(v) = e.disk_free_bytes {
            gauge(
                &mut enc,
                "ferry_store_disk_free_bytes",
                "Bytes still available on the filesystem holding the store's files.",
                v as i64,
            )?;
        }
        if let Some(v) = e.disk_total_bytes {
            gauge(
                &mut enc,
                "ferry_store_disk_total_bytes",
                "Bytes of the filesystem holding the store's files.",
                v as i64,
            )?;
        }
        if let Some(v) = s.rss {
            gauge(
                &mut enc,
                "ferry_process_resident_memory_bytes",
                "Resident memory.",
                v as i64,
            )?;
        }
        if let Some(v) = s.open_fds {
            gauge(
                &mut enc,
                "ferry_process_open_fds",
                "Open file descriptors.",
                v as i64,
            )?;
        }
        gauge(
            &mut enc,
            "ferry_uptime_seconds",
            "Seconds since the broker started.",
            s.uptime,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "ferry_build",
                "Version, engine and node.",
                None,
                MetricType::Info,
            )?;
            let labels = [
                ("version", s.version.to_owned()),
                ("engine", s.engine_name.to_owned()),
                ("node", s.node.clone()),
            ];
            m.encode_info(&labels)?;
        }
        if let Some(queues) = &s.queues {
            self.per_object(&mut enc, queues)?;
        }
        Ok(())
    }
}

impl SnapshotCollector {
    fn per_object(
        &self,
        enc: &mut DescriptorEncoder,
        queues: &[QueueDetails],
    ) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        type Rows = Vec<(Vec<(&'static str, String)>, f64)>;
        type Totals = Vec<(Vec<(&'static str, String)>, u64)>;
        let mut q_rows: [Rows; 6] = Default::default();
        let mut s_rows: [Rows; 6] = Default::default();
        let mut q_totals: [Totals; 2] = Default::default();
        let mut s_totals: [Totals; 2] = Default::default();
        for q in queues {
            let (rows, totals, labels) = match ferry_protocol::split_subscription_queue(&q.name) {
                Some((topic, name)) => (
                    &mut s_rows,
                    &mut s_totals,
                    vec![
                        ("topic", topic.to_owned()),
                        ("subscription", name.to_owned()),
                    ],
                ),
                None => (&mut q_rows, &mut q_totals, vec![("queue", q.name.clone())]),
            };
            for (i, v) in [q.entered_total, q.left_total].into_iter().enumerate() {
                if let (Some(v), Some(t)) = (v, totals.get_mut(i)) {
                    t.push((labels.clone(), v));
                }
            }
            let age = q
                .oldest_created_at
                .map_or(0.0, |t| s.now_ms.saturating_sub(t) as f64 / 1000.0);
            let consumers = s.consumers.get(&q.name).copied().unwrap_or(0);
            let values = [
                q.ready as f64,
                q.delayed as f64,
                q.in_flight as f64,
                consumers as f64,
                q.ready_bytes.unwrap_or(0) as f64,
                age,
            ];
            for (i, v) in values.into_iter().enumerate() {
                if i == 4 && q.ready_bytes.is_none() {
                    continue;
                }
                if let Some(r) = rows.get_mut(i) {
                    r.push((labels.clone(), v));
                }
            }
        }
        const NAMES: [(&str, &str); 6] = [
            ("messages_ready", "Messages ready to be taken."),
            (
                "messages_delayed",
                "Messages waiting for their delivery time.",
            ),
            (
                "messages_in_flight",
                "Client-ack deliveries not yet settled.",
            ),
            ("consumers", "Push consumers on this node."),
            ("messages_ready_bytes", "Body bytes of the ready messages."),
            (
                "oldest_message_age_seconds",
                "Age of the oldest ready message.",
            ),
        ];
        for (i, (name, help)) in NAMES.iter().enumerate() {
            if let Some(rows) = q_rows.get(i) {
                family(enc, &format!("ferry_queue_{name}"), help, rows)?;
            }
            if let Some(rows) = s_rows.get(i) {
                family(enc, &format!("ferry_subscription_{name}"), help, rows)?;
            }
        }
        const TOTALS: [(&str, &str); 2] = [
            (
                "messages_entered",
                "Messages placed on it: sends, publishes, moves, dead letters.",
            ),
            (
                "messages_left",
                "Messages that left it for good: acked, taken, expired, moved, purged.",
            ),
        ];
        for (i, (name, help)) in TOTALS.iter().enumerate() {
            if let Some(rows) = q_totals.get(i) {
                counter_family(enc, &format!("ferry_queue_{name}"), help, rows)?;
            }
            if let Some(rows) = s_totals.get(i) {
                counter_family(enc, &format!("ferry_subscription_{name}"), help, rows)?;
            }
        }
        Ok(())
    }
}
