//! `ferry shell`: an interactive, line-based shell over one connection, in the manner of the FTaB
//! client shell. On a terminal it reads lines with `rustyline` (line editing, history kept in
//! `~/.ferry_history` or `--history FILE`) behind a `ferry> ` prompt; otherwise it reads standard
//! input line by line, without a prompt, so it also runs scripts piped into it.
//!
//! Results go to standard output, errors to standard error as `error: ...`. On a terminal the
//! shell goes on after an error (unless the connection itself is gone); a script (standard
//! input not a terminal) stops at its first failing line with a non-zero exit status, naming
//! the line, unless `--keep-going` is given.
//!
//! The shell keeps a little state ([`session::Session`]): whether a transaction is open (the
//! prompt reads `ferry(txn)> ` then) and the push subscriptions opened with `subscribe`.

pub mod command;
pub mod grammar;
pub mod input;
pub mod parse;
pub mod session;

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use ferry_client::{Client, ClientError};
use ferry_protocol::requests::Receive;

use crate::connection::{describe, ConnArgs};
use crate::render;
use command::ShellCommand;
use input::Input;
use parse::{parse_line, HELP};
use session::Session;

/// Flags of `ferry shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    /// Where a terminal session keeps its command history [default: ~/.ferry_history].
    #[arg(long, value_name = "FILE", env = "FERRY_HISTORY")]
    history: Option<PathBuf>,
    /// When reading a script (standard input not a terminal), go on after a failing command
    /// instead of stopping with exit status 1.
    #[arg(long)]
    keep_going: bool,
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
    let input = if interactive {
        Input::terminal(args.history.or_else(input::default_history))
    } else {
        Input::pipe()
    };
    let stop_on_error = !interactive && !args.keep_going;
    let result = repl(&client, input, stop_on_error).await;
    let _ = client.disconnect().await;
    result
}

async fn repl(client: &Client, mut input: Input, stop_on_error: bool) -> Result<()> {
    let mut session = Session::new(client.clone());
    let mut line_number = 0u64;
    loop {
        line_number += 1;
        let prompt = if session.in_transaction() {
            "ferry(txn)> "
        } else {
            "ferry> "
        };
        let Some(line) = input.next_line(prompt).await? else {
            input.close();
            return Ok(());
        };
        let command = match parse_line(&line) {
            Ok(c) => c,
            Err(e) if stop_on_error => {
                input.close();
                anyhow::bail!("line {line_number}: {e:#}");
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                continue;
            }
        };
        match execute(&mut session, command).await {
            // A shell whose output is gone has nobody to talk to: that error ends it.
            Ok(Flow::Print(text)) => super::emit(&text)?,
            Ok(Flow::Quit) => {
                input.close();
                return Ok(());
            }
            Err(e) if is_fatal(&e) || stop_on_error => {
                input.close();
                if stop_on_error {
                    anyhow::bail!("line {line_number}: {}", describe(&e));
                }
                anyhow::bail!("{}", describe(&e));
            }
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
        ShellCommand::Send(message) => {
            let id = client.send(message).await?;
            session.sent(id)
        }
        ShellCommand::Publish(message) => {
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
        ShellCommand::Subscribe(request) => session.subscribe(request).await?,
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
        ShellCommand::Recv(request) => receive(client, request).await?,
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

async fn receive(client: &Client, request: Receive) -> Result<String, ClientError> {
    Ok(match client.receive(request).await? {
        None => "(no message)\n".to_string(),
        Some(d) => {
            // Only a client-ack take has an id to settle; showing 0 would invite `ack 0`.
            let delivery = (d.delivery_id != 0).then_some(d.delivery_id);
            render::message_block(&d.message, delivery)
        }
    })
}
