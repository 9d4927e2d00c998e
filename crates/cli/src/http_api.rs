//! The broker's HTTP management API as the admin commands use it (`status`, `clients`,
//! `client`, `queue describe | purge | browse | move`): the `--http` flag and one JSON request
//! at a time, an error answer turned into the API's own message.

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
        let url = format!("http://{}{path}", self.http);
        let mut req = reqwest::Client::new().request(method, &url);
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
