//! What the HTTP tests share: a JSON client for a broker's HTTP listener, and starting the
//! real `ferry` binary.
#![allow(dead_code)]

use ferry_client::Client;
use ferry_testkit::BinaryServer;
use serde_json::Value;

/// A JSON client for one broker's HTTP API.
pub struct Api {
    /// `http://host:port`.
    pub base: String,
    /// The HTTP client.
    pub http: reqwest::Client,
}

impl Api {
    /// The API of `server` (its HTTP listener must be on).
    pub fn of(server: &BinaryServer) -> Api {
        Api {
            base: format!("http://{}", server.http_addr().expect("HTTP on")),
            http: reqwest::Client::new(),
        }
    }

    /// Any request; the status and the body (JSON, or the text as a JSON string).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A GET that must succeed.
    pub async fn get(&self, path: &str) -> Value {
        let (status, v) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    /// A GET of text that must succeed.
    pub async fn text(&self, path: &str) -> String {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), 200, "GET {path}");
        resp.text().await.expect("body")
    }
}

/// The real binary with its HTTP listener on a free port.
pub fn start() -> BinaryServer {
    BinaryServer::start(&[]).expect("ferry serve starts (build it with cargo build -p ferry)")
}

/// A native-protocol client of `server`.
pub async fn client(server: &BinaryServer, name: &str) -> Client {
    Client::connect(&server.addr().to_string(), name)
        .await
        .expect("connect")
}
