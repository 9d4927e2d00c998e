//! Parsing one line of `ferry shell` input into a [`ShellCommand`]. Pure: no I/O, no broker.
//!
//! Words are separated by whitespace; single or double quotes group a word with spaces
//! (`color="dark red"`), and a backslash escapes the next character inside double quotes or
//! outside quotes. In `send` and `publish`, everything after the first bare `--` word is the
//! body, byte for byte as typed (quotes and spaces included).

use anyhow::{anyhow, bail, Context, Result};
use ferry_protocol::{Order, Properties, Source, DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY};

use crate::properties::parse_property;

/// One shell command, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ShellCommand {
    /// A blank line or a `#` comment.
    Nothing,
    /// `help`
    Help,
    /// `create Q`
    Create(String),
    /// `delete Q [force]`
    Delete {
        /// The queue.
        name: String,
        /// Drop its messages too.
        force: bool,
    },
    /// `list`
    List,
    /// `send Q[,Q2] [to=C] [prio=N] [ctx=N] [K=V ...] -- BODY`
    Send(SendLine),
    /// `recv Q ...` or `from SENDER ...`
    Recv(RecvLine),
    /// `waiting`
    Waiting,
    /// `ack ID...`
    Ack(Vec<u64>),
    /// `nack ID... [drop]`
    Nack {
        /// Delivery ids.
        ids: Vec<u64>,
        /// Back to the queue (default) or dropped.
        requeue: bool,
    },
    /// `ping`
    Ping,
    /// `topic create T`
    TopicCreate(String),
    /// `topic delete T [force]`
    TopicDelete {
        /// The topic.
        name: String,
        /// Drop its subscriptions' messages too.
        force: bool,
    },
    /// `topics` or `topic list`
    TopicList,
    /// `publish T [to=C] [prio=N] [ctx=N] [non-persistent] [K=V ...] -- BODY`
    Publish(SendLine),
    /// `subscribe T [durable=NAME] [shared] [where="SEL"] [auto] [time] [prefetch=N]`
    Subscribe(SubscribeLine),
    /// `next [QUEUE] [wait=SECONDS]`: the next message pushed to an open subscription.
    Next {
        /// The subscription's queue; `None`: the only open subscription.
        queue: Option<String>,
        /// How long to wait, in ms.
        wait_ms: u32,
    },
    /// `cancel QUEUE`: end an open subscription.
    Cancel(String),
    /// `unsubscribe T NAME`: remove a durable subscription.
    Unsubscribe {
        /// The topic.
        topic: String,
        /// The durable subscription.
        name: String,
    },
    /// `begin`
    Begin,
    /// `commit`
    Commit,
    /// `rollback`
    Rollback,
    /// `quit` or `exit`
    Quit,
}

/// The arguments of a shell `send` or `publish`.
#[derive(Debug, Clone, PartialEq)]
pub struct SendLine {
    /// Target queues (`send`), or the topic as the only item (`publish`).
    pub queues: Vec<String>,
    /// Kept in memory only (`non-persistent`).
    pub non_persistent: bool,
    /// Addressed client.
    pub to: Option<String>,
    /// 1 to 10.
    pub priority: u8,
    /// Context, 0 = none.
    pub context: u64,
    /// Typed properties.
    pub properties: Properties,
    /// The body text.
    pub body: String,
}

/// The arguments of a shell `subscribe`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribeLine {
    /// The topic.
    pub topic: String,
    /// The durable subscription's name; `None`: non-durable.
    pub durable: Option<String>,
    /// Shared (durable only).
    pub shared: bool,
    /// A message selector; empty = every message.
    pub selector: String,
    /// Auto ack instead of client ack.
    pub auto_ack: bool,
    /// Time order instead of priority order.
    pub time_order: bool,
    /// Most deliveries pushed ahead.
    pub prefetch: u32,
}

/// The arguments of a shell `recv` or `from`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecvLine {
    /// Queue or sender.
    pub source: Source,
    /// Leave the message in place.
    pub peek: bool,
    /// Priority (default) or time order.
    pub order: Order,
    /// Take with auto ack (removed at once) instead of client ack.
    pub auto_ack: bool,
    /// Long-poll time in ms.
    pub wait_ms: u32,
    /// A message selector; empty = every message.
    pub selector: String,
}

