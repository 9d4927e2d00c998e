//! `ferry subscribe`: subscribe to a topic (durable or not, with an optional selector) and print
//! the messages that arrive, exactly as `ferry recv` prints them.
//!
//! The subscription is consumed with client ack and a prefetch of one, so the broker never
//! pushes a message the command will not print: with `--ack client` (the default) a message is
//! acked after it has been printed and standard output flushed; with `--ack auto` it is acked
//! as soon as it arrives (at most once: lost if printing fails). Before settling the last
//! message of `--count` of a durable subscription, the subscription is cancelled, so that
//! settling it does not make room for one more push that would come back marked redelivered.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use ferry_client::{Client, Subscription};
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::{AckMode, Delivery};

use super::recv::OrderArg;
use crate::connection::{explain, ConnArgs};
use crate::render;

/// When a delivered message is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AckArg {
    /// As soon as it arrives, before it is printed (at most once).
    Auto,
    /// Once it has been printed (at least once).
    Client,
}

/// Which subscription, as flags: one declaration for `ferry subscribe` and the shell's
/// `subscribe`.
#[derive(Debug, Clone, Args)]
pub struct SubscriptionFlags {
    /// A durable subscription of this name: it keeps collecting messages while nobody
    /// consumes it, until `ferry unsubscribe`. Without it the subscription lives as long as
    /// this command and sees only messages published meanwhile.
    #[arg(long, value_name = "NAME")]
    pub durable: Option<String>,
    /// The durable subscription may be consumed by several sessions at once (competing
    /// consumers).
    #[arg(long, requires = "durable")]
    pub shared: bool,
    /// A shared non-durable subscription of this name: every `ferry subscribe` (or other
    /// client) using the name takes a share of its messages, and it lives as long as one of
    /// them consumes it.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["durable", "shared"])]
    pub shared_name: Option<String>,
    /// Only messages this JMS message selector is TRUE for are placed on the subscription,
    /// e.g. "region = 'eu' AND priority >= 8" (see docs/selectors.md).
    #[arg(long, value_name = "EXPR")]
    pub selector: Option<String>,
    /// Which message comes first when several are waiting.
    #[arg(long, value_enum, default_value_t = OrderArg::Priority)]
    pub order: OrderArg,
}

impl SubscriptionFlags {
    /// The subscription to `topic` these flags name; ack mode and prefetch are the caller's.
    pub fn request(&self, topic: &str) -> SubscribeTopic {
        let mut request = SubscribeTopic::new(topic).order(self.order.into());
        if let Some(name) = &self.durable {
            request = request.durable(name.clone());
        }
        if self.shared {
            request = request.shared();
        }
        if let Some(name) = &self.shared_name {
            request = request.shared_as(name.clone());
        }
        if let Some(selector) = &self.selector {
            request = request.with_selector(selector.clone());
        }
        request
    }
}

/// Flags of `ferry subscribe`.
#[derive(Debug, Args)]
pub struct SubscribeArgs {
    /// The topic, or a pattern of topics: `*` stands for one word, `>` (last) for the
    /// remaining words, e.g. 'prices.*.eu' or 'prices.>' (quote it for the shell).
    #[arg(long, short = 't', value_name = "TOPIC")]
    topic: String,
    #[command(flatten)]
    subscription: SubscriptionFlags,
    /// Stop after N messages. 0 creates (or checks) the durable subscription and exits without
    /// consuming. Default: no limit.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Stop when no message arrives within this long (e.g. 5s, 500ms). Default: wait as long
    /// as it takes.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    wait: Option<Duration>,
    /// Settle each message when it arrives (auto) or once printed (client).
    #[arg(long, value_enum, default_value_t = AckArg::Client)]
    ack: AckArg,
    /// Print one JSON object per message per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: ConnArgs,
}

/// Subscribes and prints messages until `--count` or `--wait` ends it.
pub async fn run(args: SubscribeArgs) -> Result<()> {
    let wait = args.wait;
    let request = args
        .subscription
        .request(&args.topic)
        .ack(AckMode::Client)
        .prefetch(1);
    if args.count == Some(0) && args.subscription.durable.is_none() {
        bail!("--count 0 needs --durable: a subscription without a name lives only while it is consumed");
    }
    let client = args.conn.connect().await?;
    let result = if args.count == Some(0) {
        ensure(&client, request, &args).await
    } else {
        consume(&client, request, &args, wait).await
    };
    // On error an unsettled delivery (if any) returns to the subscription with the session.
    let _ = client.disconnect().await;
    result
}

/// `--count 0`: create or check the subscription, print what it is, consume nothing.
async fn ensure(client: &Client, request: SubscribeTopic, args: &SubscribeArgs) -> Result<()> {
    let queue = client
        .ensure_subscription(request.prefetch(0))
        .await
        .map_err(explain)?;
    if args.json {
        return Ok(());
    }
    super::emit(&format!(
        "subscription '{}' to topic '{}' is ready (queue '{queue}')\n",
        args.subscription.durable.as_deref().unwrap_or_default(),
        args.topic
    ))
}

async fn consume(
    client: &Client,
    request: SubscribeTopic,
    args: &SubscribeArgs,
    wait: Option<Duration>,
) -> Result<()> {
    let count = args.count.unwrap_or(u64::MAX);
    let mut sub = Some(client.subscribe_topic(request).await.map_err(explain)?);
    let mut printed = 0u64;
    while printed < count {
        let Some(delivery) = next(&mut sub, wait).await? else {
            break;
        };
        // Nothing more may be pushed once the last one is settled: see the module comment. A
        // non-durable subscription ends with its consumer, and its deliveries with it, so it is
        // left open until the end.
        if printed + 1 == count && args.subscription.durable.is_some() {
            if let Some(s) = sub.take() {
                s.cancel().await;
            }
        }
        if args.ack == AckArg::Auto {
            settle(client, &delivery).await?;
        }
        let text = if args.json {
            format!("{}\n", render::message_json(&delivery.message))
        } else if printed == 0 {
            render::message_block(&delivery.message, None)
        } else {
            format!("\n{}", render::message_block(&delivery.message, None))
        };
        super::emit(&text)?;
        if args.ack == AckArg::Client {
            settle(client, &delivery).await?;
        }
        printed += 1;
    }
    if let Some(s) = sub.take() {
        s.cancel().await;
    }
    Ok(())
}

/// The next delivery, or `None` when `wait` passes without one (or the subscription is gone).
async fn next(sub: &mut Option<Subscription>, wait: Option<Duration>) -> Result<Option<Delivery>> {
    let Some(s) = sub.as_mut() else {
        return Ok(None);
    };
    let item = match wait {
        Some(limit) => match tokio::time::timeout(limit, s.next()).await {
            Ok(item) => item,
            Err(_elapsed) => return Ok(None),
        },
        None => s.next().await,
    };
    match item {
        None => Ok(None),
        Some(Ok(d)) => Ok(Some(d)),
        Some(Err(e)) => Err(explain(e)),
    }
}

async fn settle(client: &Client, delivery: &Delivery) -> Result<()> {
    if delivery.delivery_id != 0 {
        client.ack(&[delivery.delivery_id]).await.map_err(explain)?;
    }
    Ok(())
}
