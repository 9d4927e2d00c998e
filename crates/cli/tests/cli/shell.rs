//! `ferry shell` driven through a pipe: a whole script at once, and a conversation where the
//! test reads a delivery id from the output and acks it.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::process::Stdio;
use std::time::Duration;

use ferry_testkit::TestServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{ferry, ferry_path, queue_info, wait_for_depth};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_script() {
    let server = TestServer::start().await;
    let script = "\
# a comment, then a blank line

help
create sq
create sq2
send sq,sq2 prio=7 ctx=3 color=red n=5 zip:str=007 -- hello  shell world
list
recv sq peek
recv sq time auto
recv sq
recv sq2 peek where=\"n = 6\"
recv sq2 where=\"n > (1\"
from nobody-here
waiting
delete nope
bogus command
ack 999999
ping
delete sq2
delete sq2 force
quit
create never
";
    let out = ferry(&server, &["shell", "--keep-going", "--name", "sheller"])
        .stdin(script)
        .run()
        .await;
    let stdout = out.ok();
    assert!(
        !stdout.contains("ferry> "),
        "no prompt without a terminal: {stdout}"
    );
    assert!(stdout.contains("send Q[,Q2...]"), "help printed: {stdout}");
    assert!(stdout.contains("created queue 'sq'\n"), "{stdout}");
    // list: both queues with one ready message each.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|w: &Vec<&str>| w.len() == 3 && w[0].starts_with("sq"))
        .collect();
    assert_eq!(rows, [["sq", "1", "0"], ["sq2", "1", "0"]], "{stdout}");
    // peek, then the auto-ack take: the same message twice, without a delivery id.
    assert_eq!(stdout.matches("hello  shell world").count(), 2, "{stdout}");
    assert!(
        stdout.contains("properties:  color=\"red\" n=5 zip=\"007\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("priority:    7\ncontext:     3\n"),
        "{stdout}"
    );
    assert!(stdout.contains("sender:      sheller\n"), "{stdout}");
    assert!(!stdout.contains("delivery:"), "{stdout}");
    // the plain recv on the now empty queue, and from an unknown sender
    assert!(
        stdout.contains("(no message)\n") || out.stderr.contains("nobody-here"),
        "{out:?}"
    );
    assert!(stdout.contains("pong\n"), "{stdout}");
    assert!(stdout.contains("deleted queue 'sq2'\n"), "{stdout}");
    assert!(!stdout.contains("never"), "stopped at quit: {stdout}");
    // Errors went to stderr and the shell went on.
    let stderr = &out.stderr;
    assert!(
        stderr.contains("error: queue 'nope' does not exist\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: unknown command 'bogus'"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("error: invalid selector: expected ')', found end of input at position 6\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: queue 'sq2' is not empty"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("error: ") && l.contains("999999")),
        "{stderr}"
    );
    assert!(queue_info(&server, "never").await.is_none());
    assert_eq!(queue_info(&server, "sq").await.unwrap().ready, 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_take_returns_at_end_of_input() {
    let server = TestServer::start().await;
    let script = "create q\nsend q -- keep\nrecv q\n";
    let out = ferry(&server, &["shell"]).stdin(script).run().await;
    assert!(out.ok().contains("delivery:    "), "{out:?}");
    wait_for_depth(&server, "q", 1, 0).await;
    server.shutdown().await;
}

/// Writes `line` and reads output lines until one satisfies `until`; returns them all.
async fn converse(
    stdin: &mut tokio::process::ChildStdin,
    stdout: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    line: &str,
    until: impl Fn(&str) -> bool,
) -> Vec<String> {
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let mut seen = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), stdout.next_line())
            .await
            .expect("shell answered")
            .unwrap()
            .expect("shell still running");
        let done = until(&next);
        seen.push(next);
        if done {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_with_ack_and_nack() {
    let server = TestServer::start().await;
    let mut child = tokio::process::Command::new(ferry_path())
        .args(["shell", "--server", &server.addr_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();

    converse(&mut stdin, &mut stdout, "create q", |l| {
        l.starts_with("created")
    })
    .await;
    converse(&mut stdin, &mut stdout, "send q -- one", |l| {
        l.parse::<u64>().is_ok()
    })
    .await;
    converse(&mut stdin, &mut stdout, "send q -- two", |l| {
        l.parse::<u64>().is_ok()
    })
    .await;

    let delivery_of = |lines: &[String]| -> u64 {
        lines
            .iter()
            .find_map(|l| l.strip_prefix("delivery:"))
            .expect("a delivery id")
            .trim()
            .parse()
            .unwrap()
    };
    let got = converse(&mut stdin, &mut stdout, "recv q time", |l| l == "one").await;
    let first = delivery_of(&got);
    let got = converse(&mut stdin, &mut stdout, "recv q time", |l| l == "two").await;
    let second = delivery_of(&got);
    wait_for_depth(&server, "q", 0, 2).await;

    converse(&mut stdin, &mut stdout, &format!("ack {first}"), |l| {
        l == "acked 1"
    })
    .await;
    converse(&mut stdin, &mut stdout, &format!("nack {second}"), |l| {
        l == "returned 1"
    })
    .await;
    wait_for_depth(&server, "q", 1, 0).await;

    let got = converse(&mut stdin, &mut stdout, "recv q", |l| l == "two").await;
    assert!(got.contains(&"redelivered: true".to_string()), "{got:?}");
    let third = delivery_of(&got);
    converse(
        &mut stdin,
        &mut stdout,
        &format!("nack {third} drop"),
        |l| l == "dropped 1",
    )
    .await;
    wait_for_depth(&server, "q", 0, 0).await;

    stdin.write_all(b"quit\n").await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_and_topics_in_a_script() {
    let server = TestServer::start().await;
    let script = "\
create tq
topic create tt
subscribe tt durable=keep where=\"n > 1\"
begin
send tq -- held
publish tt n=2 non-persistent -- pub-held
list
commit
list
begin
recv tq auto
rollback
list
next wait=2s
topics
commit
cancel tt:keep
unsubscribe tt keep
topic list
";
    let out = ferry(&server, &["shell", "--keep-going", "--name", "txner"])
        .stdin(script)
        .run()
        .await;
    let stdout = out.ok();
    assert!(stdout.contains("created topic 'tt'\n"), "{stdout}");
    assert!(
        stdout.contains("subscribed to topic 'tt' (queue 'tt:keep'"),
        "{stdout}"
    );
    assert!(stdout.contains("transaction open\n"), "{stdout}");
    // Inside the transaction sends are held; the commit names both ids.
    assert_eq!(stdout.matches("held until commit\n").count(), 2, "{stdout}");
    let committed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("committed "))
        .expect("a commit line");
    assert_eq!(committed.split(' ').count(), 2, "{stdout}");
    // The rolled-back take came back: tq holds the message again.
    assert!(stdout.contains("rolled back\n"), "{stdout}");
    let tq_rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("tq ")).collect();
    let counts: Vec<Vec<&str>> = tq_rows
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        counts,
        [["tq", "0", "0"], ["tq", "1", "0"], ["tq", "1", "0"]],
        "{stdout}"
    );
    // The publish reached the subscription once committed.
    assert!(stdout.contains("pub-held\n"), "{stdout}");
    assert!(stdout.contains("queue:       tt:keep\n"), "{stdout}");
    assert!(stdout.contains("cancelled 'tt:keep'\n"), "{stdout}");
    assert!(
        stdout.contains("unsubscribed 'keep' from topic 'tt'\n"),
        "{stdout}"
    );
    // A commit without a transaction is an error, and the shell went on.
    assert!(out.stderr.contains("error: "), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert_eq!(queue_info(&server, "tq").await.unwrap().ready, 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_take_the_flags_grammar() {
    let server = TestServer::start().await;
    let script = "\
create tq
send tq ttl=10 -- refused: a number needs its unit
send tq delay=1h -- later
send tq --ttl 1m -- now
recv tq wait=200ms auto
recv tq --wait 200ms
";
    let out = ferry(&server, &["shell", "--keep-going", "--name", "timer"])
        .stdin(script)
        .run()
        .await;
    let stdout = out.ok();
    assert!(
        out.stderr.contains("'10' needs a unit, e.g. 10s or 10ms"),
        "{out:?}"
    );
    assert!(!stdout.contains("refused"), "{stdout}");
    // The delayed message stays invisible; the one with a time to live is taken at once.
    assert_eq!(stdout.matches("\nnow\n").count(), 1, "{stdout}");
    assert!(!stdout.contains("later"), "{stdout}");
    assert!(stdout.ends_with("(no message)\n"), "{stdout}");
    server.shutdown().await;
}
