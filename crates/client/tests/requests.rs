//! Each client method sends the request it should and returns what the reply carries.

mod fake;

use fake::*;
use ferry_client::{
    AckMode, Client, ConnectOptions, Limits, Order, OutgoingMessage, QueueInfo, Receive,
    ReceiveMode, Source,
};
use ferry_protocol::requests::Connect;
use ferry_protocol::{Request, Response, PROTOCOL_VERSION};

fn receive_req() -> Receive {
    Receive {
        source: Source::Sender("bob".into()),
        order: Order::Priority,
        mode: ReceiveMode::Peek,
        ack: AckMode::Client,
        wait_ms: 250,
        selector: String::new(),
    }
    .with_selector("region = 'eu'")
}

#[tokio::test]
async fn every_method_maps_to_its_request_and_reply() {
    let queues = vec![QueueInfo {
        name: "q".into(),
        ready: 3,
        in_flight: 1,
    }];
    let expected_queues = queues.clone();
    let (addr, server) = serve(move |mut peer| async move {
        // The handshake carries the name and this build's version (no user: no mechanism); the reply
        // may rename the session (the client reports what the broker says).
        let (id, req) = peer.expect().await;
        assert_eq!(
            req,
            Request::Connect(Connect {
                version: PROTOCOL_VERSION,
                client: "app".into(),
                mechanism: String::new(),
                credentials: String::new(),
                keepalive_ms: 0,
                flags: 0,
            })
        );
        peer.write(
            id,
            Response::Connected(ferry_protocol::responses::Connected {
                version: PROTOCOL_VERSION,
                client: "app".into(),
                limits: Limits {
                    lease_ms: 1234,
                    ..Limits::DEFAULT
                },
                keepalive_ms: 0,
                auth: String::new(),
            }),
        )
        .await;
        let script: Vec<(Request, Response)> = vec![
            (Request::Ping, Response::Pong),
            (
                Request::CreateQueue {
                    name: "q".into(),
                    options: Default::default(),
                },
                Response::Ok,
            ),
            (
                Request::DeleteQueue {
                    name: "q".into(),
                    force: true,
                },
                Response::Ok,
            ),
            (Request::ListQueues, Response::Queues(queues)),
            (
                Request::Send(OutgoingMessage::new("q", "hi")),
                Response::Sent { id: 41 },
            ),
            (
                Request::SendBatch(vec![
                    OutgoingMessage::new("q", "a"),
                    OutgoingMessage::new("q", "b"),
                ]),
                Response::BatchSent(vec![
                    Ok(42),
                    Err(ferry_client::ErrorReply::new(
                        ferry_client::ErrorCode::QueueNotFound,
                        "queue 'q' does not exist",
                    )),
                ]),
            ),
            (
                Request::Receive(receive_req()),
                Response::Received(Some(delivery(5, 41))),
            ),
            (Request::Receive(receive_req()), Response::Received(None)),
            (Request::Ack { ids: vec![5] }, Response::Ok),
            (
                Request::Nack {
                    ids: vec![6, 7],
                    requeue: false,
                },
                Response::Ok,
            ),
            (
                Request::WaitingQueues,
                Response::WaitingQueues(vec!["q".into()]),
            ),
        ];
        for (expected, reply) in script {
            let (id, req) = peer.expect().await;
            assert_eq!(req, expected);
            peer.write(id, reply).await;
        }
        peer.drain().await
    })
    .await;
    let client = within(Client::connect_with(ConnectOptions::new(addr, "app")))
        .await
        .unwrap();
    assert_eq!(client.name(), "app");
    assert_eq!(client.limits().lease_ms, 1234);
    within(client.ping()).await.unwrap();
    within(client.create_queue("q")).await.unwrap();
    within(client.delete_queue("q", true)).await.unwrap();
    assert_eq!(within(client.list_queues()).await.unwrap(), expected_queues);
    assert_eq!(
        within(client.send(OutgoingMessage::new("q", "hi")))
            .await
            .unwrap(),
        41
    );
    let results = within(client.send_batch(vec![
        OutgoingMessage::new("q", "a"),
        OutgoingMessage::new("q", "b"),
    ]))
    .await
    .unwrap();
    assert_eq!(results[0].as_ref().unwrap(), &42);
    assert_eq!(
        results[1].as_ref().unwrap_err().code(),
        Some(ferry_client::ErrorCode::QueueNotFound)
    );
    let d = within(client.receive(receive_req()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((d.delivery_id, d.message.id), (5, 41));
    assert!(within(client.receive(receive_req()))
        .await
        .unwrap()
        .is_none());
    within(client.ack(&[5])).await.unwrap();
    within(client.ack(&[])).await.unwrap(); // nothing to settle: no request
    within(client.nack(&[6, 7], false)).await.unwrap();
    assert_eq!(
        within(client.waiting_queues()).await.unwrap(),
        vec!["q".to_string()]
    );
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[test]
fn connect_options_defaults() {
    let o = ConnectOptions::new("localhost:6730", "me");
    assert_eq!(o.addr, "localhost:6730");
    assert_eq!(o.name, "me");
    assert_eq!(o.user, None);
    assert_eq!(o.connect_timeout, std::time::Duration::from_secs(10));
}

#[test]
fn client_and_subscription_can_cross_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    fn assert_send<T: Send + 'static>() {}
    assert_send_sync::<Client>();
    assert_send::<ferry_client::Subscription>();
    assert_send_sync::<ferry_client::ClientError>();
}

#[allow(dead_code)]
fn every_future_is_send(c: &Client, sub: &mut ferry_client::Subscription) {
    // Compiles only if the futures can be spawned on a multi-threaded runtime.
    fn send<T: Send>(_: T) {}
    send(Client::connect("a", "b"));
    send(c.ping());
    send(c.send(OutgoingMessage::new("q", "x")));
    send(c.send_batch(vec![]));
    send(c.receive(receive_req()));
    send(c.ack(&[]));
    send(c.nack(&[], true));
    send(c.list_queues());
    send(c.waiting_queues());
    send(c.create_queue("q"));
    send(c.delete_queue("q", false));
    send(c.disconnect());
    send(c.subscribe(ferry_client::Subscribe {
        queue: "q".into(),
        order: Order::Time,
        ack: AckMode::Auto,
        prefetch: 1,
        selector: String::new(),
    }));
    send(sub.next());
}
