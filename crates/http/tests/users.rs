//! Users through the HTTP API of the real binary: the API is open until the first user
//! exists, then needs basic credentials (`monitor` to read, `admin` to change and for users);
//! users survive `kill -9`; a user made over HTTP authenticates on the native protocol.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{start, Api};
use ferry_client::{Client, ConnectOptions};
use reqwest::Method;
use serde_json::{json, Value};

async fn call(
    api: &Api,
    method: Method,
    path: &str,
    auth: Option<(&str, &str)>,
    body: Option<Value>,
) -> (u16, Value, Option<String>) {
    let mut req = api.http.request(method, format!("{}{path}", api.base));
    if let Some((u, p)) = auth {
        req = req.basic_auth(u, Some(p));
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        challenge,
    )
}

#[tokio::test]
async fn the_api_needs_users_once_one_exists_and_users_survive_kill_9() {
    let mut server = start();
    let api = Api::of(&server);
    let root = Some(("root", "root-pw"));
    // No users yet: open (on loopback), and the first user is made here.
    assert_eq!(
        call(&api, Method::GET, "/api/overview", None, None).await.0,
        200
    );
    let (status, body, _) = call(
        &api,
        Method::PUT,
        "/api/users/root",
        None,
        Some(json!({"password": "root-pw", "grants": ["admin"]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.to_string().contains("root-pw"),
        "no secret comes back"
    );
    // Now every read needs credentials; health checks stay open.
    let (status, _, challenge) = call(&api, Method::GET, "/api/overview", None, None).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().starts_with("Basic"));
    assert_eq!(call(&api, Method::GET, "/metrics", None, None).await.0, 401);
    assert_eq!(call(&api, Method::GET, "/healthz", None, None).await.0, 200);
    assert_eq!(
        call(
            &api,
            Method::GET,
            "/api/overview",
            Some(("root", "nope")),
            None
        )
        .await
        .0,
        401
    );
    assert_eq!(
        call(&api, Method::GET, "/api/overview", root, None).await.0,
        200
    );
    // A monitor reads but does not change, and sees no users.
    let (status, body, _) = call(
        &api,
        Method::PUT,
        "/api/users/watch",
        root,
        Some(json!({"password": "w", "grants": ["monitor"]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let watch = Some(("watch", "w"));
    assert_eq!(
        call(&api, Method::GET, "/api/queues", watch, None).await.0,
        200
    );
    assert_eq!(
        call(&api, Method::GET, "/metrics", watch, None).await.0,
        200
    );
    let (status, body, _) = call(&api, Method::PUT, "/api/queues/q", watch, Some(json!({}))).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("lacks 'admin'"), "{body}");
    assert_eq!(
        call(&api, Method::GET, "/api/users", watch, None).await.0,
        403
    );
    // Grants change over PATCH, and the user list shows no credential.
    let (status, body, _) = call(
        &api,
        Method::PATCH,
        "/api/users/watch",
        root,
        Some(json!({"grant": ["send queue q", "client watch-*"]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["grants"],
        json!(["monitor", "send queue q", "client watch-*"])
    );
    let (_, list, _) = call(&api, Method::GET, "/api/users", root, None).await;
    assert!(!list.to_string().contains("SCRAM"), "{list}");
    // A user made over HTTP authenticates on the native protocol.
    let addr = server.addr().to_string();
    let c = Client::connect_with(ConnectOptions::new(addr, "watch-1").user("watch", "w"))
        .await
        .unwrap();
    c.ping().await.unwrap();
    drop(c);
    // kill -9, restart: the users are still there.
    server.kill9();
    server.restart().unwrap();
    let api = Api::of(&server);
    assert_eq!(
        call(&api, Method::GET, "/api/overview", None, None).await.0,
        401
    );
    let (status, body, _) = call(&api, Method::GET, "/api/users/watch", root, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["grants"][1], "send queue q");
}
