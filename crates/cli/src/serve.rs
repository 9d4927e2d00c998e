//! `ferry serve`: runs the broker. Owned by the broker maintainers; the rest of the CLI only
//! calls [`run`].

use clap::Args;

/// Flags of `ferry serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory of the embedded store and of runtime.toml.
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
}

/// Runs the broker until SIGTERM or SIGINT.
pub fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet wired")
}
