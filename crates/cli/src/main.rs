//! The `ferry` binary: the broker (`serve`) and the command-line client. The benchmark
//! harness is a binary of its own (`ferry-bench`, crates/bench), so that this one links none
//! of the peers' client libraries.
//!
//! Modules:
//! - `serve`: `ferry serve`, the broker (owned by the broker maintainers);
//! - [`commands`]: the client commands (`queue`, `send`, `recv`, `waiting`, `topic`,
//!   `publish`, `subscribe`, `unsubscribe`, `shell`);
//! - [`connection`]: the shared `--server`/`--name` flags, connecting, error wording;
//! - [`http_api`]: the broker's HTTP API as the admin commands use it (`--http`);
//! - [`properties`]: `NAME[:TYPE]=VALUE` message properties;
//! - [`render`]: message blocks, JSON lines and queue tables;
//! - [`topic_table`]: topic listings (table and JSON);
//! - [`timestamp`]: ISO-8601 formatting of broker timestamps;
//! - [`duration`]: the one duration grammar of every duration flag and shell key.

mod commands;
mod connection;
mod duration;
mod http_api;
mod properties;
mod render;
mod serve;
mod timestamp;
mod topic_table;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: the broker allocates and frees small objects per
/// message (indexes, frames), where glibc malloc showed up as about 15% of the broker's CPU time
/// in profiles of `ferry-bench throughput` (see docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Text after every `--help`: the exit codes and the environment.
const AFTER_HELP: &str = "\
Exit status: 0 on success (also when recv finds no message), 1 when the broker reports an error,
the connection fails or an argument is invalid, 2 when the command line cannot be parsed, 3 when
recv --require finds no message, and for a shell script, 1 at its first failing command.
Environment: FERRY_SERVER (default broker address), FERRY_NAME (default client name), FERRY_USER
and FERRY_PASSWORD (authentication).";