/// The text `help` prints.
pub const HELP: &str = "\
commands:
  create QUEUE                      create a queue
  delete QUEUE [force]              delete a queue (force: even if it holds messages)
  list                              queues with ready and in-flight counts
  send Q[,Q2...] [to=CLIENT] [prio=1-10] [ctx=N] [NAME=VALUE ...] -- BODY
                                    send BODY (the rest of the line) to every queue named;
                                    NAME:str=VALUE forces a string property
  recv QUEUE [peek] [time] [auto] [wait=SECONDS] [where=\"SELECTOR\"]
                                    take the next message from a queue (highest priority first,
                                    or oldest first with 'time'); 'peek' leaves it in place;
                                    taken messages stay in flight until 'ack' ('auto' removes
                                    them at once); unacked ones return to the queue on quit;
                                    'where' takes only messages the selector selects
  from SENDER [peek] [time] [auto] [wait=SECONDS] [where=\"SELECTOR\"]
                                    the same, for messages from SENDER across all queues
  waiting                           queues holding messages addressed to you
  topic create|delete [force]|list  manage topics ('topics' lists them too)
  publish TOPIC [to=CLIENT] [prio=1-10] [ctx=N] [non-persistent] [NAME=VALUE ...] -- BODY
                                    publish BODY to every subscription of TOPIC
                                    ('non-persistent' works with send too)
  subscribe TOPIC [durable=NAME] [shared] [where=\"SELECTOR\"] [auto] [time] [prefetch=N]
                                    open a push subscription (prefetch 1 by default)
  next [QUEUE] [wait=SECONDS]       the next message of an open subscription (QUEUE may be
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
";

/// Parses one input line.
pub fn parse_line(line: &str) -> Result<ShellCommand> {
    let line = line.trim_end_matches(['\n', '\r']);
    let (words, rest) = split_words(line)?;
    let Some((cmd, args)) = words.split_first() else {
        return Ok(ShellCommand::Nothing);
    };
    if cmd.starts_with('#') {
        return Ok(ShellCommand::Nothing);
    }
    if rest.is_some() && cmd != "send" && cmd != "publish" {
        bail!("'--' is only used by send and publish");
    }
    let cmd = cmd.to_ascii_lowercase();
    match cmd.as_str() {
        "help" | "?" => no_args(&cmd, args, ShellCommand::Help),
        "list" | "ls" => no_args(&cmd, args, ShellCommand::List),
        "waiting" => no_args(&cmd, args, ShellCommand::Waiting),
        "ping" => no_args(&cmd, args, ShellCommand::Ping),
        "quit" | "exit" => no_args(&cmd, args, ShellCommand::Quit),
        "create" => match args {
            [name] => Ok(ShellCommand::Create(name.clone())),
            _ => bail!("usage: create QUEUE"),
        },
        "delete" => match args {
            [name] => Ok(ShellCommand::Delete {
                name: name.clone(),
                force: false,
            }),
            [name, f] if f == "force" => Ok(ShellCommand::Delete {
                name: name.clone(),
                force: true,
            }),
            _ => bail!("usage: delete QUEUE [force]"),
        },
        "send" => parse_send(args, rest, false).map(ShellCommand::Send),
        "publish" | "pub" => parse_send(args, rest, true).map(ShellCommand::Publish),
        "topics" => no_args(&cmd, args, ShellCommand::TopicList),
        "topic" => parse_topic(args),
        "subscribe" | "sub" => parse_subscribe(args).map(ShellCommand::Subscribe),
        "next" => parse_next(args),
        "cancel" => match args {
            [queue] => Ok(ShellCommand::Cancel(queue.clone())),
            _ => bail!("usage: cancel QUEUE"),
        },
        "unsubscribe" | "unsub" => match args {
            [topic, name] => Ok(ShellCommand::Unsubscribe {
                topic: topic.clone(),
                name: name.clone(),
            }),
            _ => bail!("usage: unsubscribe TOPIC NAME"),
        },
        "begin" => no_args(&cmd, args, ShellCommand::Begin),
        "commit" => no_args(&cmd, args, ShellCommand::Commit),
        "rollback" => no_args(&cmd, args, ShellCommand::Rollback),
        "recv" | "pop" => parse_recv(args, false).map(ShellCommand::Recv),
        "from" => parse_recv(args, true).map(ShellCommand::Recv),
        "ack" => Ok(ShellCommand::Ack(parse_ids("ack", args)?)),
        "nack" => {
            let (requeue, ids) = match args.split_last() {
                Some((last, ids)) if last == "drop" => (false, ids),
                _ => (true, args),
            };
            Ok(ShellCommand::Nack {
                ids: parse_ids("nack", ids)?,
                requeue,
            })
        }
        other => bail!("unknown command '{other}' (try 'help')"),
    }
}

fn no_args(cmd: &str, args: &[String], c: ShellCommand) -> Result<ShellCommand> {
    if args.is_empty() {
        Ok(c)
    } else {
        bail!("'{cmd}' takes no arguments")
    }
}

fn parse_ids(cmd: &str, args: &[String]) -> Result<Vec<u64>> {
    if args.is_empty() {
        bail!("usage: {cmd} DELIVERY...");
    }
    args.iter()
        .map(|a| {
            a.parse::<u64>()
                .map_err(|_| anyhow!("'{a}' is not a delivery id"))
        })
        .collect()
}

fn parse_topic(args: &[String]) -> Result<ShellCommand> {
    const USAGE: &str = "usage: topic create TOPIC | topic delete TOPIC [force] | topic list";
    match args {
        [verb, name] if verb == "create" => Ok(ShellCommand::TopicCreate(name.clone())),
        [verb, name] if verb == "delete" => Ok(ShellCommand::TopicDelete {
            name: name.clone(),
            force: false,
        }),
        [verb, name, f] if verb == "delete" && f == "force" => Ok(ShellCommand::TopicDelete {
            name: name.clone(),
            force: true,
        }),
        [verb] if verb == "list" => Ok(ShellCommand::TopicList),
        _ => bail!("{USAGE}"),
    }
}

fn parse_subscribe(args: &[String]) -> Result<SubscribeLine> {
    const USAGE: &str = "usage: subscribe TOPIC [durable=NAME] [shared] [where=\"SELECTOR\"] \
                         [auto] [time] [prefetch=N]";
    let Some((topic, opts)) = args.split_first() else {
        bail!("{USAGE}");
    };
    let mut line = SubscribeLine {
        topic: topic.clone(),
        durable: None,
        shared: false,
        selector: String::new(),
        auto_ack: false,
        time_order: false,
        prefetch: 1,
    };
    for opt in opts {
        match opt.as_str() {
            "shared" => line.shared = true,
            "auto" => line.auto_ack = true,
            "time" => line.time_order = true,
            other => {
                if let Some(name) = other.strip_prefix("durable=") {
                    line.durable = Some(name.to_owned());
                } else if let Some(selector) = other.strip_prefix("where=") {
                    line.selector = selector.to_owned();
                } else if let Some(n) = other.strip_prefix("prefetch=") {
                    line.prefetch =
                        n.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                            anyhow!("prefetch must be a number above 0, not '{n}'")
                        })?;
                } else {
                    bail!("unknown option '{other}' ({USAGE})");
                }
            }
        }
    }
    if line.shared && line.durable.is_none() {
        bail!("'shared' needs durable=NAME");
    }
    Ok(line)
}

fn parse_next(args: &[String]) -> Result<ShellCommand> {
    const USAGE: &str = "usage: next [QUEUE] [wait=SECONDS]";
    let mut queue = None;
    let mut wait_ms = 0;
    for arg in args {
        if let Some(secs) = arg.strip_prefix("wait=") {
            wait_ms = crate::duration::wait_ms(secs)?;
        } else if queue.is_none() {
            queue = Some(arg.clone());
        } else {
            bail!("{USAGE}");
        }
    }
    Ok(ShellCommand::Next { queue, wait_ms })
}

fn parse_send(args: &[String], body: Option<String>, topic: bool) -> Result<SendLine> {
    const USAGE: &str = "usage: send Q[,Q2...] [to=CLIENT] [prio=N] [ctx=N] [non-persistent] \
                         [NAME=VALUE ...] -- BODY";
    const PUBLISH_USAGE: &str = "usage: publish TOPIC [to=CLIENT] [prio=N] [ctx=N] \
                                 [non-persistent] [NAME=VALUE ...] -- BODY";
    let (cmd, usage) = if topic {
        ("publish", PUBLISH_USAGE)
    } else {
        ("send", USAGE)
    };
    let Some(body) = body else {
        bail!("{cmd} needs '-- BODY' ({usage})");
    };
    let Some((queues, opts)) = args.split_first() else {
        bail!("{usage}");
    };
    let queues: Vec<String> = if topic {
        vec![queues.clone()]
    } else {
        queues.split(',').map(str::to_string).collect()
    };
    if queues.iter().any(String::is_empty) {
        bail!("empty queue name in '{}'", args[0]);
    }
    let mut line = SendLine {
        queues,
        non_persistent: false,
        to: None,
        priority: DEFAULT_PRIORITY,
        context: 0,
        properties: Vec::new(),
        body,
    };
    for opt in opts {
        if opt == "non-persistent" {
            line.non_persistent = true;
            continue;
        }
        let (key, value) = opt
            .split_once('=')
            .ok_or_else(|| anyhow!("'{opt}' is not NAME=VALUE ({usage})"))?;
        match key {
            "to" => line.to = Some(value.to_string()),
            "prio" | "priority" => {
                line.priority = value
                    .parse::<u8>()
                    .ok()
                    .filter(|p| (MIN_PRIORITY..=MAX_PRIORITY).contains(p))
                    .ok_or_else(|| {
                        anyhow!("priority must be {MIN_PRIORITY} to {MAX_PRIORITY}, not '{value}'")
                    })?
            }
            "ctx" | "context" => {
                line.context = value
                    .parse()
                    .with_context(|| format!("context must be a number, not '{value}'"))?
            }
            _ => {
                let (name, v) = parse_property(opt)?;
                if line.properties.iter().any(|(n, _)| *n == name) {
                    bail!("property '{name}' is given more than once");
                }
                line.properties.push((name, v));
            }
        }
    }
    Ok(line)
}

fn parse_recv(args: &[String], by_sender: bool) -> Result<RecvLine> {
    let usage = if by_sender {
        "usage: from SENDER [peek] [time] [auto] [wait=SECONDS] [where=\"SELECTOR\"]"
    } else {
        "usage: recv QUEUE [peek] [time] [auto] [wait=SECONDS] [where=\"SELECTOR\"]"
    };
    let Some((name, opts)) = args.split_first() else {
        bail!("{usage}");
    };
    let mut line = RecvLine {
        source: if by_sender {
            Source::Sender(name.clone())
        } else {
            Source::Queue(name.clone())
        },
        peek: false,
        order: Order::Priority,
        auto_ack: false,
        wait_ms: 0,
        selector: String::new(),
    };
    for opt in opts {
        match opt.as_str() {
            "peek" => line.peek = true,
            "time" => line.order = Order::Time,
            "priority" | "prio" => line.order = Order::Priority,
            "auto" => line.auto_ack = true,
            other => {
                if let Some(secs) = other.strip_prefix("wait=") {
                    line.wait_ms = crate::duration::wait_ms(secs)?;
                } else if let Some(selector) = other.strip_prefix("where=") {
                    line.selector = selector.to_owned();
                } else {
                    bail!("unknown option '{other}' ({usage})");
                }
            }
        }
    }
    Ok(line)
}

/// Splits a line into words, honouring quotes and backslashes. If a bare `--` word appears, the
/// words stop there and the raw text after it (one separating space dropped) is returned too.
fn split_words(line: &str) -> Result<(Vec<String>, Option<String>)> {
    let mut words = Vec::new();
    let mut chars = line.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            return Ok((words, None));
        };
        let mut word = String::new();
        let mut quoted = false;
        while let Some(&(_, c)) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '\\' => word.push(next_char(&mut chars)?),
                '"' | '\'' => {
                    quoted = true;
                    loop {
                        let Some((_, q)) = chars.next() else {
                            bail!("unterminated {c} quote");
                        };
                        match q {
                            _ if q == c => break,
                            '\\' if c == '"' => word.push(next_char(&mut chars)?),
                            _ => word.push(q),
                        }
                    }
                }
                _ => word.push(c),
            }
        }
        if word == "--" && !quoted {
            let after = start + 2;
            let rest = line.get(after..).unwrap_or("");
            // One space separates `--` from the body; any further spaces belong to the body.
            let rest = rest.strip_prefix([' ', '\t']).unwrap_or(rest);
            return Ok((words, Some(rest.to_string())));
        }
        words.push(word);
    }
}

