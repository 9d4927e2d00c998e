//! The admin commands against the real binary with its HTTP API on (`status`, `clients`,
//! `client forget`, `queue describe | purge | browse | move`), `recv --require`'s exit status,
//! a shell script stopping at its first failing line, and a queue delete refused while another
//! queue uses it.

use std::time::{Duration, Instant};

use ferry_testkit::BinaryServer;

use crate::support::{ferry_raw, Out};

struct Broker {
    server: BinaryServer,
    http: String,
}

impl Broker {
    fn start() -> Broker {
        let server = BinaryServer::start(&[]).expect("ferry serve starts");
        let http = server.http_addr().expect("HTTP on").to_string();
        Broker { server, http }
    }

    /// `ferry <args>` with the broker's addresses (native and HTTP) in the environment.
    async fn run(&self, args: &[&str]) -> Out {
        ferry_raw(args)
            .env("FERRY_SERVER", &self.server.addr().to_string())
            .env("FERRY_HTTP", &self.http)
            .run()
            .await
    }

    async fn run_with_input(&self, args: &[&str], input: &str) -> Out {
        ferry_raw(args)
            .env("FERRY_SERVER", &self.server.addr().to_string())
            .env("FERRY_HTTP", &self.http)
            .stdin(input)
            .run()
            .await
    }

    async fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.run(args).await;
        serde_json::from_str(out.ok()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out:?}"))
    }
}

#[tokio::test]
async fn status_and_clients_show_the_broker_and_forget_removes_a_client() {
    let b = Broker::start();
    b.run(&["waiting", "--name", "idle"]).await.ok();
    let status = b.run(&["status"]).await;
    let text = status.ok();
    for label in [
        "node:",
        "version:",
        "uptime:",
        "sessions:",
        "clients:",
        "messages:",
        "rates:",
        "store:",
        "memory:",
    ] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    let json = b.json(&["status", "--json"]).await;
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["engine"], "embedded");

    let clients = b.json(&["clients", "--json"]).await;
    let idle = clients
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "idle")
        .expect("idle is registered");
    assert_eq!(idle["online"], false);
    let online = b.json(&["clients", "--online", "--json"]).await;
    assert!(
        online
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["online"] == true),
        "{online}"
    );
    let table = b.run(&["clients"]).await;
    assert!(table.ok().contains("in system"), "{table:?}");

    assert_eq!(
        b.run(&["client", "forget", "idle"]).await.ok(),
        "forgot client 'idle'\n"
    );
    let clients = b.json(&["clients", "--json"]).await;
    assert!(!clients.to_string().contains("\"idle\""), "{clients}");
    let unknown = b.run(&["client", "forget", "nobody"]).await;
    assert_eq!(unknown.failed(), "ferry: client 'nobody' does not exist");
    // Without a broker's HTTP API there, a precise one-line error.
    let away = ferry_raw(&["status", "--http", "127.0.0.1:1"]).run().await;
    assert!(
        away.failed()
            .contains("cannot reach the HTTP API at 127.0.0.1:1"),
        "{away:?}"
    );
}

