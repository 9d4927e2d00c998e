//! The broker's HTTP management API as the admin commands use it (`status`, `clients`,
//! `client`, `queue describe | purge | browse | move`): the `--http` flag and one JSON request
//! at a time, an error answer turned into the API's own message.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::Value;

/// The default HTTP address of the broker: its management API on loopback.
pub const DEFAULT_HTTP: &str = "127.0.0.1:6731";

/// How to reach the broker's HTTP API.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// The broker's HTTP address (its http_listen).
    #[arg(long, value_name = "HOST:PORT", env = "FERRY_HTTP", default_value = DEFAULT_HTTP)]
    pub http: String,
    /// User to authenticate as (HTTP basic; needed once the broker has users); the password
    /// comes from FERRY_PASSWORD or a prompt.
    #[arg(long = "http-user", value_name = "USER", env = "FERRY_USER")]
    pub user: Option<String>,
    /// Reach the HTTP API over TLS (https), verifying the broker's certificate for the host of
    /// --http (implied by --http-ca and --http-cert). The broker serves HTTP with the same
    /// certificate as its native listener, so the native flags' variables apply here too.
    #[arg(long = "http-tls", env = "FERRY_TLS", num_args = 0..=1, default_missing_value = "true")]
    pub tls: Option<bool>,
    /// PEM file of the CA that signed the broker's certificate (default: the system's trusted
    /// roots).
    #[arg(long = "http-ca", value_name = "FILE", env = "FERRY_CA")]
    pub ca: Option<PathBuf>,
    /// PEM client certificate for a broker that asks for one (mutual TLS).
    #[arg(
        long = "http-cert",
        value_name = "FILE",
        env = "FERRY_CERT",
        requires = "http_key"
    )]
    pub http_cert: Option<PathBuf>,
    /// PEM private key of --http-cert.
    #[arg(
        long = "http-key",
        value_name = "FILE",
        env = "FERRY_KEY",
        requires = "http_cert"
    )]
    pub http_key: Option<PathBuf>,
}

impl HttpArgs {
    /// `method path` with an optional JSON body; the answer's JSON, or the API's error as a
    /// one-line error (`QueueNotFound: queue 'x' does not exist`).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let (scheme, client) = self.client()?;
        let url = format!("{scheme}://{}{path}", self.http);
        let mut req = client.request(method, &url);
        if let Some(user) = &self.user {
            req = req.basic_auth(user, Some(crate::connection::password(user)?));
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                anyhow!(
                    "cannot reach the HTTP API at {} (is 'ferry serve' running with http_listen there? --http or FERRY_HTTP names it)",
                    self.http
                )
            } else {
                anyhow!("HTTP API at {}: {e}", self.http)
            }
        })?;
        let ok = resp.status().is_success();
        let text = resp
            .text()
            .await
            .map_err(|e| anyhow!("HTTP API at {}: {e}", self.http))?;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if ok {
            return Ok(v);
        }
        match v.get("message").and_then(Value::as_str) {
            Some(m) => Err(anyhow!("{m}")),
            None => Err(anyhow!("HTTP API at {}: {v}", self.http)),
        }
    }

    /// The URL scheme and an HTTP client: plain, or TLS with the configured trust and
    /// identity when --http-tls, --http-ca or --http-cert ask for it.
    fn client(&self) -> Result<(&'static str, reqwest::Client)> {
        let wanted = self.tls.unwrap_or(false) || self.ca.is_some() || self.http_cert.is_some();
        if !wanted {
            return Ok(("http", reqwest::Client::new()));
        }
        let tls = ferry_client::ClientTls {
            ca: self.ca.clone(),
            identity: self.http_cert.clone().zip(self.http_key.clone()),
            server_name: None,
        };
        let config = tls
            .client_config()
            .map_err(|e| anyhow!("TLS for the HTTP API: {e}"))?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .build()
            .map_err(|e| anyhow!("TLS for the HTTP API: {e}"))?;
        Ok(("https", client))
    }

    /// A GET.
    pub async fn get(&self, path: &str) -> Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }
}

/// `s` as one segment of a URL path.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `s` as a query parameter value.
pub fn query(s: &str) -> String {
    segment(s)
}
