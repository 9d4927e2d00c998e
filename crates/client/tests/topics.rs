//! Topics, topic subscriptions and transactions: each method sends the request it should and
//! returns what the reply carries; publishes coalesce with sends; topic subscriptions are
//! routed, credited and cancelled like queue subscriptions; a transaction's requests keep their
//! order on the wire.

mod fake;

use std::time::Duration;

use fake::*;
use ferry_client::{
    AckMode, Client, ClientError, ErrorCode, ErrorReply, Limits, Order, OutgoingMessage,
    QueueOptions, SubscribeTopic, SubscriptionInfo, TopicInfo,
};
use ferry_protocol::{Request, Response};

fn topics() -> Vec<TopicInfo> {
    vec![TopicInfo {
        name: "prices".into(),
        subscriptions: vec![SubscriptionInfo {
            name: "audit".into(),
            durable: true,
            shared: false,
            selector: "region = 'eu'".into(),
            ready: 3,
            in_flight: 1,
        }],
    }]
}

fn audit() -> SubscribeTopic {
    SubscribeTopic::new("prices")
        .durable("audit")
        .with_selector("region = 'eu'")
        .options(QueueOptions {
            max_deliveries: 5,
            dead_letter_queue: Some("dead".into()),
            expiry_queue: None,
        })
}

fn deliver(subscription: u64, delivery_id: u64, n: u64) -> (u32, Response) {
    let mut delivery = delivery(delivery_id, n);
    delivery.message.queue = "prices:~c.1".into();
    (
        0,
        Response::Deliver {
            subscription,
            delivery,
        },
    )
}

#[tokio::test]
async fn every_topic_and_transaction_method_maps_to_its_request_and_reply() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let script: Vec<(Request, Response)> = vec![
            (
                Request::CreateTopic {
                    name: "prices".into(),
                },
                Response::Ok,
            ),
            (Request::ListTopics, Response::Topics(topics())),
            (
                Request::Send(OutgoingMessage::to_topic("prices", "1.08").non_persistent()),
                Response::Sent { id: 9 },
            ),
            (
                Request::SubscribeTopic(audit().prefetch(0)),
                Response::TopicSubscribed {
                    subscription: 0,
                    queue: "prices:audit".into(),
                },
            ),
            (
                Request::Unsubscribe {
                    topic: "prices".into(),
                    name: "audit".into(),
                },
                Response::Ok,
            ),
            (Request::TxnBegin, Response::Ok),
            (
                Request::Send(OutgoingMessage::to_topic("prices", "in txn")),
                Response::Sent { id: 0 },
            ),
            (Request::TxnCommit, Response::Committed { ids: vec![10] }),
            (Request::TxnBegin, Response::Ok),
            (Request::TxnRollback, Response::Ok),
            (
                Request::TxnCommit,
                Response::error(ErrorCode::TransactionState, "no transaction is open"),
            ),
            (
                Request::DeleteTopic {
                    name: "prices".into(),
                    force: false,
                },
                Response::error(ErrorCode::TopicNotEmpty, "topic 'prices' is not empty"),
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
    let client = within(Client::connect(&addr, "app")).await.unwrap();
    within(client.create_topic("prices")).await.unwrap();
    assert_eq!(within(client.list_topics()).await.unwrap(), topics());
    let id = within(client.publish(OutgoingMessage::to_topic("prices", "1.08").non_persistent()))
        .await
        .unwrap();
    assert_eq!(id, 9);
    // The prefetch given is replaced by 0: create or check only.
    let queue = within(client.ensure_subscription(audit().prefetch(7)))
        .await
        .unwrap();
    assert_eq!(queue, "prices:audit");
    within(client.unsubscribe("prices", "audit")).await.unwrap();
    within(client.begin()).await.unwrap();
    let held = within(client.publish(OutgoingMessage::to_topic("prices", "in txn")))
        .await
        .unwrap();
    assert_eq!(held, 0, "inside a transaction the id comes with the commit");
    assert_eq!(within(client.commit()).await.unwrap(), vec![10]);
    within(client.begin()).await.unwrap();
    within(client.rollback()).await.unwrap();
    let e = within(client.commit()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TransactionState));
    let e = within(client.delete_topic("prices", false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TopicNotEmpty));
    assert!(e.to_string().contains("topic 'prices' is not empty"), "{e}");
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn topic_subscriptions_are_routed_credited_and_cancelled_like_queue_ones() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert_eq!(
            req,
            Request::SubscribeTopic(SubscribeTopic::new("prices").ack(AckMode::Auto).prefetch(4))
        );
        // Deliveries right behind the reply, in the same write: the client must route them.
        peer.write_all(&[
            (
                id,
                Response::TopicSubscribed {
                    subscription: 3,
                    queue: "prices:~c.1".into(),
                },
            ),
            deliver(3, 0, 1),
            deliver(3, 0, 2),
        ])
        .await;
        // Auto ack: half the prefetch consumed gives credit back.
        let (id, req) = peer.expect().await;
        assert_eq!(
            req,
            Request::Credit {
                subscription: 3,
                credit: 2
            }
        );
        peer.write(id, Response::Ok).await;
        // A queue subscription next to it keeps its own queue name.
        let (id, req) = peer.expect().await;
        assert!(matches!(req, Request::Subscribe(_)), "{req:?}");
        peer.write(id, Response::Subscribed { subscription: 4 })
            .await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "c")).await.unwrap();
    let mut sub = within(
        client.subscribe_topic(SubscribeTopic::new("prices").ack(AckMode::Auto).prefetch(4)),
    )
    .await
    .unwrap();
    assert_eq!((sub.id(), sub.queue()), (3, "prices:~c.1"));
    assert_eq!((sub.ack_mode(), sub.prefetch()), (AckMode::Auto, 4));
    for n in [1, 2] {
        let d = within(sub.next()).await.unwrap().unwrap();
        assert_eq!((d.message.id, d.message.queue.as_str()), (n, "prices:~c.1"));
    }
    let queue_sub = within(client.subscribe(ferry_client::Subscribe {
        queue: "orders".into(),
        order: Order::Time,
        ack: AckMode::Client,
        prefetch: 1,
        selector: String::new(),
    }))
    .await
    .unwrap();
    assert_eq!(queue_sub.queue(), "orders");
    drop(queue_sub);
    drop(sub); // cancels: the broker then removes a non-durable subscription
    drop(client);
    let rest = within(server).await.unwrap();
    assert_eq!(
        rest,
        vec![
            Request::Cancel { subscription: 4 },
            Request::Cancel { subscription: 3 }
        ]
    );
}

