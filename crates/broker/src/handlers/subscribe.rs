//! subscribe, credit and cancel.

use std::sync::Arc;

use bytes::BytesMut;

use ferry_protocol::requests::{Subscribe, SubscribeTopic};
use ferry_protocol::{subscription_queue, ErrorCode, ErrorReply, Response, SubscriptionId};
use ferry_selector::Selector;
use ferry_store::StoreError;

use super::{store_error, validate};
use crate::push::{self, DeliveryEncoder};
use crate::session::{Session, TopicConsumer};
use crate::shared::Shared;
use crate::subscription;

/// subscribe: checks the queue exists, the prefetch is within limits and the selector parses,
/// then starts pushing.
/// On success it queues the `Subscribed` reply itself, before the task can push, so that a
/// client always learns the subscription id before its first delivery; it then returns `None`.
pub async fn subscribe(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    request_id: u32,
    sub: Subscribe,
) -> Option<Response> {
    let announce = |id| {
        let mut reply = BytesMut::new();
        Response::Subscribed { subscription: id }.encode(request_id, &mut reply);
        session.out.send(reply.freeze()).is_ok()
    };
    let encoder = push::native(session.version(), shared.limits.max_frame_bytes);
    open_queue(shared, session, sub, encoder, announce)
        .await
        .err()
}

/// Starts a push subscription on a queue whose pushes `encoder` writes, once `announce` has
/// made its id known (and returned true; false: the connection is gone, nothing starts).
/// `Ok(None)` when the connection went; `Err` with the reply when it cannot start.
pub async fn open_queue(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    sub: Subscribe,
    encoder: Arc<dyn DeliveryEncoder>,
    announce: impl FnOnce(SubscriptionId) -> bool,
) -> Result<Option<SubscriptionId>, Response> {
    let selector = check(shared, &sub).await?;
    let id = session.next_subscription_id();
    if !announce(id) {
        return Ok(None); // the connection is gone
    }
    subscription::start(shared.clone(), session.clone(), id, sub, selector, encoder);
    Ok(Some(id))
}

/// The subscription's parsed selector if it can start, otherwise the error response.
async fn check(shared: &Shared, sub: &Subscribe) -> Result<Option<Arc<Selector>>, Response> {
    let fail = Err;
    if let Err(e) = validate::name("queue", &sub.queue, &shared.limits) {
        return fail(Response::Error(e));
    }
    let selector = validate::selector(&sub.selector).map_err(Response::Error)?;
    if sub.prefetch == 0 {
        return fail(Response::error(
            ErrorCode::InvalidArgument,
            "prefetch must be at least 1",
        ));
    }
    check_prefetch(shared, sub.prefetch).map_err(Response::Error)?;
    match shared.store.queues().queue_exists(&sub.queue).await {
        Ok(true) => Ok(selector),
        Ok(false) => fail(store_error(&ferry_store::StoreError::QueueNotFound(
            sub.queue.clone(),
        ))),
        Err(e) => fail(store_error(&e)),
    }
}

fn check_prefetch(shared: &Shared, prefetch: u32) -> Result<(), ErrorReply> {
    if prefetch > shared.limits.max_prefetch {
        return Err(ErrorReply::new(
            ErrorCode::LimitExceeded,
            format!(
                "prefetch {prefetch} exceeds the limit of {}",
                shared.limits.max_prefetch
            ),
        ));
    }
    Ok(())
}

/// The subscription's name (generated for a non-durable one) once its request is valid.
fn check_topic(
    shared: &Shared,
    session: &Session,
    sub: &SubscribeTopic,
) -> Result<String, ErrorReply> {
    let limits = &shared.limits;
    validate::topic_or_pattern(&sub.topic, limits)?;
    validate::selector(&sub.options.selector)?;
    check_prefetch(shared, sub.prefetch)?;
    let q = &sub.options.queue;
    for other in [&q.dead_letter_queue, &q.expiry_queue]
        .into_iter()
        .flatten()
    {
        validate::name("queue", other, limits)?;
    }
    if !sub.options.durable && !sub.options.shared {
        return Ok(session.non_durable_name());
    }
    if sub.name.is_empty() {
        let what = if sub.options.durable {
            "durable"
        } else {
            "shared"
        };
        return Err(ErrorReply::new(
            ErrorCode::InvalidArgument,
            format!("a {what} subscription needs a name"),
        ));
    }
    validate::name("subscription", &sub.name, limits)?;
    Ok(sub.name.clone())
}

/// subscribe_topic: creates the topic subscription (or attaches to the durable one of that
/// name) and starts pushing from its queue. Messages are filtered by the subscription's
/// selector when they are published, so the push itself takes every message of the queue.
/// With prefetch 0 it only creates or checks the subscription (a non-durable one is removed
/// again at once) and replies with subscription id 0.
pub async fn subscribe_topic(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    request_id: u32,
    sub: SubscribeTopic,
) -> Option<Response> {
    let announce = |id, queue: &str| {
        let mut reply = BytesMut::new();
        Response::TopicSubscribed {
            subscription: id,
            queue: queue.to_owned(),
        }
        .encode(request_id, &mut reply);
        session.out.send(reply.freeze()).is_ok()
    };
    let encoder = push::native(session.version(), shared.limits.max_frame_bytes);
    open_topic(shared, session, sub, encoder, announce)
        .await
        .err()
}

