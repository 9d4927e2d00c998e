//! Error paths shared by every command: connection failures, usage errors, the environment.

use ferry_testkit::TestServer;

use crate::support::{ferry, ferry_raw};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_one_clear_line() {
    // A port nobody listens on: bind, note it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    for args in [
        vec!["queue", "list"],
        vec!["send", "--queue", "q", "x"],
        vec!["recv", "--queue", "q"],
        vec!["waiting"],
        vec!["shell"],
        vec!["topic", "list"],
        vec!["publish", "--topic", "t", "x"],
        vec!["subscribe", "--topic", "t"],
        vec!["unsubscribe", "--topic", "t", "--durable", "d"],
    ] {
        let mut full = args.clone();
        full.extend(["--server", &addr]);
        let out = ferry_raw(&full).run().await;
        assert_eq!(
            out.failed(),
            format!(
                "ferry: cannot connect to {addr}: connection refused (is 'ferry serve' running?)"
            ),
            "{args:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2() {
    for args in [
        vec!["recv"],
        vec!["send", "body-without-queue"],
        vec!["send", "--queue", "q", "--priority", "11", "x"],
        vec!["queue"],
        vec!["frobnicate"],
    ] {
        let out = ferry_raw(&args).run().await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
    }
    let out = ferry_raw(&["--help"]).run().await;
    assert!(out.ok().contains("Exit status"), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_sets_server_and_name() {
    let server = TestServer::start().await;
    ferry(&server, &["queue", "create", "q"]).run().await.ok();
    let out = ferry_raw(&["send", "--queue", "q", "hi"])
        .env("FERRY_SERVER", &server.addr_string())
        .env("FERRY_NAME", "envname")
        .run()
        .await;
    out.ok();
    let out = ferry(&server, &["recv", "--queue", "q", "--json"])
        .run()
        .await;
    assert!(out.ok().contains(r#""sender":"envname""#), "{out:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_already_online() {
    let server = TestServer::start().await;
    let holder = server.client("taken").await;
    let out = ferry(&server, &["queue", "list", "--name", "taken"])
        .run()
        .await;
    let line = out.failed();
    assert!(
        line.starts_with(&format!(
            "ferry: cannot connect to {}: ",
            server.addr_string()
        )),
        "{line}"
    );
    assert!(line.contains("taken"), "{line}");
    let _ = holder.disconnect().await;
    server.shutdown().await;
}