#[tokio::test]
async fn subscribe_topic_failures() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, _) = peer.expect().await;
        peer.write(
            id,
            Response::error(
                ErrorCode::SubscriptionInUse,
                "subscription 'audit' of topic 'prices' is consumed by another session",
            ),
        )
        .await;
        // A broker answering a consuming subscribe with id 0 names no subscription.
        let (id, _) = peer.expect().await;
        peer.write(
            id,
            Response::TopicSubscribed {
                subscription: 0,
                queue: "prices:audit".into(),
            },
        )
        .await;
        let (id, _) = peer.expect().await;
        peer.write(id, Response::Sent { id: 1 }).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "c")).await.unwrap();
    let e = within(client.subscribe_topic(audit())).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::SubscriptionInUse));
    let e = within(client.subscribe_topic(audit())).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    let e = within(client.subscribe_topic(audit())).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Protocol(_)),
        "wrong reply kind: {e:?}"
    );
    // Refused without a round trip: prefetch 0, and strings the wire cannot carry.
    let e = within(client.subscribe_topic(audit().prefetch(0)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidArgument));
    assert!(e.to_string().contains("ensure_subscription"), "{e}");
    let long = "x".repeat(70_000);
    for res in [
        within(client.subscribe_topic(audit().with_selector(long.clone())))
            .await
            .map(|_| ()),
        within(client.ensure_subscription(SubscribeTopic::new(long.clone())))
            .await
            .map(|_| ()),
        within(client.create_topic(&long)).await,
        within(client.unsubscribe("prices", &long)).await,
        within(client.publish(OutgoingMessage::to_topic(long.clone(), "x")))
            .await
            .map(|_| ()),
    ] {
        assert!(matches!(res, Err(ClientError::TooLarge(_))), "{res:?}");
    }
    drop(client);
    assert_eq!(within(server).await.unwrap(), vec![]);
}