fn next_char(chars: &mut impl Iterator<Item = (usize, char)>) -> Result<char> {
    chars
        .next()
        .map(|(_, c)| c)
        .ok_or_else(|| anyhow!("a backslash ends the line"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::PropertyValue;

    fn send(line: &str) -> SendLine {
        match parse_line(line).unwrap() {
            ShellCommand::Send(s) => s,
            other => panic!("{other:?}"),
        }
    }

    fn recv(line: &str) -> RecvLine {
        match parse_line(line).unwrap() {
            ShellCommand::Recv(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn simple_commands() {
        assert_eq!(parse_line("").unwrap(), ShellCommand::Nothing);
        assert_eq!(parse_line("   \n").unwrap(), ShellCommand::Nothing);
        assert_eq!(parse_line("# note").unwrap(), ShellCommand::Nothing);
        assert_eq!(parse_line("help").unwrap(), ShellCommand::Help);
        assert_eq!(parse_line("LIST").unwrap(), ShellCommand::List);
        assert_eq!(parse_line("waiting").unwrap(), ShellCommand::Waiting);
        assert_eq!(parse_line("quit").unwrap(), ShellCommand::Quit);
        assert_eq!(parse_line("exit\r\n").unwrap(), ShellCommand::Quit);
        assert_eq!(
            parse_line("create orders").unwrap(),
            ShellCommand::Create("orders".into())
        );
        assert_eq!(
            parse_line("delete orders force").unwrap(),
            ShellCommand::Delete {
                name: "orders".into(),
                force: true
            }
        );
        assert_eq!(
            parse_line("delete orders").unwrap(),
            ShellCommand::Delete {
                name: "orders".into(),
                force: false
            }
        );
        assert_eq!(
            parse_line("ack 1 2").unwrap(),
            ShellCommand::Ack(vec![1, 2])
        );
        assert_eq!(
            parse_line("nack 3").unwrap(),
            ShellCommand::Nack {
                ids: vec![3],
                requeue: true
            }
        );
        assert_eq!(
            parse_line("nack 3 4 drop").unwrap(),
            ShellCommand::Nack {
                ids: vec![3, 4],
                requeue: false
            }
        );
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
            "frobnicate",
            "send q hello",
            "send -- x",
            "send q prio=11 -- x",
            "send q prio=0 -- x",
            "send q ctx=-1 -- x",
            "send q a=1 a=2 -- x",
            "send q,,r -- x",
            "list -- x",
            "create \"unterminated",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
        let e = parse_line("frobnicate").unwrap_err().to_string();
        assert!(e.contains("unknown command 'frobnicate'"), "{e}");
    }

    #[test]
    fn send_with_everything() {
        let s =
            send("send a,b to=bob prio=9 ctx=12 n=5 s:str=5 name=\"dark red\" --   two  spaces ");
        assert_eq!(s.queues, vec!["a", "b"]);
        assert_eq!(s.to.as_deref(), Some("bob"));
        assert_eq!(s.priority, 9);
        assert_eq!(s.context, 12);
        assert_eq!(
            s.properties,
            vec![
                ("n".to_string(), PropertyValue::Int(5)),
                ("s".to_string(), PropertyValue::Str("5".into())),
                ("name".to_string(), PropertyValue::Str("dark red".into())),
            ]
        );
        assert_eq!(s.body, "  two  spaces ");
    }

    #[test]
    fn send_defaults_and_body_edge_cases() {
        let s = send("send q -- hello world");
        assert_eq!(s.queues, vec!["q"]);
        assert_eq!(s.to, None);
        assert_eq!(s.priority, DEFAULT_PRIORITY);
        assert_eq!(s.context, 0);
        assert!(s.properties.is_empty());
        assert_eq!(s.body, "hello world");
        assert_eq!(send("send q --").body, "");
        assert_eq!(send("send q -- a -- b \"c\"").body, "a -- b \"c\"");
        // A quoted "--" is a word, not the separator.
        assert!(parse_line("send q \"--\" x").is_err());
        // `to:str=` escapes the reserved word and sets a property called "to".
        let s = send("send q to:str=x -- b");
        assert_eq!(s.to, None);
        assert_eq!(
            s.properties,
            vec![("to".to_string(), PropertyValue::Str("x".into()))]
        );
    }

    #[test]
    fn recv_options() {
        let r = recv("recv orders");
        assert_eq!(r.source, Source::Queue("orders".into()));
        assert!(!r.peek && !r.auto_ack);
        assert_eq!(r.order, Order::Priority);
        assert_eq!(r.wait_ms, 0);
        let r = recv("recv orders peek time auto wait=1.5");
        assert!(r.peek && r.auto_ack);
        assert_eq!(r.order, Order::Time);
        assert_eq!(r.wait_ms, 1500);
        let r = recv("from alice time");
        assert_eq!(r.source, Source::Sender("alice".into()));
        assert_eq!(r.order, Order::Time);
        assert_eq!(r.selector, "");
        let r = recv(r#"recv orders where="region = 'eu' AND total > 40" peek"#);
        assert_eq!(r.selector, "region = 'eu' AND total > 40");
        assert!(r.peek);
    }

    #[test]
    fn topic_and_transaction_commands() {
        assert_eq!(parse_line("begin").unwrap(), ShellCommand::Begin);
        assert_eq!(parse_line("COMMIT").unwrap(), ShellCommand::Commit);
        assert_eq!(parse_line("rollback").unwrap(), ShellCommand::Rollback);
        assert_eq!(parse_line("topics").unwrap(), ShellCommand::TopicList);
        assert_eq!(parse_line("topic list").unwrap(), ShellCommand::TopicList);
        assert_eq!(
            parse_line("topic create prices").unwrap(),
            ShellCommand::TopicCreate("prices".into())
        );
        assert_eq!(
            parse_line("topic delete prices force").unwrap(),
            ShellCommand::TopicDelete {
                name: "prices".into(),
                force: true
            }
        );
        assert_eq!(
            parse_line("unsubscribe prices audit").unwrap(),
            ShellCommand::Unsubscribe {
                topic: "prices".into(),
                name: "audit".into()
            }
        );
        assert_eq!(
            parse_line("next wait=0.5").unwrap(),
            ShellCommand::Next {
                queue: None,
                wait_ms: 500
            }
        );
        assert_eq!(
            parse_line("next prices:audit").unwrap(),
            ShellCommand::Next {
                queue: Some("prices:audit".into()),
                wait_ms: 0
            }
        );
        assert_eq!(
            parse_line("cancel prices:audit").unwrap(),
            ShellCommand::Cancel("prices:audit".into())
        );
        let ShellCommand::Publish(p) =
            parse_line("publish prices prio=9 non-persistent region=eu -- 42").unwrap()
        else {
            panic!("not a publish");
        };
        assert_eq!(p.queues, vec!["prices"]);
        assert!(p.non_persistent);
        assert_eq!(p.priority, 9);
        assert_eq!(p.body, "42");
        assert!(!send("send q -- x").non_persistent);
        assert!(send("send q non-persistent -- x").non_persistent);
        let ShellCommand::Subscribe(s) = parse_line(
            r#"subscribe prices durable=audit shared where="region = 'eu'" auto time prefetch=5"#,
        )
        .unwrap() else {
            panic!("not a subscribe");
        };
        assert_eq!(s.topic, "prices");
        assert_eq!(s.durable.as_deref(), Some("audit"));
        assert!(s.shared && s.auto_ack && s.time_order);
        assert_eq!(s.selector, "region = 'eu'");
        assert_eq!(s.prefetch, 5);
        for bad in [
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
    }

    #[test]
    fn quoting() {
        let (w, rest) = split_words(r#"a "b c" 'd "e"' f\ g "h\"i""#).unwrap();
        assert_eq!(w, vec!["a", "b c", "d \"e\"", "f g", "h\"i"]);
        assert_eq!(rest, None);
        assert!(split_words("a\\").is_err());
        assert!(split_words("'a").is_err());
    }
}
