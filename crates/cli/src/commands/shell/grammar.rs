//! The shell's commands as a clap parser. The options that the command line has too are the
//! command line's own declarations, flattened in: [`MessageFlags`] (`send`, `publish`),
//! [`ReceiveFlags`] (`recv`, `from`), [`SubscriptionFlags`] (`subscribe`); so `ttl=`, `wait=`
//! or `prio=` take exactly what `--ttl`, `--wait` and `--priority` take, checked by the same
//! value parsers. [`super::parse`] turns the shell's short words (`peek`, `prio=9`) into these
//! flags before clap reads them.

use clap::{Args, Parser, Subcommand};
use ferry_protocol::{AckMode, OutgoingMessage, Source};

use super::command::ShellCommand;
use crate::commands::message::MessageFlags;
use crate::commands::recv::ReceiveFlags;
use crate::commands::subscribe::{AckArg, SubscriptionFlags};

/// One line of shell input, after its words were turned into flags.
#[derive(Debug, Parser)]
#[command(
    name = "shell",
    no_binary_name = true,
    disable_help_flag = true,
    disable_help_subcommand = true,
    disable_version_flag = true
)]
pub struct Line {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(alias = "?")]
    Help,
    #[command(alias = "ls")]
    List,
    Waiting,
    Ping,
    #[command(alias = "exit")]
    Quit,
    Begin,
    Commit,
    Rollback,
    Topics,
    Create {
        queue: String,
    },
    Delete {
        queue: String,
        #[arg(long)]
        force: bool,
    },
    Send(SendLine),
    #[command(alias = "pub")]
    Publish(PublishLine),
    #[command(alias = "pop")]
    Recv(ReceiveLine),
    From(ReceiveLine),
    Topic {
        #[command(subcommand)]
        verb: TopicVerb,
    },
    #[command(alias = "sub")]
    Subscribe(SubscribeLine),
    Next {
        queue: Option<String>,
        #[arg(long, value_name = "DURATION", default_value = "0", value_parser = crate::duration::wait_ms)]
        wait: u32,
    },
    Cancel {
        queue: String,
    },
    #[command(alias = "unsub")]
    Unsubscribe {
        topic: String,
        name: String,
    },
    Ack {
        #[arg(required = true, value_name = "DELIVERY")]
        ids: Vec<u64>,
    },
    Nack {
        #[arg(required = true, value_name = "DELIVERY")]
        ids: Vec<u64>,
        /// Discard the messages instead of returning them to their queue.
        #[arg(long)]
        drop: bool,
    },
}

#[derive(Debug, Subcommand)]
enum TopicVerb {
    Create {
        topic: String,
    },
    Delete {
        topic: String,
        #[arg(long)]
        force: bool,
    },
    List,
}

/// `send Q[,Q2...] [flags] -- BODY`.
#[derive(Debug, Args)]
struct SendLine {
    #[arg(value_name = "QUEUE", value_delimiter = ',', required = true)]
    queues: Vec<String>,
    #[command(flatten)]
    message: MessageFlags,
}

/// `publish TOPIC [flags] -- BODY`.
#[derive(Debug, Args)]
struct PublishLine {
    topic: String,
    #[command(flatten)]
    message: MessageFlags,
}

/// `recv QUEUE [flags]` and `from SENDER [flags]`.
#[derive(Debug, Args)]
struct ReceiveLine {
    name: String,
    #[command(flatten)]
    receive: ReceiveFlags,
    /// Take with client ack (settle with `ack`) or auto ack (removed at once).
    #[arg(long, value_enum, default_value_t = AckArg::Client)]
    ack: AckArg,
}

/// `subscribe TOPIC [flags]`.
#[derive(Debug, Args)]
struct SubscribeLine {
    topic: String,
    #[command(flatten)]
    subscription: SubscriptionFlags,
    /// Auto or client ack.
    #[arg(long, value_enum, default_value_t = AckArg::Client)]
    ack: AckArg,
    /// Most deliveries pushed ahead.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    prefetch: u32,
}

fn ack_mode(ack: AckArg) -> AckMode {
    match ack {
        AckArg::Auto => AckMode::Auto,
        AckArg::Client => AckMode::Client,
    }
}

impl Line {
    /// The command, with the raw text after `--` as the body of a `send` or `publish`.
    pub fn into_command(self, body: Option<String>) -> anyhow::Result<ShellCommand> {
        let needs_body = matches!(self.command, Command::Send(_) | Command::Publish(_));
        let body = match (needs_body, body) {
            (true, Some(body)) => body,
            (true, None) => anyhow::bail!("a message needs its body after '--' (send Q -- BODY)"),
            (false, Some(_)) => anyhow::bail!("'--' is only used by send and publish"),
            (false, None) => String::new(),
        };
        let message = |flags: MessageFlags| -> anyhow::Result<OutgoingMessage> {
            flags.into_message(body.clone().into())
        };
        Ok(match self.command {
            Command::Help => ShellCommand::Help,
            Command::List => ShellCommand::List,
            Command::Waiting => ShellCommand::Waiting,
            Command::Ping => ShellCommand::Ping,
            Command::Quit => ShellCommand::Quit,
            Command::Begin => ShellCommand::Begin,
            Command::Commit => ShellCommand::Commit,
            Command::Rollback => ShellCommand::Rollback,
            Command::Topics => ShellCommand::TopicList,
            Command::Create { queue } => ShellCommand::Create(queue),
            Command::Delete { queue, force } => ShellCommand::Delete { name: queue, force },
            Command::Send(line) => {
                if line.queues.iter().any(String::is_empty) {
                    anyhow::bail!("empty queue name in '{}'", line.queues.join(","));
                }
                let mut m = message(line.message)?;
                m.queues = line.queues;
                ShellCommand::Send(m)
            }
            Command::Publish(line) => {
                let mut m = message(line.message)?;
                m.topic = Some(line.topic.into());
                ShellCommand::Publish(m)
            }
            Command::Recv(line) => ShellCommand::Recv(
                line.receive
                    .request(Source::Queue(line.name), ack_mode(line.ack)),
            ),
            Command::From(line) => ShellCommand::Recv(
                line.receive
                    .request(Source::Sender(line.name), ack_mode(line.ack)),
            ),
            Command::Topic { verb } => match verb {
                TopicVerb::Create { topic } => ShellCommand::TopicCreate(topic),
                TopicVerb::Delete { topic, force } => {
                    ShellCommand::TopicDelete { name: topic, force }
                }
                TopicVerb::List => ShellCommand::TopicList,
            },
            Command::Subscribe(line) => ShellCommand::Subscribe(
                line.subscription
                    .request(&line.topic)
                    .ack(ack_mode(line.ack))
                    .prefetch(line.prefetch),
            ),
            Command::Next { queue, wait } => ShellCommand::Next {
                queue,
                wait_ms: wait,
            },
            Command::Cancel { queue } => ShellCommand::Cancel(queue),
            Command::Unsubscribe { topic, name } => ShellCommand::Unsubscribe { topic, name },
            Command::Ack { ids } => ShellCommand::Ack(ids),
            Command::Nack { ids, drop } => ShellCommand::Nack {
                ids,
                requeue: !drop,
            },
        })
    }
}

/// Whether `word` names a shell command (or an alias of one).
pub fn is_command(word: &str) -> bool {
    use clap::CommandFactory;
    Line::command()
        .get_subcommands()
        .any(|c| c.get_name() == word || c.get_all_aliases().any(|a| a == word))
}
