//! Parsing one line of `ferry shell` input into a [`ShellCommand`]. Pure: no I/O, no broker.
//!
//! A line is split into words by `shlex` (POSIX shell quoting: `color="dark red"`, `'a b'`,
//! backslashes), and in `send` and `publish` everything after the first unquoted `--` word is
//! the body, byte for byte as typed. The shell's short words are then spelled as the command
//! line's flags ([`to_flags`]: `peek` is `--peek`, `prio=9` is `--priority=9`, `ttl=5s` is
//! `--ttl=5s`, any other `NAME=VALUE` of a message is `--property=NAME=VALUE`), and clap reads
//! them with the declarations the command line uses ([`super::grammar`]). The flags themselves
//! work too: `recv orders --wait 5s` is `recv orders wait=5s`.

use anyhow::{bail, Result};
use clap::Parser as _;

use super::command::ShellCommand;
use super::grammar::{is_command, Line};

/// The text `help` prints.
pub const HELP: &str = "\
commands:
  create QUEUE                      create a queue
  delete QUEUE [force]              delete a queue (force: even if it holds messages)
  list                              queues with ready and in-flight counts
  send Q[,Q2...] [to=CLIENT] [prio=1-10] [ctx=N] [ttl=DURATION] [delay=DURATION]
       [non-persistent] [NAME=VALUE ...] -- BODY
                                    send BODY (the rest of the line) to every queue named;
                                    NAME:str=VALUE forces a string property
  recv QUEUE [peek] [time] [auto] [wait=DURATION] [where=\"SELECTOR\"]
                                    take the next message from a queue (highest priority first,
                                    or oldest first with 'time'); 'peek' leaves it in place;
                                    taken messages stay in flight until 'ack' ('auto' removes
                                    them at once); unacked ones return to the queue on quit;
                                    'where' takes only messages the selector selects
  from SENDER [peek] [time] [auto] [wait=DURATION] [where=\"SELECTOR\"]
                                    the same, for messages from SENDER across all queues
  waiting                           queues holding messages addressed to you
  topic create|delete [force]|list  manage topics ('topics' lists them too)
  publish TOPIC [to=CLIENT] [prio=1-10] [ctx=N] [ttl=DURATION] [delay=DURATION]
          [non-persistent] [NAME=VALUE ...] -- BODY
                                    publish BODY to every subscription of TOPIC
  subscribe TOPIC [durable=NAME] [shared] [where=\"SELECTOR\"] [auto] [time] [prefetch=N]
                                    open a push subscription (prefetch 1 by default)
  next [QUEUE] [wait=DURATION]      the next message of an open subscription (QUEUE may be
                                    left out when only one is open); settle it with 'ack'
  cancel QUEUE                      end an open subscription
  unsubscribe TOPIC NAME            remove a durable subscription and its backlog
  begin                             start a transaction: sends and publishes are held and acks
                                    settled only at 'commit'; 'rollback' drops the sends and
                                    returns the acked messages (the prompt shows 'txn')
  commit                            commit the transaction; prints the ids of its messages
  rollback                          roll the transaction back
  ack DELIVERY...                   settle taken messages by delivery id
  nack DELIVERY... [drop]           return taken messages to their queue (drop: discard them)
  ping                              check the connection
  help                              this text
  quit                              leave (also: exit, end of input)
Durations take a unit, as the command line's flags do: 500ms, 5s, 1m30s. Every option may
also be written as the command line writes it: recv orders --wait 5s --peek.
";

/// Shell words that stand alone, and the flag each one is.
const WORDS: &[(&str, &str)] = &[
    ("force", "--force"),
    ("drop", "--drop"),
    ("peek", "--peek"),
    ("time", "--order=time"),
    ("prio", "--order=priority"),
    ("priority", "--order=priority"),
    ("auto", "--ack=auto"),
    ("shared", "--shared"),
    ("non-persistent", "--non-persistent"),
];

/// Shell keys (`KEY=VALUE`), and the flag each one is.
const KEYS: &[(&str, &str)] = &[
    ("to", "--to"),
    ("prio", "--priority"),
    ("priority", "--priority"),
    ("ctx", "--context"),
    ("context", "--context"),
    ("ttl", "--ttl"),
    ("delay", "--delay"),
    ("wait", "--wait"),
    ("where", "--selector"),
    ("selector", "--selector"),
    ("durable", "--durable"),
    ("prefetch", "--prefetch"),
];

/// Commands whose first argument is a name, never an option word (a queue may be called
/// `force`).
const NAMED: &[&str] = &[
    "create",
    "delete",
    "send",
    "publish",
    "pub",
    "recv",
    "pop",
    "from",
    "subscribe",
    "sub",
    "cancel",
    "unsubscribe",
    "unsub",
];

/// Parses one input line.
pub fn parse_line(line: &str) -> Result<ShellCommand> {
    let line = line.trim_end_matches(['\n', '\r']);
    let (words, body) = split(line)?;
    let Some(first) = words.first() else {
        return Ok(ShellCommand::Nothing);
    };
    if first.starts_with('#') {
        return Ok(ShellCommand::Nothing);
    }
    let command = first.to_ascii_lowercase();
    if !is_command(&command) {
        bail!("unknown command '{first}' (try 'help')");
    }
    let args = to_flags(&command, words.get(1..).unwrap_or_default());
    let parsed = Line::try_parse_from(std::iter::once(command.clone()).chain(args))
        .map_err(|e| clap_error(&command, &e))?;
    parsed.into_command(body)
}

/// The words of `line`, and the raw text after its first unquoted `--` word (one separating
/// space dropped), if there is one.
fn split(line: &str) -> Result<(Vec<String>, Option<String>)> {
    let mut from = 0;
    while let Some(at) = line
        .get(from..)
        .and_then(|rest| rest.find("--"))
        .map(|i| from + i)
    {
        from = at + 2;
        let before = line.get(..at).unwrap_or_default();
        let after = line.get(at + 2..).unwrap_or_default();
        let alone = before.chars().next_back().is_none_or(char::is_whitespace)
            && after.chars().next().is_none_or(|c| c == ' ' || c == '\t');
        // A `--` inside quotes leaves the text before it unbalanced: not the separator.
        if let (true, Some(words)) = (alone, shlex::split(before)) {
            let body = after.strip_prefix([' ', '\t']).unwrap_or(after);
            return Ok((words, Some(body.to_string())));
        }
    }
    match shlex::split(line) {
        Some(words) => Ok((words, None)),
        None => bail!("unbalanced quotes or a backslash at the end of the line"),
    }
}

/// The shell's words spelled as flags (see the module comment). A word after a flag that
/// takes a value (`--ttl 5s`, `-p n=5`) is that value and stays as it is.
fn to_flags(command: &str, args: &[String]) -> Vec<String> {
    let message = matches!(command, "send" | "publish" | "pub");
    let keep_first = NAMED.contains(&command);
    let mut value_next = false;
    let mut out = Vec::with_capacity(args.len());
    for (i, word) in args.iter().enumerate() {
        let is_value = std::mem::replace(&mut value_next, false);
        if is_value || (i == 0 && keep_first) {
            out.push(word.clone());
        } else if word.starts_with('-') {
            value_next = word != "--" && !word.contains('=') && !is_switch(word);
            out.push(word.clone());
        } else if let Some((_, flag)) = WORDS.iter().find(|(w, _)| *w == word) {
            out.push((*flag).to_string());
        } else {
            out.push(match word.split_once('=') {
                Some((key, value)) => match KEYS.iter().find(|(k, _)| *k == key) {
                    Some((_, flag)) => format!("{flag}={value}"),
                    None if message => format!("--property={word}"),
                    None => word.clone(),
                },
                None => word.clone(),
            });
        }
    }
    out
}

/// Whether `flag` is a switch (takes no value): the flags the shell's lone words stand for.
fn is_switch(flag: &str) -> bool {
    WORDS.iter().any(|(_, f)| *f == flag)
}

/// clap's error as one line for the shell: what is wrong, and the command's usage.
fn clap_error(command: &str, e: &clap::Error) -> anyhow::Error {
    let text = e.render().to_string();
    let what = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ");
    anyhow::anyhow!("{command}: {what} (try 'help')")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::requests::Receive;
    use ferry_protocol::{
        AckMode, Order, OutgoingMessage, PropertyValue, ReceiveMode, Source, DEFAULT_PRIORITY,
    };

    fn parse(line: &str) -> ShellCommand {
        parse_line(line).unwrap_or_else(|e| panic!("{line}: {e:#}"))
    }

    fn send(line: &str) -> OutgoingMessage {
        match parse(line) {
            ShellCommand::Send(m) | ShellCommand::Publish(m) => m,
            other => panic!("{other:?}"),
        }
    }

    fn recv(line: &str) -> Receive {
        match parse(line) {
            ShellCommand::Recv(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn simple_commands() {
        let cases = [
            ("", ShellCommand::Nothing),
            ("   \n", ShellCommand::Nothing),
            ("# note", ShellCommand::Nothing),
            ("help", ShellCommand::Help),
            ("?", ShellCommand::Help),
            ("LIST", ShellCommand::List),
            ("ls", ShellCommand::List),
            ("waiting", ShellCommand::Waiting),
            ("quit", ShellCommand::Quit),
            ("exit\r\n", ShellCommand::Quit),
            ("begin", ShellCommand::Begin),
            ("COMMIT", ShellCommand::Commit),
            ("rollback", ShellCommand::Rollback),
            ("topics", ShellCommand::TopicList),
            ("topic list", ShellCommand::TopicList),
            ("create orders", ShellCommand::Create("orders".into())),
            // A queue may be called like an option word.
            ("create force", ShellCommand::Create("force".into())),
            (
                "delete orders",
                ShellCommand::Delete {
                    name: "orders".into(),
                    force: false,
                },
            ),
            (
                "delete orders force",
                ShellCommand::Delete {
                    name: "orders".into(),
                    force: true,
                },
            ),
            (
                "delete orders --force",
                ShellCommand::Delete {
                    name: "orders".into(),
                    force: true,
                },
            ),
            ("ack 1 2", ShellCommand::Ack(vec![1, 2])),
            (
                "nack 3",
                ShellCommand::Nack {
                    ids: vec![3],
                    requeue: true,
                },
            ),
            (
                "nack 3 4 drop",
                ShellCommand::Nack {
                    ids: vec![3, 4],
                    requeue: false,
                },
            ),
            (
                "topic create prices",
                ShellCommand::TopicCreate("prices".into()),
            ),
            (
                "topic delete prices force",
                ShellCommand::TopicDelete {
                    name: "prices".into(),
                    force: true,
                },
            ),
            (
                "unsubscribe prices audit",
                ShellCommand::Unsubscribe {
                    topic: "prices".into(),
                    name: "audit".into(),
                },
            ),
            (
                "next wait=500ms",
                ShellCommand::Next {
                    queue: None,
                    wait_ms: 500,
                },
            ),
            (
                "next --wait 2s",
                ShellCommand::Next {
                    queue: None,
                    wait_ms: 2000,
                },
            ),
            (
                "next prices:audit",
                ShellCommand::Next {
                    queue: Some("prices:audit".into()),
                    wait_ms: 0,
                },
            ),
            (
                "cancel prices:audit",
                ShellCommand::Cancel("prices:audit".into()),
            ),
        ];
        for (line, want) in cases {
            assert_eq!(parse(line), want, "{line}");
        }
    }

    #[test]
    fn usage_errors() {
        for bad in [
            "create",
            "create a b",
            "delete a nope",
            "list x",
            "ack",
            "ack x",
            "recv",
            "recv q sideways",
            "send q hello",
            "send -- x",
            "send q prio=11 -- x",
            "send q prio=0 -- x",
            "send q ctx=-1 -- x",
            "send q a=1 a=2 -- x",
            "send q,,r -- x",
            "send q ttl=10 -- x",
            "send q delay=soon -- x",
            "recv q wait=2",
            "list -- x",
            "create \"unterminated",
            "begin now",
            "topic",
            "topic create",
            "topic drop x",
            "publish -- x",
            "publish t",
            "subscribe",
            "subscribe t shared",
            "subscribe t prefetch=0",
            "subscribe t sideways",
            "next a b",
            "cancel",
            "unsubscribe t",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
        let e = parse_line("frobnicate").unwrap_err().to_string();
        assert!(e.contains("unknown command 'frobnicate'"), "{e}");
        let e = parse_line("send q ttl=10 -- x").unwrap_err().to_string();
        assert!(e.contains("'10' needs a unit, e.g. 10s or 10ms"), "{e}");
    }

    #[test]
    fn send_with_everything() {
        let m = send(
            "send a,b to=bob prio=9 ctx=12 ttl=1m delay=1.5s n=5 s:str=5 name=\"dark red\" --   two  spaces ",
        );
        assert_eq!(m.queues, vec!["a", "b"]);
        assert_eq!(m.receiver.as_deref(), Some("bob"));
        assert_eq!((m.priority, m.context), (9, 12));
        assert_eq!((m.ttl_ms, m.delay_ms), (60_000, 1_500));
        assert_eq!(
            m.properties,
            vec![
                ("n".to_string(), PropertyValue::Int(5)),
                ("s".to_string(), PropertyValue::Str("5".into())),
                ("name".to_string(), PropertyValue::Str("dark red".into())),
            ]
        );
        assert_eq!(&m.body[..], b"  two  spaces ");
        // The command line's spelling reads the same.
        let flags =
            send("send a,b --to bob --priority 9 --context 12 --ttl 1m --delay 1.5s -p n=5 -- x");
        assert_eq!(
            (
                flags.receiver,
                flags.priority,
                flags.context,
                flags.ttl_ms,
                flags.delay_ms
            ),
            (m.receiver, 9, 12, 60_000, 1_500)
        );
    }

    #[test]
    fn send_defaults_and_body_edge_cases() {
        let m = send("send q -- hello world");
        assert_eq!(m.queues, vec!["q"]);
        assert_eq!(
            (m.receiver.clone(), m.priority, m.context),
            (None, DEFAULT_PRIORITY, 0)
        );
        assert!(m.properties.is_empty() && m.persistent);
        assert_eq!((m.ttl_ms, m.delay_ms), (0, 0));
        assert_eq!(&m.body[..], b"hello world");
        assert_eq!(&send("send q --").body[..], b"");
        assert_eq!(&send("send q -- a -- b \"c\"").body[..], b"a -- b \"c\"");
        // A quoted "--" is a word, not the separator; a "--" inside a quoted value too.
        assert!(parse_line("send q \"--\" x").is_err());
        let m = send("send q note=\"a -- b\" -- body");
        assert_eq!(
            m.properties,
            vec![("note".to_string(), PropertyValue::Str("a -- b".into()))]
        );
        assert_eq!(&m.body[..], b"body");
        // `to:str=` escapes the reserved word and sets a property called "to".
        let m = send("send q to:str=x -- b");
        assert_eq!(m.receiver, None);
        assert_eq!(
            m.properties,
            vec![("to".to_string(), PropertyValue::Str("x".into()))]
        );
        assert!(!send("send q non-persistent -- x").persistent);
    }

    #[test]
    fn publish() {
        let m = send("publish prices prio=9 non-persistent region=eu ttl=30s -- 42");
        assert_eq!(m.topic.as_deref(), Some("prices"));
        assert!(m.queues.is_empty() && !m.persistent);
        assert_eq!((m.priority, m.ttl_ms), (9, 30_000));
        assert_eq!(&m.body[..], b"42");
        assert!(matches!(parse("pub prices -- x"), ShellCommand::Publish(_)));
    }

    #[test]
    fn recv_options() {
        let r = recv("recv orders");
        assert_eq!(r.source, Source::Queue("orders".into()));
        assert_eq!(
            (r.mode, r.ack, r.order, r.wait_ms),
            (ReceiveMode::Take, AckMode::Client, Order::Priority, 0)
        );
        let r = recv("recv orders peek time auto wait=1.5s");
        assert_eq!(
            (r.mode, r.ack, r.order, r.wait_ms),
            (ReceiveMode::Peek, AckMode::Auto, Order::Time, 1500)
        );
        assert_eq!(recv("recv orders --wait 5s").wait_ms, 5000);
        assert_eq!(recv("pop orders").source, Source::Queue("orders".into()));
        let r = recv("from alice time");
        assert_eq!(
            (r.source, r.order),
            (Source::Sender("alice".into()), Order::Time)
        );
        assert_eq!(r.selector, "");
        let r = recv(r#"recv orders where="region = 'eu' AND total > 40" peek"#);
        assert_eq!(r.selector, "region = 'eu' AND total > 40");
        assert_eq!(r.mode, ReceiveMode::Peek);
    }

    #[test]
    fn subscribe_options() {
        let ShellCommand::Subscribe(s) = parse(
            r#"subscribe prices durable=audit shared where="region = 'eu'" auto time prefetch=5"#,
        ) else {
            panic!("not a subscribe");
        };
        assert_eq!((s.topic.as_str(), s.name.as_str()), ("prices", "audit"));
        assert!(s.options.durable && s.options.shared);
        assert_eq!(s.options.selector, "region = 'eu'");
        assert_eq!(
            (s.ack, s.order, s.prefetch),
            (AckMode::Auto, Order::Time, 5)
        );
        let ShellCommand::Subscribe(s) = parse("sub prices") else {
            panic!("not a subscribe");
        };
        assert!(!s.options.durable);
        assert_eq!(
            (s.ack, s.order, s.prefetch),
            (AckMode::Client, Order::Priority, 1)
        );
    }

    #[test]
    fn quoting() {
        let (w, rest) = split(r#"a "b c" 'd "e"' f\ g "h\"i""#).unwrap();
        assert_eq!(w, vec!["a", "b c", "d \"e\"", "f g", "h\"i"]);
        assert_eq!(rest, None);
        assert!(split("a\\").is_err());
        assert!(split("'a").is_err());
    }
}