/// Ferry: a persistent message broker.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker.
    Serve(Box<serve::ServeArgs>),
    /// Create, delete or list queues.
    #[command(after_help = AFTER_HELP)]
    Queue(commands::queue::QueueArgs),
    /// Send a message to one or more queues; prints its id.
    #[command(after_help = AFTER_HELP)]
    Send(commands::send::SendArgs),
    /// Take or peek at messages from a queue or from a sender and print them.
    #[command(after_help = AFTER_HELP)]
    Recv(commands::recv::RecvArgs),
    /// List the queues holding messages addressed to this client.
    #[command(after_help = AFTER_HELP)]
    Waiting(commands::waiting::WaitingArgs),
    /// Create, delete or list topics (with their subscriptions).
    #[command(after_help = AFTER_HELP)]
    Topic(commands::topic::TopicArgs),
    /// Publish a message to a topic; prints its id.
    #[command(after_help = AFTER_HELP)]
    Publish(commands::publish::PublishArgs),
    /// Subscribe to a topic and print the messages that arrive (as recv prints them).
    #[command(after_help = AFTER_HELP)]
    Subscribe(commands::subscribe::SubscribeArgs),
    /// Remove a durable subscription and its backlog.
    #[command(after_help = AFTER_HELP)]
    Unsubscribe(commands::topic::UnsubscribeArgs),
    /// An interactive shell over one connection (reads commands from standard input).
    #[command(after_help = AFTER_HELP)]
    Shell(commands::shell::ShellArgs),
    /// The broker's node, version, uptime, connections, rates and store use (HTTP API).
    #[command(after_help = AFTER_HELP)]
    Status(commands::status::StatusArgs),
    /// Every registered client, online or not (HTTP API).
    #[command(after_help = AFTER_HELP)]
    Clients(commands::clients::ClientsArgs),
    /// Forget a client's registration, or close its session (HTTP API).
    #[command(after_help = AFTER_HELP)]
    Client(commands::clients::ClientArgs),
    /// Add, change, delete or list users (in the store of a stopped broker, or PostgreSQL).
    User(commands::user::UserArgs),
    /// Grant a user a permission, or revoke it (--revoke).
    Permit(commands::user::PermitArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Queue(args) => commands::block_on(commands::queue::run(args)),
        Command::Send(args) => commands::block_on(commands::send::run(args)),
        Command::Recv(args) => commands::block_on(commands::recv::run(args)),
        Command::Waiting(args) => commands::block_on(commands::waiting::run(args)),
        Command::Topic(args) => commands::block_on(commands::topic::run(args)),
        Command::Publish(args) => commands::block_on(commands::publish::run(args)),
        Command::Subscribe(args) => commands::block_on(commands::subscribe::run(args)),
        Command::Unsubscribe(args) => commands::block_on(commands::topic::unsubscribe(args)),
        Command::Shell(args) => commands::block_on(commands::shell::run(args)),
        Command::Status(args) => commands::block_on(commands::status::run(args)),
        Command::Clients(args) => commands::block_on(commands::clients::list(args)),
        Command::Client(args) => commands::block_on(commands::clients::run(args)),
        Command::User(args) => commands::block_on(commands::user::run(args)),
        Command::Permit(args) => commands::block_on(commands::user::permit(args)),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.is::<commands::recv::NoMessage>() => {
            std::process::ExitCode::from(commands::recv::NoMessage::STATUS)
        }
        Err(e) => {
            eprintln!("ferry: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_documented_shapes() {
        for line in [
            "ferry queue create orders",
            "ferry queue delete orders --force",
            "ferry queue list --server 10.0.0.1:6730 --name me",
            "ferry send --queue a --queue b --to bob --priority 10 --context 7 --property k=v -p n:str=5 body",
            "ferry send --queue a,b --file /tmp/x",
            "ferry send --queue a",
            "ferry recv --queue q --order time --peek --wait 1.5s --count 3 --json",
            "ferry recv --from alice",
            "ferry waiting",
            "ferry send --queue a --non-persistent --ttl 5s x",
            "ferry topic create prices",
            "ferry topic delete prices --force",
            "ferry topic list --json",
            "ferry publish --topic prices --priority 9 -p region=eu --non-persistent --ttl 30s --delay 1s --to bob body",
            "ferry publish -t prices --file /tmp/x",
            "ferry subscribe --topic prices",
            "ferry subscribe --topic prices --durable audit --shared --selector x --count 0 --json",
            "ferry subscribe --topic prices --shared-name workers --count 5",
            "ferry subscribe -t prices --count 3 --wait 1500ms --ack auto --order time",
            "ferry unsubscribe --topic prices --durable audit",
            "ferry shell",
            "ferry shell --keep-going",
            "ferry recv --queue q --require",
            "ferry status --json --http 127.0.0.1:1",
            "ferry clients --online --json",
            "ferry client forget old",
            "ferry client disconnect busy",
            "ferry queue describe q --json",
            "ferry queue purge q",
            "ferry queue browse q --order time --limit 100 --selector x --all --json",
            "ferry queue move q.dead --to-origin --id 3 --id 4",
            "ferry queue move q --to r --limit 10",
            "ferry user add alice --grant admin --password-stdin --data-dir d",
            "ferry user passwd alice --store postgres://u@h/db",
            "ferry user delete alice",
            "ferry user list --json",
            "ferry user show alice",
            "ferry permit alice send queue orders-*",
            "ferry permit alice monitor --revoke",
            "ferry send --queue q --user alice x",
        ] {
            let args = line.split(' ');
            if let Err(e) = Cli::try_parse_from(args) {
                panic!("{line}: {e}");
            }
        }
    }

    #[test]
    fn rejects_bad_shapes() {
        for line in [
            "ferry recv",
            "ferry recv --queue q --from s",
            "ferry send body",
            "ferry send --queue q --file f body",
            "ferry send --queue q --priority 11 x",
            "ferry send --queue q --priority 0 x",
            "ferry recv --queue q --order random",
            "ferry publish body",
            "ferry publish --topic t --file f body",
            "ferry subscribe --durable d",
            "ferry subscribe --topic t --shared",
            "ferry subscribe --topic t --shared-name w --durable d",
            "ferry subscribe --topic t --shared-name w --shared",
            "ferry subscribe --topic t --ack sometimes",
            "ferry unsubscribe --topic t",
            "ferry bench throughput",
            "ferry send --queue q --ttl 10 x",
            "ferry send --queue q --delay 1.5 x",
            "ferry recv --queue q --wait 2",
            "ferry queue move q",
            "ferry queue move q --to r --to-origin",
            "ferry queue browse q --limit 0",
            "ferry client forget",
            "ferry user add alice --password pw",
            "ferry permit alice",
        ] {
            assert!(Cli::try_parse_from(line.split(' ')).is_err(), "{line}");
        }
    }
}
