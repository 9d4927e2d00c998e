//! The flags every client command shares (`--server`, `--name`, `--user`, `--tls`, `--ca`,
//! `--cert`, `--key`), connecting with
//! them, and turning client errors into the one-line messages the CLI prints.
//!
//! A password is never a flag (it would show in the process list and shell history): it comes
//! from `FERRY_PASSWORD` or, on a terminal, from a prompt that does not echo.

use std::io::ErrorKind;

use anyhow::anyhow;
use clap::Args;
use ferry_client::{Client, ClientError, ConnectOptions};
use rand::Rng;

/// The default broker address: the native protocol port on loopback.
pub const DEFAULT_SERVER: &str = "127.0.0.1:6730";

/// How to reach the broker and whom to connect as.
#[derive(Debug, Clone, Args)]
pub struct ConnArgs {
    /// Broker address.
    #[arg(long, value_name = "HOST:PORT", env = "FERRY_SERVER", default_value = DEFAULT_SERVER)]
    pub server: String,
    /// Client name to connect as ([A-Za-z0-9._-]); default: a unique ferry-cli-PID-RANDOM.
    #[arg(long, value_name = "CLIENT", env = "FERRY_NAME")]
    pub name: Option<String>,
    /// User to authenticate as (SCRAM-SHA-256); the password comes from FERRY_PASSWORD or a
    /// prompt. With a user and no --name, the client name is the user name.
    #[arg(long, value_name = "USER", env = "FERRY_USER")]
    pub user: Option<String>,
    /// Connect over TLS, verifying the broker's certificate for the host of --server
    /// (implied by --ca and --cert).
    #[arg(long, env = "FERRY_TLS", num_args = 0..=1, default_missing_value = "true")]
    pub tls: Option<bool>,
    /// PEM file of the CA that signed the broker's certificate (default: the system's
    /// trusted roots).
    #[arg(long, value_name = "FILE", env = "FERRY_CA")]
    pub ca: Option<std::path::PathBuf>,
    /// PEM client certificate for a broker that asks for one (mutual TLS); without --user it
    /// authenticates as the user its subject's CN names.
    #[arg(long, value_name = "FILE", env = "FERRY_CERT", requires = "key")]
    pub cert: Option<std::path::PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, value_name = "FILE", env = "FERRY_KEY", requires = "cert")]
    pub key: Option<std::path::PathBuf>,
}

impl ConnArgs {
    /// The client name: the one given, or a fresh unique one. A generated name keeps two CLI
    /// invocations from colliding with `AlreadyOnline`.
    pub fn client_name(&self) -> String {
        self.name
            .clone()
            .or_else(|| self.user.clone())
            .or_else(|| self.client_tls()?.certificate_user())
            .unwrap_or_else(generated_name)
    }

    /// The TLS options, when --tls, --ca or --cert ask for TLS.
    pub fn client_tls(&self) -> Option<ferry_client::ClientTls> {
        let wanted = self.tls.unwrap_or(false) || self.ca.is_some() || self.cert.is_some();
        wanted.then(|| ferry_client::ClientTls {
            ca: self.ca.clone(),
            identity: self.cert.clone().zip(self.key.clone()),
            server_name: None,
        })
    }

    /// Connects as [`ConnArgs::client_name`] (with a client certificate and no --user, the
    /// certificate's user). A generated name is connected as ephemeral:
    /// the broker need not keep it registered once the command ends.
    pub async fn connect(&self) -> anyhow::Result<Client> {
        self.connect_as(&self.client_name()).await
    }

    /// Connects as `name` (ephemeral unless `--name` gave it), explaining a failure in one
    /// line. The client pings while it waits, so that a long wait is not taken for an idle
    /// session.
    pub async fn connect_as(&self, name: &str) -> anyhow::Result<Client> {
        let generated = self.name.is_none() && self.user.is_none() && self.cert.is_none();
        let mut options = ConnectOptions::new(self.server.clone(), name).ephemeral(generated);
        if let Some(user) = &self.user {
            options = options.user(user.clone(), password(user)?);
        }
        if let Some(tls) = self.client_tls() {
            options = options.tls(tls);
        }
        let tls = options.tls.is_some();
        Client::connect_with(options).await.map_err(|e| {
            let hint = match (&e, tls) {
                (ClientError::Closed, false) => " (does it speak TLS? then give --ca or --tls)",
                (ClientError::Closed, true) => {
                    " (does it want a client certificate? then give --cert and --key)"
                }
                _ => "",
            };
            anyhow!(
                "cannot connect to {}: {}{hint}",
                self.server,
                connect_reason(&e)
            )
        })
    }
}

/// The password of `user`: `FERRY_PASSWORD`, else a prompt on the terminal.
pub fn password(user: &str) -> anyhow::Result<String> {
    if let Ok(p) = std::env::var("FERRY_PASSWORD") {
        return Ok(p);
    }
    rpassword::prompt_password(format!("password for {user}: ")).map_err(|e| {
        anyhow!("no password for user '{user}': set FERRY_PASSWORD or run on a terminal ({e})")
    })
}

/// `ferry-cli-<pid>-<6 hex digits>`: valid under `[A-Za-z0-9._-]` and unique enough that
/// concurrent invocations on one or several machines do not collide.
pub fn generated_name() -> String {
    let suffix: u32 = rand::thread_rng().gen_range(0..0x100_0000);
    format!("ferry-cli-{}-{suffix:06x}", std::process::id())
}

/// Why a connect failed, phrased for someone who just typed a command.
fn connect_reason(e: &ClientError) -> String {
    match e {
        ClientError::Io(io) if io.kind() == ErrorKind::ConnectionRefused => {
            "connection refused (is 'ferry serve' running?)".to_string()
        }
        ClientError::Io(io) => io_text(io),
        other => describe(other),
    }
}

/// One line for a client error: the broker's own message for server errors (it names the thing
/// at fault), a plain description otherwise.
pub fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Server(reply) => reply.message.clone(),
        ClientError::Io(io) => format!("connection error: {}", io_text(io)),
        ClientError::Closed => "the broker closed the connection".to_string(),
        ClientError::Timeout => "the broker did not answer in time".to_string(),
        ClientError::TooLarge(what) => what.clone(),
        ClientError::Authentication(why) => format!("authentication: {why}"),
        ClientError::Protocol(w) => format!("protocol error: {w}"),
        // A kind of error added to the client later: its own text.
        other => other.to_string(),
    }
}

/// An I/O error without the `(os error N)` suffix, starting lower case.
fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// Turns a client error into an `anyhow` error carrying [`describe`]'s line.
pub fn explain(e: ClientError) -> anyhow::Error {
    anyhow!(describe(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::limits::is_valid_name;

    #[test]
    fn generated_names_are_valid_and_differ() {
        let a = generated_name();
        let b = generated_name();
        assert!(a.starts_with(&format!("ferry-cli-{}-", std::process::id())));
        assert!(is_valid_name(&a, 200), "{a}");
        // 1 in 16M chance of a false failure.
        assert_ne!(a, b);
    }

    #[test]
    fn io_text_is_tidy() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(io_text(&e), "connection refused");
    }
}
