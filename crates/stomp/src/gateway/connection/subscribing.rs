//! SUBSCRIBE and UNSUBSCRIBE on a connection: destinations created on first use where the
//! session may, broker subscriptions or by-sender tasks started, and stopped again.

use super::*;

impl Conn {
    pub(super) async fn subscribe(
        &mut self,
        f: &Frame,
        receipt: Option<String>,
    ) -> Result<(), Failure> {
        self.barrier().await?;
        let dest_text = required(f, "destination")?;
        let dest = Destination::parse(dest_text).map_err(|e| Failure::new(e, ""))?;
        let id = match (f.header("id"), self.version) {
            (Some(id), _) => id.to_owned(),
            (None, Version::V1_0) => dest_text.to_owned(),
            (None, _) => return Err(Failure::new("missing header 'id'", "SUBSCRIBE needs an id")),
        };
        if self.subs.contains_key(&id) {
            return Err(Failure::new(
                format!("subscription id '{id}' is in use"),
                "each subscription of a connection needs its own id",
            ));
        }
        if self.subs.len() >= self.gw.settings.max_subscriptions {
            return Err(Failure::new(
                format!(
                    "more than {} subscriptions on one connection",
                    self.gw.settings.max_subscriptions
                ),
                "",
            ));
        }
        let mode = match f.header("ack").unwrap_or("auto") {
            "auto" => Mode::Auto,
            "client" => Mode::Client,
            "client-individual" => Mode::Individual,
            other => {
                return Err(Failure::new(
                    format!("invalid ack mode '{other}'"),
                    "use auto, client or client-individual",
                ))
            }
        };
        let native_ack = if mode == Mode::Auto {
            AckMode::Auto
        } else {
            AckMode::Client
        };
        let prefetch = match f
            .header("activemq.prefetchSize")
            .or_else(|| f.header("ferry-prefetch"))
        {
            Some(p) => match p.trim().parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(Failure::new(
                        format!("invalid prefetch '{p}'"),
                        "a prefetch is a whole number of messages, at least 1",
                    ))
                }
            },
            None => self.gw.settings.default_prefetch,
        };
        let selector = f.header("selector").unwrap_or_default().to_owned();
        if self.gw.settings.auto_create && !self.known.contains(&dest) {
            ensure(&self.session, &dest).await?;
            self.known.insert(dest.clone());
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let pattern =
            matches!(&dest, Destination::Topic(t) if ferry_protocol::topic::is_pattern(t));
        let encoder = Arc::new(StompEncoder::new(
            slot,
            &id,
            dest_text,
            pattern,
            mode,
            self.version,
            self.acks.clone(),
        ));
        let (runs, named) = match &dest {
            Destination::Queue(q) => {
                let s = Subscribe {
                    queue: q.clone(),
                    order: Order::Priority,
                    ack: native_ack,
                    prefetch,
                    selector,
                };
                let id = self
                    .session
                    .subscribe(s, encoder.clone())
                    .await
                    .map_err(|e| Failure::refused("SUBSCRIBE", &e))?;
                (Runs::Broker(id), None)
            }
            Destination::Topic(t) => {
                let durable = f
                    .header("durable-subscription-name")
                    .or_else(|| f.header("activemq.subscriptionName"));
                let shared = f.header("ferry-shared") == Some("true");
                let mut s = SubscribeTopic::new(t.clone())
                    .ack(native_ack)
                    .order(Order::Priority)
                    .prefetch(prefetch)
                    .with_selector(selector);
                s = match (durable, shared) {
                    (Some(name), false) => s.durable(name),
                    (Some(name), true) => s.durable(name).shared(),
                    (None, true) => match f.header("ferry-subscription-name") {
                        Some(name) => s.shared_as(name),
                        None => {
                            return Err(Failure::new(
                                "a shared subscription needs a name",
                                "name it with durable-subscription-name (durable) or ferry-subscription-name",
                            ))
                        }
                    },
                    (None, false) => s,
                };
                let name = s.name.clone();
                let id = self
                    .session
                    .subscribe_topic(s, encoder.clone())
                    .await
                    .map_err(|e| Failure::refused("SUBSCRIBE", &e))?;
                let named = (!name.is_empty()).then(|| (t.clone(), name));
                (Runs::Broker(id), named)
            }
            Destination::Sender(from) => {
                let task = sender::start(
                    self.session.clone(),
                    from.clone(),
                    native_ack,
                    prefetch,
                    selector,
                    encoder.clone(),
                    self.acks.clone(),
                )
                .await?;
                (Runs::Task(task), None)
            }
        };
        self.subs.insert(
            id,
            Sub {
                runs,
                encoder,
                named,
            },
        );
        if let Some(r) = receipt {
            self.write(receipt_frame(&r)).await;
        }
        Ok(())
    }

    pub(super) async fn unsubscribe(
        &mut self,
        f: &Frame,
        receipt: Option<String>,
    ) -> Result<(), Failure> {
        self.barrier().await?;
        let id = match (f.header("id"), self.version) {
            (Some(id), _) => id,
            (None, Version::V1_0) => required(f, "destination")?,
            (None, _) => {
                return Err(Failure::new(
                    "missing header 'id'",
                    "UNSUBSCRIBE needs an id",
                ))
            }
        };
        let Some(sub) = self.subs.remove(id) else {
            return Err(Failure::new(format!("no subscription '{id}'"), ""));
        };
        stop(&self.session, &sub).await?;
        // ActiveMQ's way to end a durable subscription for good: UNSUBSCRIBE naming it.
        let removes = f
            .header("durable-subscription-name")
            .or_else(|| f.header("activemq.subscriptionName"));
        if let (Some(name), Some((topic, sub_name))) = (removes, &sub.named) {
            if name == sub_name {
                let request = Request::Unsubscribe {
                    topic: topic.clone(),
                    name: name.to_owned(),
                };
                match self.session.request(request).await {
                    Response::Ok => {}
                    other => return Err(Failure::unexpected("UNSUBSCRIBE", &other)),
                }
            }
        }
        if let Some(r) = receipt {
            self.write(receipt_frame(&r)).await;
        }
        Ok(())
    }
}