/// [`subscribe_topic`] with the pushes written by `encoder`, once `announce` has made the id
/// and the subscription's queue known (see [`open_queue`]). `Err` carries the reply when
/// nothing starts, also the prefetch-0 reply.
pub async fn open_topic(
    shared: &Arc<Shared>,
    session: &Arc<Session>,
    sub: SubscribeTopic,
    encoder: Arc<dyn DeliveryEncoder>,
    announce: impl FnOnce(SubscriptionId, &str) -> bool,
) -> Result<Option<SubscriptionId>, Response> {
    let name = check_topic(shared, session, &sub).map_err(Response::Error)?;
    let queue = subscription_queue(&sub.topic, &name);
    let store = &shared.store;
    if sub.prefetch == 0 {
        return Err(
            match store
                .topics()
                .subscribe_topic(&sub.topic, &name, &sub.options, &session.client)
                .await
            {
                Ok(queue) => {
                    if !sub.options.durable && sub.options.shared {
                        // Lives while it has consumers: gone again unless others consume it.
                        let _ = store
                            .topics()
                            .detach_consumer(&sub.topic, &name, session.id)
                            .await;
                    } else if !sub.options.durable {
                        let _ = store.topics().unsubscribe(&sub.topic, &name).await;
                    }
                    Response::TopicSubscribed {
                        subscription: 0,
                        queue,
                    }
                }
                Err(e) => store_error(&e),
            },
        );
    }
    // Claimed before the store is asked, so two sessions racing for an exclusive
    // subscription cannot both get it.
    shared
        .consumers
        .attach(&queue, sub.options.shared)
        .map_err(Response::Error)?;
    if let Err(e) = attach(shared, session, &sub, &name).await {
        shared.consumers.detach(&queue);
        return Err(store_error(&e));
    }
    let id = session.next_subscription_id();
    let consumer = TopicConsumer {
        topic: sub.topic.clone(),
        name,
        queue: queue.clone(),
        durable: sub.options.durable,
        shared: sub.options.shared,
        session: session.id,
    };
    if !announce(id, &queue) {
        end_topic_consumer(shared, consumer).await; // the connection is gone
        return Ok(None);
    }
    session.add_topic_consumer(id, consumer);
    let push = Subscribe {
        queue,
        order: sub.order,
        ack: sub.ack,
        prefetch: sub.prefetch,
        selector: String::new(),
    };
    subscription::start(shared.clone(), session.clone(), id, push, None, encoder);
    Ok(Some(id))
}

/// Creates (or finds) the subscription and records this session as its consumer in the store,
/// which decides across every node sharing it (a subscription that is not shared may have its
/// consumer on another node).
async fn attach(
    shared: &Shared,
    session: &Session,
    sub: &SubscribeTopic,
    name: &str,
) -> Result<(), StoreError> {
    let store = &shared.store;
    let mut tries = 0;
    loop {
        tries += 1;
        store
            .topics()
            .subscribe_topic(&sub.topic, name, &sub.options, &session.client)
            .await?;
        match store
            .topics()
            .attach_consumer(&sub.topic, name, session.id, sub.options.shared)
            .await
        {
            Ok(()) => return Ok(()),
            // A shared non-durable subscription whose last consumer left between the two
            // calls is gone: make it again.
            Err(StoreError::SubscriptionNotFound(_))
                if !sub.options.durable && sub.options.shared && tries < 3 => {}
            Err(e) => {
                if !sub.options.durable {
                    // Made for this consumer: not left behind without one.
                    let _ = if sub.options.shared {
                        store
                            .topics()
                            .detach_consumer(&sub.topic, name, session.id)
                            .await
                    } else {
                        store.topics().unsubscribe(&sub.topic, name).await
                    };
                }
                return Err(e);
            }
        }
    }
}

/// Undoes a topic consumer: it no longer counts as consuming, and a non-durable subscription
/// is removed with whatever it still holds (a shared one once its last consumer ends, which
/// the store sees to).
pub async fn end_topic_consumer(shared: &Shared, consumer: TopicConsumer) {
    shared.consumers.detach(&consumer.queue);
    if let Err(e) = shared
        .store
        .topics()
        .detach_consumer(&consumer.topic, &consumer.name, consumer.session)
        .await
    {
        // The store forgets the session's consumers when the session ends, or its node.
        tracing::warn!(subscription = %consumer.queue, error = %e, "could not end a consumer in the store");
    }
    if consumer.durable || consumer.shared {
        return;
    }
    match shared
        .store
        .topics()
        .unsubscribe(&consumer.topic, &consumer.name)
        .await
    {
        Ok(()) | Err(StoreError::SubscriptionNotFound(_)) | Err(StoreError::TopicNotFound(_)) => {}
        Err(e) => tracing::warn!(
            subscription = %consumer.queue,
            error = %e,
            "could not remove a non-durable subscription"
        ),
    }
}

/// credit: more deliveries for an auto-ack subscription.
pub fn credit(session: &Session, sub: SubscriptionId, n: u32) -> Response {
    if n == 0 {
        return Response::error(ErrorCode::InvalidArgument, "credit must be at least 1");
    }
    if session.credit(sub, n) {
        Response::Ok
    } else {
        subscription::unknown(sub)
    }
}

/// cancel: stops the subscription; its unsettled deliveries stay with the session. A
/// non-durable topic subscription is removed.
pub async fn cancel(shared: &Shared, session: &Session, sub: SubscriptionId) -> Response {
    if session.cancel(sub).await {
        if let Some(consumer) = session.take_topic_consumer(sub) {
            end_topic_consumer(shared, consumer).await;
        }
        Response::Ok
    } else {
        subscription::unknown(sub)
    }
}
