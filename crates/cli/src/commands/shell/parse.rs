//! Parsing one line of `ferry shell` input into a [`ShellCommand`]. Pure: no I/O, no broker.
//!
//! Words are separated by whitespace; single or double quotes group a word with spaces
//! (`color="dark red"`), and a backslash escapes the next character inside double quotes or
//! outside quotes. In `send`, everything after the first bare `--` word is the body, byte for
//! byte as typed (quotes and spaces included).

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
    /// `quit` or `exit`
    Quit,
}

/// The arguments of a shell `send`.
#[derive(Debug, Clone, PartialEq)]
pub struct SendLine {
    /// Target queues.
    pub queues: Vec<String>,
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
    if rest.is_some() && cmd != "send" {
        bail!("'--' is only used by send");
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
        "send" => parse_send(args, rest).map(ShellCommand::Send),
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

fn parse_send(args: &[String], body: Option<String>) -> Result<SendLine> {
    const USAGE: &str =
        "usage: send Q[,Q2...] [to=CLIENT] [prio=N] [ctx=N] [NAME=VALUE ...] -- BODY";
    let Some(body) = body else {
        bail!("send needs '-- BODY' ({USAGE})");
    };
    let Some((queues, opts)) = args.split_first() else {
        bail!("{USAGE}");
    };
    let queues: Vec<String> = queues.split(',').map(str::to_string).collect();
    if queues.iter().any(String::is_empty) {
        bail!("empty queue name in '{}'", args[0]);
    }
    let mut line = SendLine {
        queues,
        to: None,
        priority: DEFAULT_PRIORITY,
        context: 0,
        properties: Vec::new(),
        body,
    };
    for opt in opts {
        let (key, value) = opt
            .split_once('=')
            .ok_or_else(|| anyhow!("'{opt}' is not NAME=VALUE ({USAGE})"))?;
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
                    line.wait_ms = crate::commands::wait_ms(secs)?;
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
    fn quoting() {
        let (w, rest) = split_words(r#"a "b c" 'd "e"' f\ g "h\"i""#).unwrap();
        assert_eq!(w, vec!["a", "b c", "d \"e\"", "f g", "h\"i"]);
        assert_eq!(rest, None);
        assert!(split_words("a\\").is_err());
        assert!(split_words("'a").is_err());
    }
}
