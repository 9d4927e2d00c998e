//! CONNECT's `login` and `passcode` against Ferry's users, and the native protocol's
//! permissions on every STOMP frame, against the real binary (users added offline with
//! `ferry user add`, as an operator does before the first start).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::BytesMut;
use ferry_stomp::codec::{self, Command as Cmd, Frame, Item, Limits, Version};
use ferry_testkit::{ferry_bin, BinaryServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(20);

fn add_user(dir: &Path, name: &str, password: &str, grants: &[&str]) {
    let mut cmd = Command::new(ferry_bin());
    cmd.args(["user", "add", name, "--password-stdin", "--data-dir"])
        .arg(dir);
    for g in grants {
        cmd.args(["--grant", g]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("ferry user add");
    use std::io::Write as _;
    writeln!(child.stdin.take().expect("stdin"), "{password}").expect("password");
    assert!(child.wait().expect("ends").success(), "user {name} added");
}

/// A broker with users alice (admin), bob (everything on `bob-*` queues) and carol (send and
/// receive on `carol-*` queues, manages nothing).
fn broker(dir: &Path, extra: &[&str]) -> (BinaryServer, SocketAddr) {
    add_user(dir, "alice", "alice-pw", &["admin"]);
    add_user(
        dir,
        "bob",
        "bob-pw",
        &[
            "manage queue bob-*",
            "send queue bob-*",
            "receive queue bob-*",
        ],
    );
    add_user(
        dir,
        "carol",
        "carol-pw",
        &["send queue carol-*", "receive queue carol-*"],
    );
    let mut args = vec!["--auth-failure-delay-ms", "0"];
    args.extend_from_slice(extra);
    let server = BinaryServer::start_in(dir, &args).expect("ferry serve starts");
    let stomp = server.stomp_addr().expect("the STOMP listener is on");
    (server, stomp)
}

struct Raw {
    s: TcpStream,
    buf: BytesMut,
}

impl Raw {
    async fn connect(addr: SocketAddr, headers: &str) -> (Raw, Frame) {
        let mut r = Raw {
            s: TcpStream::connect(addr).await.expect("connect"),
            buf: BytesMut::new(),
        };
        r.write(&format!(
            "CONNECT\naccept-version:1.2\nhost:/\n{headers}\n\0"
        ))
        .await;
        let f = r.frame().await.expect("an answer to CONNECT");
        (r, f)
    }

    async fn as_user(addr: SocketAddr, user: &str, password: &str) -> Raw {
        let (r, f) = Raw::connect(addr, &format!("login:{user}\npasscode:{password}\n")).await;
        assert_eq!(f.command, Cmd::Connected, "{f:?}");
        r
    }

    async fn write(&mut self, text: &str) {
        self.s.write_all(text.as_bytes()).await.expect("write");
    }

    async fn frame(&mut self) -> Option<Frame> {
        let limits = Limits::with_body(1 << 20);
        loop {
            match codec::decode(&mut self.buf, Version::V1_2, &limits).expect("frames parse") {
                Some(Item::Frame(f)) => return Some(f),
                Some(Item::Heartbeat) => continue,
                None => {}
            }
            let n = tokio::time::timeout(WAIT, self.s.read_buf(&mut self.buf))
                .await
                .expect("an answer in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    /// Sends `frame` asking for receipt `r`: the RECEIPT, or the ERROR that closed the
    /// connection.
    async fn ask(&mut self, frame: &str, r: &str) -> Frame {
        let (head, body) = frame.split_once("\n\n").unwrap_or((frame, ""));
        self.write(&format!("{head}\nreceipt:{r}\n\n{body}\0"))
            .await;
        loop {
            let f = self.frame().await.expect("RECEIPT or ERROR");
            if matches!(f.command, Cmd::Receipt | Cmd::Error) {
                return f;
            }
        }
    }
}

fn message(f: &Frame) -> &str {
    f.header("message").unwrap_or_default()
}

#[tokio::test]
async fn a_login_is_checked_against_the_users() {
    let dir = tempfile::tempdir().expect("dir");
    let (_server, addr) = broker(dir.path(), &[]);
    let (_, ok) = Raw::connect(addr, "login:alice\npasscode:alice-pw\n").await;
    assert_eq!(ok.command, Cmd::Connected, "{ok:?}");
    let (mut r, wrong) = Raw::connect(addr, "login:alice\npasscode:nope\n").await;
    assert_eq!(wrong.command, Cmd::Error, "{wrong:?}");
    assert!(
        message(&wrong).contains("authentication failed"),
        "{wrong:?}"
    );
    assert!(r.frame().await.is_none(), "closed after the ERROR");
    let (_, unknown) = Raw::connect(addr, "login:mallory\npasscode:x\n").await;
    assert!(
        message(&unknown).contains("authentication failed"),
        "{unknown:?}"
    );
    // Users exist and no anonymous grants: a CONNECT without a login is refused.
    let (_, anonymous) = Raw::connect(addr, "").await;
    assert_eq!(anonymous.command, Cmd::Error);
    assert!(
        message(&anonymous).contains("authentication required"),
        "{anonymous:?}"
    );
}

#[tokio::test]
async fn client_names_are_bound_to_users() {
    let dir = tempfile::tempdir().expect("dir");
    let (_server, addr) = broker(dir.path(), &[]);
    let (_, taken) = Raw::connect(addr, "login:bob\npasscode:bob-pw\nclient-id:alice\n").await;
    assert_eq!(taken.command, Cmd::Error, "{taken:?}");
    assert!(
        message(&taken).contains("may not open sessions as client 'alice'"),
        "{taken:?}"
    );
    let (_, own) = Raw::connect(addr, "login:bob\npasscode:bob-pw\nclient-id:bob\n").await;
    assert_eq!(own.command, Cmd::Connected, "{own:?}");
    // Without client-id the gateway names the session itself, in the user's own space.
    let (_, made_up) = Raw::connect(addr, "login:carol\npasscode:carol-pw\n").await;
    assert_eq!(made_up.command, Cmd::Connected, "{made_up:?}");
    assert!(made_up
        .header("session")
        .is_some_and(|s| s.starts_with("carol.stomp-")));
}

#[tokio::test]
async fn frames_need_the_permissions_native_requests_need() {
    let dir = tempfile::tempdir().expect("dir");
    let (_server, addr) = broker(dir.path(), &[]);
    let mut bob = Raw::as_user(addr, "bob", "bob-pw").await;
    // bob manages bob-* queues: a SEND creates one.
    let f = bob
        .ask("SEND\ndestination:/queue/bob-orders\n\nhello", "s1")
        .await;
    assert_eq!(f.command, Cmd::Receipt, "{f:?}");
    let f = bob
        .ask("SEND\ndestination:/queue/alice-orders\n\nhello", "s2")
        .await;
    assert_eq!(f.command, Cmd::Error, "{f:?}");
    assert!(
        message(&f).contains("'send'"),
        "names the permission: {f:?}"
    );
    assert!(message(&f).contains("alice-orders"), "{f:?}");
    assert_eq!(f.header("receipt-id"), Some("s2"));
    let mut bob = Raw::as_user(addr, "bob", "bob-pw").await;
    let f = bob
        .ask("SUBSCRIBE\nid:1\ndestination:/topic/news", "s3")
        .await;
    assert_eq!(f.command, Cmd::Error, "{f:?}");
    assert!(message(&f).contains("'receive'"), "{f:?}");
    let mut bob = Raw::as_user(addr, "bob", "bob-pw").await;
    let f = bob
        .ask("SUBSCRIBE\nid:1\ndestination:/sender/alice", "s4")
        .await;
    assert_eq!(f.command, Cmd::Error, "{f:?}");
    assert!(message(&f).contains("receive queue *"), "{f:?}");
    let mut bob = Raw::as_user(addr, "bob", "bob-pw").await;
    let f = bob
        .ask(
            "SUBSCRIBE\nid:1\ndestination:/queue/bob-orders\nack:client-individual",
            "s5",
        )
        .await;
    assert_eq!(f.command, Cmd::Receipt, "{f:?}");
    let m = bob.frame().await.expect("MESSAGE");
    assert_eq!((m.command, &m.body[..]), (Cmd::Message, &b"hello"[..]));
}

#[tokio::test]
async fn only_users_who_may_manage_a_name_auto_create_it() {
    let dir = tempfile::tempdir().expect("dir");
    let (_server, addr) = broker(dir.path(), &[]);
    let mut carol = Raw::as_user(addr, "carol", "carol-pw").await;
    let f = carol
        .ask("SEND\ndestination:/queue/carol-inbox\n\nx", "s1")
        .await;
    assert_eq!(f.command, Cmd::Error, "carol may not create it: {f:?}");
    assert!(message(&f).contains("does not exist"), "{f:?}");
    let mut alice = Raw::as_user(addr, "alice", "alice-pw").await;
    let f = alice
        .ask("SEND\ndestination:/queue/carol-inbox\n\nfrom alice", "a1")
        .await;
    assert_eq!(f.command, Cmd::Receipt, "alice (admin) creates it: {f:?}");
    let mut carol = Raw::as_user(addr, "carol", "carol-pw").await;
    let f = carol
        .ask("SEND\ndestination:/queue/carol-inbox\n\nfrom carol", "s2")
        .await;
    assert_eq!(f.command, Cmd::Receipt, "once it exists carol sends: {f:?}");
}

#[tokio::test]
async fn anonymous_sessions_follow_the_native_rules() {
    let dir = tempfile::tempdir().expect("dir");
    let (_server, addr) = broker(
        dir.path(),
        &[
            "--anonymous-grants",
            "send queue public-*,receive queue public-*",
        ],
    );
    let (mut anon, f) = Raw::connect(addr, "").await;
    assert_eq!(
        f.command,
        Cmd::Connected,
        "anonymous grants let it in: {f:?}"
    );
    let f = anon
        .ask("SEND\ndestination:/queue/public-x\n\nx", "p1")
        .await;
    assert_eq!(f.command, Cmd::Error, "no manage grant: not created: {f:?}");
    let (mut anon, _) = Raw::connect(addr, "").await;
    let f = anon
        .ask("SEND\ndestination:/queue/private\n\nx", "p2")
        .await;
    assert!(message(&f).contains("'send'"), "{f:?}");
}

#[tokio::test]
async fn made_up_names_are_held_to_the_user() {
    let dir = tempfile::tempdir().expect("dir");
    add_user(dir.path(), "dave", "dave-pw", &["receive topic news.*"]);
    let (_server, addr) = broker(dir.path(), &[]);
    // Without client-id, a name in carol's own space, and a new one each time.
    let (_c1, f) = Raw::connect(addr, "login:carol\npasscode:carol-pw\n").await;
    assert_eq!(f.command, Cmd::Connected, "{f:?}");
    let first = f.header("session").unwrap_or_default().to_owned();
    assert!(first.starts_with("carol.stomp-"), "{first}");
    let (_c2, f) = Raw::connect(addr, "login:carol\npasscode:carol-pw\n").await;
    let second = f.header("session").unwrap_or_default().to_owned();
    assert!(
        second.starts_with("carol.stomp-") && second != first,
        "{second}"
    );
    // That space is for made-up names: carol may not choose one of it, nor one of bob's.
    for name in [second.as_str(), "bob.stomp-1-1", "carol.stomp-x"] {
        let (_, f) = Raw::connect(
            addr,
            &format!("login:carol\npasscode:carol-pw\nclient-id:{name}\n"),
        )
        .await;
        assert_eq!(f.command, Cmd::Error, "{name}: {f:?}");
        assert!(
            message(&f).contains("may not open sessions as client"),
            "{name}: {f:?}"
        );
    }
    // A subscription does not create a topic dave may not manage; a pattern needs none.
    let mut dave = Raw::as_user(addr, "dave", "dave-pw").await;
    let f = dave
        .ask("SUBSCRIBE\nid:1\ndestination:/topic/news.eu", "t")
        .await;
    assert_eq!(f.command, Cmd::Error, "{f:?}");
    assert!(message(&f).contains("does not exist"), "{f:?}");
    let mut dave = Raw::as_user(addr, "dave", "dave-pw").await;
    let f = dave
        .ask("SUBSCRIBE\nid:1\ndestination:/topic/news.*", "p")
        .await;
    assert_eq!(f.command, Cmd::Receipt, "{f:?}");
    // Once alice (admin) creates it, dave's non-durable subscription on it works.
    let mut alice = Raw::as_user(addr, "alice", "alice-pw").await;
    let f = alice
        .ask("SEND\ndestination:/topic/news.eu\n\nhello", "a")
        .await;
    assert_eq!(f.command, Cmd::Receipt, "{f:?}");
    let m = loop {
        let f = dave.frame().await.expect("a MESSAGE");
        if f.command == Cmd::Message {
            break f;
        }
    };
    assert_eq!(m.header("destination"), Some("/topic/news.eu"), "{m:?}");
    let f = dave
        .ask("SUBSCRIBE\nid:2\ndestination:/topic/news.eu", "t2")
        .await;
    assert_eq!(f.command, Cmd::Receipt, "{f:?}");
}
