//! The `ferry` binary: the broker (`serve`) and the command-line client.

mod serve;

use clap::{Parser, Subcommand};

/// Ferry: a persistent message broker.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker.
    Serve(serve::ServeArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
