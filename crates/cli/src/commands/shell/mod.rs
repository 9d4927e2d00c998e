//! `ferry shell`: an interactive, line-based shell over one connection, in the manner of the FTaB
//! client shell. It reads standard input line by line, so it also runs scripts piped into it;
//! the `ferry> ` prompt appears only when standard input is a terminal.
//!
//! Results go to standard output, errors to standard error as `error: ...`; after an error the
//! shell goes on, except when the connection itself is gone.
//!
//! The shell keeps a little state ([`session::Session`]): whether a transaction is open (the
//! prompt reads `ferry(txn)> ` then) and the push subscriptions opened with `subscribe`.

pub mod parse;
pub mod session;

use std::io::IsTerminal;

use anyhow::Result;
use bytes::Bytes;
use clap::Args;
use ferry_client::{Client, ClientError};
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, OutgoingMessage, ReceiveMode};
use tokio::io::AsyncBufReadExt;

use crate::connection::{describe, ConnArgs};
use crate::render;
use parse::{parse_line, RecvLine, SendLine, ShellCommand, HELP};
use session::Session;

/// Flags of `ferry shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    conn: ConnArgs,
}

/// What the loop does after a command.
enum Flow {
    /// Print this and read the next line.
    Print(String),
    /// Leave the shell.
    Quit,
}

/// Runs the shell until `quit` or the end of input.
pub async fn run(args: ShellArgs) -> Result<()> {
    let name = args.conn.client_name();
    let client = args.conn.connect_as(&name).await?;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        super::emit(&format!(
            "connected to {} as {name}; type 'help' for commands\n",
            args.conn.server
        ))?;
    }
    let result = repl(&client, interactive).await;
    let _ = client.disconnect().await;
    result
}

async fn repl(client: &Client, interactive: bool) -> Result<()> {
    let mut input = tokio::io::BufReader::new(tokio::io::stdin());
    let mut raw = Vec::new();
    let mut session = Session::new(client.clone());
    loop {
        if interactive {
            super::emit(if session.in_transaction() {
                "ferry(txn)> "
            } else {
                "ferry> "
            })?;
        }
        raw.clear();
        if input.read_until(b'\n', &mut raw).await? == 0 {
            if interactive {
                super::emit("\n")?;
            }
            return Ok(());
        }
        let line = String::from_utf8_lossy(&raw);
        let command = match parse_line(&line) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e:#}");
                continue;
            }
        };
        match execute(&mut session, command).await {
            // A shell whose output is gone has nobody to talk to: that error ends it.
            Ok(Flow::Print(text)) => super::emit(&text)?,
            Ok(Flow::Quit) => return Ok(()),
            Err(e) if is_fatal(&e) => anyhow::bail!("{}", describe(&e)),
            Err(e) => eprintln!("error: {}", describe(&e)),
        }
    }
}

/// Whether the connection is gone, so that no further command can work.
fn is_fatal(e: &ClientError) -> bool {
    matches!(e, ClientError::Closed | ClientError::Io(_))
}

async fn execute(session: &mut Session, command: ShellCommand) -> Result<Flow, ClientError> {
    let client = &session.client().clone();
    let text = match command {
        ShellCommand::Nothing => String::new(),
        ShellCommand::Quit => return Ok(Flow::Quit),
        ShellCommand::Help => HELP.to_string(),
        ShellCommand::Ping => {
            client.ping().await?;
            "pong\n".to_string()
        }
        ShellCommand::Create(name) => {
            client.create_queue(&name).await?;
            format!("created queue '{name}'\n")
        }
        ShellCommand::Delete { name, force } => {
            client.delete_queue(&name, force).await?;
            format!("deleted queue '{name}'\n")
        }
        ShellCommand::List => {
            let mut queues = client.list_queues().await?;
            queues.sort_by(|a, b| a.name.cmp(&b.name));
            render::queue_table(&queues)
        }
        ShellCommand::Send(line) => {
            let id = client.send(outgoing(line)).await?;
            session.sent(id)
        }
        ShellCommand::Publish(mut line) => {
            let topic = line.queues.pop().unwrap_or_default();
            let mut message = outgoing(line);
            message.topic = Some(topic.into());
            let id = client.publish(message).await?;
            session.sent(id)
        }
        ShellCommand::TopicCreate(name) => {
            client.create_topic(&name).await?;
            format!("created topic '{name}'\n")
        }
        ShellCommand::TopicDelete { name, force } => {
            client.delete_topic(&name, force).await?;
            format!("deleted topic '{name}'\n")
        }
        ShellCommand::TopicList => {
            let mut topics = client.list_topics().await?;
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            crate::topic_table::topic_table(&topics)
        }
        ShellCommand::Subscribe(line) => session.subscribe(line).await?,
        ShellCommand::Next { queue, wait_ms } => session.next(queue, wait_ms).await?,
        ShellCommand::Cancel(queue) => session.cancel(&queue).await?,
        ShellCommand::Unsubscribe { topic, name } => {
            session.forget(&ferry_protocol::subscription_queue(&topic, &name));
            client.unsubscribe(&topic, &name).await?;
            format!("unsubscribed '{name}' from topic '{topic}'\n")
        }
        ShellCommand::Begin => session.begin().await?,
        ShellCommand::Commit => session.commit().await?,
        ShellCommand::Rollback => session.rollback().await?,
        ShellCommand::Recv(line) => receive(client, line).await?,
        ShellCommand::Waiting => {
            let names = client.waiting_queues().await?;
            if names.is_empty() {
                "(none)\n".to_string()
            } else {
                names.iter().map(|n| format!("{n}\n")).collect()
            }
        }
        ShellCommand::Ack(ids) => {
            client.ack(&ids).await?;
            format!("acked {}\n", ids.len())
        }
        ShellCommand::Nack { ids, requeue } => {
            client.nack(&ids, requeue).await?;
            if requeue {
                format!("returned {}\n", ids.len())
            } else {
                format!("dropped {}\n", ids.len())
            }
        }
    };
    Ok(Flow::Print(text))
}

fn outgoing(line: SendLine) -> OutgoingMessage {
    OutgoingMessage {
        queues: line.queues,
        topic: None,
        persistent: !line.non_persistent,
        receiver: line.to,
        priority: line.priority,
        context: line.context,
        properties: line.properties,
        body: Bytes::from(line.body),
        ttl_ms: 0,
        delay_ms: 0,
    }
}

async fn receive(client: &Client, line: RecvLine) -> Result<String, ClientError> {
    let request = Receive {
        source: line.source,
        order: line.order,
        mode: if line.peek {
            ReceiveMode::Peek
        } else {
            ReceiveMode::Take
        },
        ack: if line.auto_ack {
            AckMode::Auto
        } else {
            AckMode::Client
        },
        wait_ms: line.wait_ms,
        selector: line.selector,
    };
    Ok(match client.receive(request).await? {
        None => "(no message)\n".to_string(),
        Some(d) => {
            // Only a client-ack take has an id to settle; showing 0 would invite `ack 0`.
            let delivery = (d.delivery_id != 0).then_some(d.delivery_id);
            render::message_block(&d.message, delivery)
        }
    })
}