#[tokio::test]
async fn queue_describe_browse_move_purge_and_a_refused_delete() {
    let b = Broker::start();
    b.run(&["queue", "create", "orders.dead"]).await.ok();
    b.run(&[
        "queue",
        "create",
        "orders",
        "--max-deliveries",
        "3",
        "--dead-letter-queue",
        "orders.dead",
        "--expiry-queue",
        "orders.dead",
    ])
    .await
    .ok();
    for i in 1..=3 {
        b.run(&[
            "send",
            "--queue",
            "orders",
            "--priority",
            &format!("{}", 4 + i),
            &format!("order {i}"),
        ])
        .await
        .ok();
    }
    b.run(&["send", "--queue", "orders", "--ttl", "1ms", "late"])
        .await
        .ok();
    // The upkeep moves the expired one within a second or two.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let d = b
            .json(&["queue", "describe", "orders.dead", "--json"])
            .await;
        if d["ready"] == 1 {
            assert_eq!(d["used_by"][0]["queue"], "orders", "{d}");
            break;
        }
        assert!(Instant::now() < deadline, "the message never expired: {d}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let text = b.run(&["queue", "describe", "orders"]).await;
    let text = text.ok();
    assert!(
        text.contains("ready:") && text.contains("dead letters:   orders.dead"),
        "{text}"
    );

    // Browse: priority order, pages with a cursor, nothing consumed.
    let page = b.run(&["queue", "browse", "orders", "--limit", "2"]).await;
    let page = page.ok();
    let rows: Vec<&str> = page
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("more:"))
        .collect();
    assert_eq!(rows.len(), 2, "{page}");
    assert!(
        rows[0].ends_with("order 3") && rows[1].ends_with("order 2"),
        "{page}"
    );
    // Columns line up under the header.
    let body_at = page.lines().next().unwrap().find("BODY").unwrap();
    assert_eq!(rows[0].find("order 3"), Some(body_at), "{page}");
    let cursor = page
        .lines()
        .find_map(|l| l.strip_prefix("more: --cursor "))
        .expect("a cursor to the next page");
    let rest = b
        .run(&["queue", "browse", "orders", "--cursor", cursor, "--json"])
        .await;
    let rest: Vec<serde_json::Value> = rest
        .ok()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["body"], "order 1");
    let all = b
        .run(&[
            "queue", "browse", "orders", "--all", "--limit", "1", "--json",
        ])
        .await;
    assert_eq!(all.ok().lines().count(), 3);

    // Redrive the dead letter, then purge.
    let moved = b
        .run(&["queue", "move", "orders.dead", "--to-origin"])
        .await;
    assert_eq!(moved.ok(), "moved 1 messages\n");
    assert_eq!(
        b.json(&["queue", "describe", "orders", "--json"]).await["ready"],
        4
    );
    assert_eq!(
        b.run(&["queue", "purge", "orders"]).await.ok(),
        "purged 4 messages from 'orders'\n"
    );

    // A queue another one uses cannot go without --force, and the error says which.
    let refused = b.run(&["queue", "delete", "orders.dead"]).await;
    let line = refused.failed();
    assert!(
        line.contains("'orders'") && line.contains("dead-letter"),
        "{line}"
    );
    b.run(&["queue", "delete", "orders.dead", "--force"])
        .await
        .ok();
}

#[tokio::test]
async fn recv_require_and_shell_scripts_fail_visibly() {
    let b = Broker::start();
    b.run(&["queue", "create", "empty"]).await.ok();
    let none = b.run(&["recv", "--queue", "empty"]).await;
    assert_eq!((none.code, none.stdout.as_str()), (0, ""), "{none:?}");
    let required = b.run(&["recv", "--queue", "empty", "--require"]).await;
    assert_eq!(required.code, 3, "{required:?}");
    assert!(
        required.stdout.is_empty() && required.stderr.is_empty(),
        "{required:?}"
    );

    // A script stops at its first failing line, naming it; --keep-going goes on.
    let script = "create a\nsend nope -- x\ncreate b\n";
    let stopped = b.run_with_input(&["shell"], script).await;
    let line = stopped.failed();
    assert!(line.contains("line 2") && line.contains("'nope'"), "{line}");
    let queues = b.run(&["queue", "list", "--json"]).await;
    assert!(
        !queues.ok().contains("\"b\""),
        "the script went on: {queues:?}"
    );
    let on = b.run_with_input(&["shell", "--keep-going"], script).await;
    assert_eq!(on.code, 0, "{on:?}");
    assert!(on.stderr.contains("'nope'"), "{on:?}");
    // The shell takes ttl= and delay= as send takes --ttl and --delay.
    let timed = b
        .run_with_input(&["shell"], "send a ttl=10m delay=1s -- later\n")
        .await;
    assert_eq!(timed.code, 0, "{timed:?}");
}
