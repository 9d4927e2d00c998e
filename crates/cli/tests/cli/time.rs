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
    ferry(&server, &["queue", "create", "q"]).run().await.ok();

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

    // Bad durations are usage errors, refused before connecting.
    for bad in ["--ttl=10 parsecs", "--ttl=-1s", "--ttl=0.1ms"] {
        let out = ferry(&server, &["send", "--queue", "q", bad, "x"])
            .run()
            .await;
        assert_eq!(out.code, 2, "{bad}: {out:?}");
        assert!(out.stderr.contains("'--ttl <DURATION>'"), "{bad}: {out:?}");
    }
    server.shutdown().await;
}