#[tokio::test]
async fn a_topic_subscription_whose_caller_gave_up_is_cancelled() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (id, req) = peer.expect().await;
        assert!(matches!(req, Request::SubscribeTopic(_)));
        tokio::time::sleep(Duration::from_millis(200)).await;
        peer.write(
            id,
            Response::TopicSubscribed {
                subscription: 8,
                queue: "prices:~c.1".into(),
            },
        )
        .await;
        let (id, req) = peer.expect().await;
        assert_eq!(req, Request::Cancel { subscription: 8 });
        peer.write(id, Response::Ok).await;
        peer.drain().await
    })
    .await;
    let client = within(Client::connect(&addr, "impatient")).await.unwrap();
    let sub = client.subscribe_topic(SubscribeTopic::new("prices"));
    assert!(tokio::time::timeout(Duration::from_millis(50), sub)
        .await
        .is_err());
    let rest = within(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(client);
        server.await
    })
    .await
    .unwrap();
    assert_eq!(rest, vec![]);
}

#[tokio::test]
async fn publishes_coalesce_with_sends_and_a_transaction_keeps_its_order_on_the_wire() {
    // On this single-threaded runtime everything below is queued before the writer runs:
    // begin, then six sends and publishes (coalesced into one batch behind it), then commit.
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let mut seen = Vec::new();
        loop {
            let (id, req) = peer.expect().await;
            let reply = match &req {
                Request::TxnBegin => Response::Ok,
                Request::SendBatch(items) => {
                    Response::BatchSent(items.iter().map(|_| Ok(0)).collect())
                }
                Request::Send(_) => Response::Sent { id: 0 },
                Request::TxnCommit => Response::Committed {
                    ids: (1..=6).collect(),
                },
                other => panic!("unexpected {other:?}"),
            };
            let done = req == Request::TxnCommit;
            seen.push(req);
            peer.write(id, reply).await;
            if done {
                break;
            }
        }
        peer.drain().await;
        seen
    })
    .await;
    let client = within(Client::connect(&addr, "txn")).await.unwrap();
    let begin = {
        let c = client.clone();
        tokio::spawn(async move { c.begin().await })
    };
    let sends: Vec<_> = (0..6u64)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move {
                let msg = if i % 2 == 0 {
                    OutgoingMessage::new("q", i.to_string())
                } else {
                    OutgoingMessage::to_topic("t", i.to_string())
                };
                c.send(msg).await
            })
        })
        .collect();
    within(begin).await.unwrap().unwrap();
    for s in sends {
        assert_eq!(within(s).await.unwrap().unwrap(), 0);
    }
    assert_eq!(
        within(client.commit()).await.unwrap(),
        vec![1, 2, 3, 4, 5, 6]
    );
    drop(client);
    let seen = within(server).await.unwrap();
    assert_eq!(seen.len(), 3, "begin, one batch, commit: {seen:?}");
    assert_eq!(seen[0], Request::TxnBegin);
    let Request::SendBatch(items) = &seen[1] else {
        panic!("expected one batch, got {:?}", seen[1])
    };
    let shape: Vec<(Option<&str>, &[u8])> = items
        .iter()
        .map(|m| (m.topic.as_deref(), &m.body[..]))
        .collect();
    assert_eq!(
        shape,
        vec![
            (None, &b"0"[..]),
            (Some("t"), b"1"),
            (None, b"2"),
            (Some("t"), b"3"),
            (None, b"4"),
            (Some("t"), b"5"),
        ]
    );
    assert_eq!(seen[2], Request::TxnCommit);
}

#[allow(dead_code)]
fn every_future_is_send(c: &Client) {
    // Compiles only if the futures can be spawned on a multi-threaded runtime.
    fn send<T: Send>(_: T) {}
    send(c.create_topic("t"));
    send(c.delete_topic("t", true));
    send(c.list_topics());
    send(c.publish(OutgoingMessage::to_topic("t", "x")));
    send(c.subscribe_topic(SubscribeTopic::new("t")));
    send(c.ensure_subscription(SubscribeTopic::new("t").durable("d")));
    send(c.unsubscribe("t", "d"));
    send(c.begin());
    send(c.commit());
    send(c.rollback());
}

#[test]
fn error_reply_display_names_the_code() {
    let e = ClientError::Server(ErrorReply::new(
        ErrorCode::TopicNotFound,
        "topic 'x' does not exist",
    ));
    assert_eq!(e.code(), Some(ErrorCode::TopicNotFound));
    assert!(e.to_string().contains("TopicNotFound"), "{e}");
}
