//! `ferry user add | passwd | delete | list | show` and `ferry permit`: users and their grants,
//! written straight into the store. With the embedded engine the broker must be stopped (the
//! data directory is locked while it runs; a running broker is managed through the HTTP API);
//! with PostgreSQL any time, and every node picks the change up within seconds. This is how
//! the first user is made before the first start.
//!
//! Passwords come from `--password-stdin` (one line), `FERRY_PASSWORD`, or a prompt asked
//! twice; never from an argument.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use ferry_auth::{Grant, Grants, StoredCredential, DEFAULT_ITERATIONS, MIN_ITERATIONS};
use ferry_store::{
    EmbeddedConfig, EmbeddedStore, PostgresConfig, PostgresStore, Store, UserRecord,
};

use super::emit;

/// Where the users are kept.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Data directory of a stopped broker (embedded engine) [default: ferry-data]
    #[arg(long, value_name = "DIR", env = "FERRY_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// A postgres://user@host/db URL instead (shared by every node; the broker may run)
    #[arg(long, value_name = "URL", env = "FERRY_STORE", global = true)]
    pub store: Option<String>,
}

impl StoreArgs {
    async fn open(&self) -> Result<Arc<dyn Store>> {
        match self.store.as_deref() {
            Some(url) if url != "embedded" => {
                let store = PostgresStore::open(PostgresConfig::new(url.to_owned()))
                    .await
                    .map_err(|e| anyhow!("cannot open the store: {e}"))?;
                Ok(store)
            }
            _ => {
                let dir = self.data_dir.clone().unwrap_or_else(|| "ferry-data".into());
                let store = EmbeddedStore::open(EmbeddedConfig::new(dir.join("store")))
                    .await
                    .map_err(|e| {
                        anyhow!(
                            "cannot open the store in {}: {e} (is the broker running? stop it, \
                             or manage users through its HTTP API)",
                            dir.display()
                        )
                    })?;
                Ok(store)
            }
        }
    }
}

/// `ferry user ...`.
#[derive(Debug, Args)]
pub struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Add a user (password from --password-stdin, FERRY_PASSWORD or a prompt).
    Add {
        /// The user name ([A-Za-z0-9._-]).
        name: String,
        /// A grant, e.g. "send queue orders-*" or "admin" (repeatable).
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
        /// PBKDF2 iterations, at least 4096.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Change a user's password.
    Passwd {
        /// The user name.
        name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
        /// PBKDF2 iterations, at least 4096.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Delete a user.
    Delete {
        /// The user name.
        name: String,
    },
    /// List the users and their grants.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show one user's grants.
    Show {
        /// The user name.
        name: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `ferry permit USER GRANT...`: adds (or with `--revoke` removes) one grant.
#[derive(Debug, Args)]
pub struct PermitArgs {
    /// The user.
    user: String,
    /// The grant's words: `manage|send|receive queue|topic PATTERN`, `client PATTERN`,
    /// `monitor` or `admin`.
    #[arg(required = true, num_args = 1..)]
    grant: Vec<String>,
    /// Remove the grant instead.
    #[arg(long)]
    revoke: bool,
    #[command(flatten)]
    store: StoreArgs,
}

fn read_password(from_stdin: bool, user: &str) -> Result<String> {
    let password = if from_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("reading the password from standard input")?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    } else if let Ok(p) = std::env::var("FERRY_PASSWORD") {
        p
    } else {
        let first = rpassword::prompt_password(format!("new password for {user}: "))
            .map_err(|e| anyhow!("no password: use --password-stdin or FERRY_PASSWORD ({e})"))?;
        let again = rpassword::prompt_password("again: ")?;
        if first != again {
            bail!("the passwords differ");
        }
        first
    };
    if password.is_empty() {
        bail!("the password is empty");
    }
    Ok(password)
}

fn check_iterations(n: u32) -> Result<u32> {
    if n < MIN_ITERATIONS {
        bail!("--iterations must be at least {MIN_ITERATIONS}");
    }
    Ok(n)
}

fn credential(password: String, iterations: u32) -> String {
    StoredCredential::new(&password, iterations).encode()
}

fn line(u: &UserRecord) -> String {
    let grants = if u.grants.is_empty() {
        "(no grants)".to_owned()
    } else {
        u.grants.join(", ")
    };
    format!("{}\t{grants}\n", u.name)
}

fn json(u: &UserRecord) -> String {
    let iterations = StoredCredential::decode(&u.credential).map_or(0, |c| c.iterations);
    serde_json::json!({"name": u.name, "grants": u.grants, "iterations": iterations}).to_string()
        + "\n"
}

/// Runs `ferry user ...`.
pub async fn run(args: UserArgs) -> Result<()> {
    // Read before opening the store, so that a prompt does not hold the data directory.
    let secret = match &args.command {
        UserCommand::Add {
            name,
            password_stdin,
            iterations,
            ..
        }
        | UserCommand::Passwd {
            name,
            password_stdin,
            iterations,
        } => Some((
            read_password(*password_stdin, name)?,
            check_iterations(*iterations)?,
        )),
        _ => None,
    };
    let store = args.store.open().await?;
    match args.command {
        UserCommand::Add { name, grants, .. } => {
            if !ferry_protocol::limits::is_valid_name(&name, 200) {
                bail!("bad user name '{name}': use 1 to 200 characters of A-Z a-z 0-9 . _ -");
            }
            let grants = Grants::parse(&grants)?;
            let (password, iterations) = secret.context("password")?;
            let record = UserRecord {
                name: name.clone(),
                credential: credential(password, iterations),
                grants: grants.lines(),
            };
            store.users().create_user(&record).await?;
            emit(&format!("added user {name}\n"))
        }
        UserCommand::Passwd { name, .. } => {
            let (password, iterations) = secret.context("password")?;
            store
                .users()
                .set_user_credential(&name, &credential(password, iterations))
                .await?;
            emit(&format!("changed the password of {name}\n"))
        }
        UserCommand::Delete { name } => {
            store.users().delete_user(&name).await?;
            emit(&format!("deleted user {name}\n"))
        }
        UserCommand::List { json: as_json } => {
            let users = store.users().list_users().await?;
            let out: String = users
                .iter()
                .map(|u| if as_json { json(u) } else { line(u) })
                .collect();
            emit(&out)
        }
        UserCommand::Show {
            name,
            json: as_json,
        } => {
            let u = store
                .users()
                .user(&name)
                .await?
                .ok_or_else(|| anyhow!("user '{name}' does not exist"))?;
            emit(&if as_json { json(&u) } else { line(&u) })
        }
    }
}

/// Runs `ferry permit ...`.
pub async fn permit(args: PermitArgs) -> Result<()> {
    let grant: Grant = args.grant.join(" ").parse()?;
    let store = args.store.open().await?;
    let user = store
        .users()
        .user(&args.user)
        .await?
        .ok_or_else(|| anyhow!("user '{}' does not exist", args.user))?;
    let mut grants = Grants::parse(&user.grants)?;
    let changed = if args.revoke {
        grants.remove(&grant)
    } else {
        grants.add(grant.clone())
    };
    store
        .users()
        .set_user_grants(&args.user, &grants.lines())
        .await?;
    let verb = match (args.revoke, changed) {
        (false, true) => "granted",
        (false, false) => "already had",
        (true, true) => "revoked",
        (true, false) => "did not have",
    };
    emit(&format!("{}: {verb} '{grant}'\n", args.user))
}
