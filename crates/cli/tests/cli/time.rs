//! `ferry send --ttl/--delay`, against a broker whose clock the test moves by hand: nothing
//! here sleeps to let time pass.

use ferry_testkit::{ManualClock, TestServer};

use crate::support::{ferry, json_lines};

/// 2027-01-15T08:00:00Z.
const START: u64 = 1_800_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_delay_and_ttl() {
    let clock = ManualClock::new(START);
    let server = TestServer::start_with_clock(clock.clone(), |_| {}).await;
    ferry(&server, &["queue", "create", "expired"])
        .run()
        .await
        .ok();
    ferry(
        &server,
        &["queue", "create", "q", "--expiry-queue", "expired"],
    )
    .run()
    .await
    .ok();

    // Delayed by 500 ms: invisible until the broker's clock gets there.
    ferry(
        &server,
        &["send", "--queue", "q", "--delay", "500ms", "later"],
    )
    .run()
    .await
    .ok();
    let out = ferry(&server, &["recv", "--queue", "q"]).run().await;
    assert_eq!(out.ok(), "", "not visible before its time");
    clock.advance(500);
    let out = ferry(&server, &["recv", "--queue", "q", "--json"])
        .run()
        .await;
    let msgs = json_lines(out.ok());
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["body"], "later");

    // A time to live of 30 s: delivered within it (showing when it expires), never after.
    for body in ["first", "second"] {
        ferry(&server, &["send", "--queue", "q", "--ttl", "30s", body])
            .run()
            .await
            .ok();
    }
    let out = ferry(&server, &["recv", "--queue", "q"]).run().await;
    let text = out.ok();
    assert!(
        text.contains("expires_at:  2027-01-15T08:00:30.500Z\n"),
        "{text}"
    );
    assert!(text.ends_with("\n\nfirst\n"), "{text}");
    clock.advance(30_000);
    let out = ferry(&server, &["recv", "--queue", "q"]).run().await;
    assert_eq!(out.ok(), "", "expired: never delivered");
    // Passed over by that receive, it went to the queue's expiry queue with its history.
    let out = ferry(&server, &["recv", "--queue", "expired", "--json"])
        .run()
        .await;
    let msgs = json_lines(out.ok());
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["body"], "second");
    assert_eq!(msgs[0]["properties"]["ferry_original_queue"], "q");
    assert_eq!(msgs[0]["properties"]["ferry_dead_letter_reason"], "expired");

    // Bad durations are usage errors, refused before connecting.
    for bad in ["--ttl=10 parsecs", "--ttl=-1s", "--ttl=0.1ms", "--ttl=10"] {
        let out = ferry(&server, &["send", "--queue", "q", bad, "x"])
            .run()
            .await;
        assert_eq!(out.code, 2, "{bad}: {out:?}");
        assert!(out.stderr.contains("'--ttl <DURATION>'"), "{bad}: {out:?}");
    }
    // A number without its unit is refused with the units it could have meant.
    let out = ferry(&server, &["send", "--queue", "q", "--delay", "10", "x"])
        .run()
        .await;
    assert!(
        out.stderr.contains("'10' needs a unit, e.g. 10s or 10ms"),
        "{out:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_create_with_max_deliveries_and_dead_letter_queue() {
    use ferry_client::{AckMode, Order, Receive, ReceiveMode, Source};

    let server = TestServer::start().await;
    ferry(&server, &["queue", "create", "dead"])
        .run()
        .await
        .ok();
    let out = ferry(
        &server,
        &[
            "queue",
            "create",
            "work",
            "--max-deliveries",
            "1",
            "--dead-letter-queue",
            "dead",
        ],
    )
    .run()
    .await;
    assert_eq!(out.ok(), "created queue 'work'\n");
    let out = ferry(
        &server,
        &[
            "queue",
            "create",
            "w2",
            "--max-deliveries",
            "1",
            "--dead-letter-queue",
            "nope",
        ],
    )
    .run()
    .await;
    assert!(out.failed().contains("nope"), "{out:?}");
    ferry(&server, &["send", "--queue", "work", "poison"])
        .run()
        .await
        .ok();
    let worker = server.client("worker").await;
    let d = worker
        .receive(Receive {
            source: Source::Queue("work".into()),
            order: Order::Time,
            mode: ReceiveMode::Take,
            ack: AckMode::Client,
            wait_ms: 0,
            selector: String::new(),
        })
        .await
        .unwrap()
        .expect("a message");
    worker.nack(&[d.delivery_id], true).await.unwrap();
    let out = ferry(&server, &["recv", "--queue", "dead", "--json"])
        .run()
        .await;
    let msgs = json_lines(out.ok());
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["body"], "poison");
    assert_eq!(msgs[0]["properties"]["ferry_original_queue"], "work");
    assert_eq!(msgs[0]["properties"]["ferry_delivery_count"], 1);
    assert_eq!(
        msgs[0]["properties"]["ferry_dead_letter_reason"],
        "max_deliveries"
    );
    server.shutdown().await;
}