/// Stops one subscription (what it delivered and is not acknowledged stays with the
/// session, and goes back to its queue when the session ends).
pub(super) async fn stop(session: &LocalSession, sub: &Sub) -> Result<(), Failure> {
    match &sub.runs {
        Runs::Broker(id) => {
            match session.request(Request::Cancel { subscription: *id }).await {
                // Not found: the broker ended it already.
                Response::Ok => Ok(()),
                Response::Error(e) if e.code == ErrorCode::NotFound => Ok(()),
                other => Err(Failure::unexpected("UNSUBSCRIBE", &other)),
            }
        }
        Runs::Task(task) => {
            task.abort();
            Ok(())
        }
    }
}

/// Creates a destination unless it exists (auto-create), when the session may manage its
/// name; a session that may not goes on without (the destination may exist: the frame's own
/// operation then says whether it does). Patterns and senders are not created.
pub(super) async fn ensure(session: &LocalSession, dest: &Destination) -> Result<(), Failure> {
    let request = match dest {
        Destination::Queue(q) => Request::CreateQueue {
            name: q.clone(),
            options: QueueOptions::default(),
        },
        Destination::Topic(t) if t.contains(['*', '>']) => return Ok(()),
        Destination::Topic(t) => Request::CreateTopic { name: t.clone() },
        Destination::Sender(_) => return Ok(()),
    };
    match session.request(request).await {
        Response::Ok => Ok(()),
        Response::Error(e)
            if matches!(
                e.code,
                ErrorCode::QueueExists | ErrorCode::TopicExists | ErrorCode::Unauthorized
            ) =>
        {
            Ok(())
        }
        other => Err(Failure::unexpected("creating the destination", &other)),
    }
}
