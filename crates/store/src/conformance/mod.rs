//! The conformance suite every engine must pass, written only against `Arc<dyn Store>` so that
//! any engine (embedded, PostgreSQL) runs it unchanged.
//!
//! - [`queues`]: queue and client metadata: create, delete (forced or not), list, register;
//! - [`sending`]: all-or-nothing sends, unknown receivers, batches, ids;
//! - [`receiving`]: eligibility, by-sender retrieval, orders, peek, takes, `max`;
//! - [`selecting`]: receives with a selector, on properties and headers, by queue and sender;
//! - [`settling`]: ack, nack, release, lease expiry, unknown delivery ids;
//! - [`sessions`]: session claims (`AlreadyOnline`) and a lone node's heartbeat;
//! - [`registry`]: client names expire when they hold nothing; ephemeral names;
//! - [`timing`]: delayed delivery and time to live, with time controlled by the test;
//! - [`dead_letters`]: maximum delivery count and dead-letter queues;
//! - [`topics`]: topics, durable and non-durable subscriptions, publishing with selectors;
//! - [`wildcards`]: subscriptions on topic patterns (`*`, `>`), overlapping and across restarts;
//! - [`transactions`]: all-or-nothing commits of sends, publishes and acks;
//! - [`non_persistent`]: messages kept in memory only, settled like any other;
//! - [`admin`]: the operator's role: queue figures and settings, purge, delete, move and
//!   redrive, clients (forgetting one), counters, `QueueInUse`, readiness;
//! - [`users`]: users, their credentials and grants;
//! - [`browsing`]: browsing queues and senders by cursor, in order, with selectors;
//! - [`backlog`]: backlogs larger than an engine's body cache, read back byte-exact in every
//!   order, after compaction and after a restart.
//!
//! Use [`run_all`] with a function that returns a fresh, empty store, or call the tests one by
//! one. A failing check panics with a message saying what was expected.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::{
    AckMode, Delivery, Order, PropertyValue, ReceiveMode, Source, SubscriptionInfo,
    SubscriptionOptions,
};

use crate::admin::QueueDetails;
use crate::api::{NewMessage, ReceiveSpec, SessionId, Store};

pub mod admin;
pub mod backlog;
pub mod browsing;
pub mod dead_letters;
pub mod non_persistent;
pub mod queues;
pub mod receiving;
pub mod registry;
pub mod selecting;
pub mod sending;
pub mod sessions;
pub mod settling;
pub mod timing;
pub mod topics;
pub mod transactions;
pub mod users;
pub mod wildcards;

/// A boxed conformance test.
pub type TestFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One named test of the suite.
pub type Test = (&'static str, fn(Arc<dyn Store>) -> TestFuture);

macro_rules! tests {
    ($($module:ident :: $name:ident),* $(,)?) => {
        /// Every test of the suite, by name.
        pub fn all() -> Vec<Test> {
            vec![$((
                concat!(stringify!($module), "::", stringify!($name)),
                |s| Box::pin($module::$name(s)) as TestFuture,
            )),*]
        }
    };
}

/// Calls macro `$callback` with the path of every test of the suite (`module::name, ...`):
/// the suite's one list, from which [`all`] and an engine's test functions are made, so a new
/// test runs everywhere once it is listed here.
#[macro_export]
macro_rules! for_each_conformance_test {
    ($callback:ident) => {
        $callback!(
            queues::queue_lifecycle,
            users::user_lifecycle,
            users::user_changes,
            queues::delete_non_empty_queue,
            queues::forced_delete_keeps_other_queues,
            queues::clients_register_idempotently,
            sending::send_to_missing_queue_changes_nothing,
            sending::unknown_receiver_changes_nothing,
            sending::ids_increase_and_fields_roundtrip,
            sending::send_batch_mixed_success,
            sending::send_batch_keeps_each_sender,
            sending::message_on_several_queues,
            receiving::unknown_source_errors,
            receiving::addressed_messages_invisible_to_others,
            receiving::by_sender_across_queues,
            receiving::priority_and_time_order,
            receiving::same_priority_is_fifo,
            receiving::peek_leaves_message,
            receiving::auto_ack_take_removes,
            receiving::receive_max_many,
            receiving::byte_limit_takes_the_prefix_that_fits,
            receiving::waiting_queues_lists_addressed,
            selecting::selector_takes_only_matching_in_order,
            selecting::non_matching_messages_stay_for_others,
            selecting::selector_finds_matches_far_down_the_queue,
            selecting::selector_on_headers,
            selecting::by_sender_with_selector,
            selecting::peek_with_selector,
            settling::client_ack_lease_then_ack,
            settling::nack_requeue_redelivers_in_old_position,
            settling::nack_without_requeue_drops,
            settling::release_session_returns_deliveries,
            settling::expire_leases_and_next_deadline,
            settling::unknown_delivery_ids_are_listed,
            settling::other_sessions_cannot_settle,
            settling::held_take_is_removed_by_its_ack,
            settling::held_take_comes_back_unchanged_on_release,
            settling::held_take_with_a_selector_is_held_too,
            sessions::claim_is_exclusive_until_ended,
            sessions::claims_and_leases_are_independent,
            sessions::heartbeat_of_a_lone_node_frees_nothing,
            registry::idle_names_that_hold_nothing_expire,
            registry::names_that_hold_something_stay,
            registry::leased_and_delayed_messages_hold_their_names,
            registry::ephemeral_names_go_with_their_session,
            registry::ephemeral_and_permanent_claims_of_one_name,
            timing::delayed_message_is_invisible_until_due,
            timing::delayed_messages_due_name_their_queues,
            timing::delayed_addressed_message_waits_only_once_due,
            timing::times_at_the_end_of_the_range_mean_never,
            timing::expired_message_is_never_delivered,
            timing::expired_messages_are_purged,
            timing::expired_leased_message_is_not_redelivered,
            dead_letters::dead_lettered_after_max_deliveries_with_history,
            dead_letters::over_max_without_dead_letter_queue_is_dropped,
            dead_letters::dead_letter_queue_must_exist,
            dead_letters::expired_messages_move_to_the_expiry_queue,
            topics::topic_lifecycle,
            topics::missing_topic_errors,
            topics::topic_and_queue_names_are_independent,
            topics::list_topics_shows_subscriptions_sorted_with_counts,
            topics::delete_non_empty_topic_needs_force,
            topics::forced_delete_drops_subscriptions_and_messages,
            topics::resubscribe_checks_settings_and_keeps_backlog,
            topics::resubscribe_keeps_queue_options,
            topics::subscribe_rejects_bad_selector_and_missing_dead_letter_queue,
            topics::subscription_queues_are_hidden_but_receivable,
            topics::publish_copies_to_every_subscription,
            topics::only_messages_published_after_subscribing,
            topics::publish_without_subscriptions_stores_nothing,
            topics::selectors_pick_messages_per_subscription,
            topics::publish_in_send_batch_mixed_with_sends,
            topics::a_batch_alternating_topics_publishes_each_to_its_own,
            topics::settling_on_one_subscription_leaves_the_others,
            topics::subscription_dead_letters_after_max_deliveries,
            topics::unsubscribe_removes_subscription_and_backlog,
            topics::non_durable_subscription_lifecycle,
            topics::subscription_queue_is_named_by_settling_and_timing,
            topics::queue_count_and_existence_leave_out_subscriptions,
            topics::subscription_queue_orders_delays_and_expires,
            topics::publish_to_unknown_receiver_changes_nothing,
            topics::many_publishes_reach_exactly_the_matching_subscriptions,
            topics::settling_after_unsubscribe_is_harmless,
            topics::topics_and_subscriptions_sort_by_name,
            topics::non_durable_resubscribe_replaces_it,
            topics::durability_and_sharing_mismatches_are_refused,
            topics::shared_non_durable_subscription_lives_while_consumed,
            topics::subscribing_while_publishing_gets_a_suffix,
            topics::concurrent_publishes_reach_every_subscription_once,
            topics::consumers_of_a_subscription_exclude_each_other_unless_shared,
            wildcards::exact_one_word_and_trailing_patterns_match,
            wildcards::overlapping_patterns_each_get_one_copy,
            wildcards::patterns_need_no_topic_and_publishes_still_do,
            wildcards::pattern_subscriptions_are_listed_and_removed,
            wildcards::pattern_subscriptions_are_durable_shared_and_selecting,
            wildcards::many_patterns_reach_exactly_the_matching_ones,
            transactions::commit_applies_sends_publishes_and_acks,
            transactions::commit_with_missing_queue_changes_nothing,
            transactions::commit_with_missing_topic_changes_nothing,
            transactions::commit_with_unknown_receiver_changes_nothing,
            transactions::commit_with_unheld_ack_changes_nothing,
            transactions::empty_and_one_sided_commits,
            transactions::racing_commits_settle_a_delivery_once,
            transactions::commits_racing_deletes_are_all_or_nothing,
            transactions::large_commit_is_all_or_nothing,
            non_persistent::non_persistent_messages_are_received_and_acked,
            non_persistent::non_persistent_messages_are_nacked_released_and_expired,
            non_persistent::non_persistent_publish_and_commit,
            non_persistent::non_persistent_messages_are_dead_lettered,
            admin::queue_details_count_every_state,
            admin::queue_settings_change_applies_from_then_on,
            admin::queue_settings_refuse_unknown_self_and_cycles,
            admin::purge_removes_ready_and_delayed_only,
            admin::delete_message_removes_one_waiting_message,
            admin::move_keeps_the_message_and_skips_what_is_not_ready,
            admin::redrive_returns_dead_letters_with_their_history,
            admin::clients_are_listed_with_their_node,
            admin::queue_in_use_and_counted_dead_letters,
            admin::a_working_store_is_ready,
            admin::forgetting_a_client_needs_it_offline_and_holding_nothing,
            browsing::browse_pages_in_order_without_consuming,
            browsing::browse_cursor_is_stable_under_takes,
            browsing::browse_by_sender_across_queues,
            browsing::browse_with_selector_pages_past_the_budget,
            backlog::backlog_by_queue_is_delivered_byte_exact_in_both_orders,
            backlog::backlog_by_sender_is_delivered_byte_exact,
            backlog::bodies_are_byte_exact_after_compaction,
        );
    };
}

for_each_conformance_test!(tests);

/// Runs every test, each against a fresh store from `make`, and panics at the end naming every
/// test that failed (each runs in a task of its own, so one failure hides no other result).
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let mut failed = Vec::new();
    for (name, test) in all() {
        tracing::info!(test = name, "conformance");
        let store = make().await;
        if tokio::spawn(test(store)).await.is_err() {
            eprintln!("conformance test {name} ... FAILED");
            failed.push(name);
        } else {
            eprintln!("conformance test {name} ... ok");
        }
    }
    assert!(failed.is_empty(), "conformance tests failed: {failed:?}");
}

/// The time the suite's messages are sent at and its receives happen at, unless a test
/// controls time itself (ms since the Unix epoch).
pub const NOW: u64 = 1_700_000_000_000;

/// The session id tests use unless they need several.
pub const SESSION: SessionId = 1;

/// A message from `sender` on `queues` with default priority and `body`.
pub fn msg(queues: &[&str], sender: &str, body: &str) -> NewMessage {
    NewMessage {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        topic: None,
        persistent: true,
        sender: sender.into(),
        receiver: None,
        priority: 5,
        context: 0,
        properties: Default::default(),
        body: Bytes::copy_from_slice(body.as_bytes()),
        created_at: NOW,
        deliver_at_ms: 0,
        expires_at_ms: 0,
    }
}

/// A message with a priority.
pub fn msg_prio(queues: &[&str], sender: &str, body: &str, priority: u8) -> NewMessage {
    NewMessage {
        priority,
        ..msg(queues, sender, body)
    }
}

/// A message addressed to `receiver`.
pub fn msg_to(queues: &[&str], sender: &str, receiver: &str, body: &str) -> NewMessage {
    NewMessage {
        receiver: Some(receiver.into()),
        ..msg(queues, sender, body)
    }
}

/// A receive spec for `client` on a queue.
pub fn from_queue(queue: &str, client: &str, mode: ReceiveMode, ack: AckMode) -> ReceiveSpec {
    ReceiveSpec {
        source: Source::Queue(queue.into()),
        order: Order::Priority,
        mode,
        ack,
        hold: false,
        client: client.into(),
        session: SESSION,
        lease_until_ms: 10_000,
        selector: None,
        now_ms: NOW,
        max_bytes: None,
    }
}

/// An auto-ack take from a queue.
pub fn take(queue: &str, client: &str) -> ReceiveSpec {
    from_queue(queue, client, ReceiveMode::Take, AckMode::Auto)
}

/// A client-ack take from a queue.
pub fn lease(queue: &str, client: &str) -> ReceiveSpec {
    from_queue(queue, client, ReceiveMode::Take, AckMode::Client)
}

/// An auto-ack take from a queue that holds what it takes (see [`ReceiveSpec::hold`]).
pub fn held(queue: &str, client: &str) -> ReceiveSpec {
    ReceiveSpec {
        hold: true,
        ..take(queue, client)
    }
}

/// A peek at a queue.
pub fn peek(queue: &str, client: &str) -> ReceiveSpec {
    from_queue(queue, client, ReceiveMode::Peek, AckMode::Auto)
}

/// The bodies of deliveries, as text.
pub fn bodies(ds: &[Delivery]) -> Vec<String> {
    ds.iter()
        .map(|d| String::from_utf8_lossy(&d.message.body).into_owned())
        .collect()
}

/// Registers clients and creates queues.
pub async fn setup(store: &Arc<dyn Store>, clients: &[&str], queues: &[&str]) {
    for c in clients {
        store.sessions().register_client(c).await.unwrap();
    }
    for q in queues {
        store.queues().create_queue(q).await.unwrap();
    }
}

/// Ready and in-flight counts of a queue, per `list_queues`.
pub async fn depth(store: &Arc<dyn Store>, queue: &str) -> (u64, u64) {
    let list = store.queues().list_queues().await.unwrap();
    let q = list
        .iter()
        .find(|q| q.name == queue)
        .unwrap_or_else(|| panic!("queue '{queue}' missing from {list:?}"));
    (q.ready, q.in_flight)
}

/// A message from `sender` published to `topic` (no queues).
pub fn publish(topic: &str, sender: &str, body: &str) -> NewMessage {
    NewMessage {
        queues: Vec::new(),
        topic: Some(topic.into()),
        ..msg(&[], sender, body)
    }
}

/// Settings of a durable, non-shared subscription with `selector` (empty: none).
pub fn durable(selector: &str) -> SubscriptionOptions {
    SubscriptionOptions {
        durable: true,
        shared: false,
        selector: selector.into(),
        queue: Default::default(),
    }
}

/// Settings of a non-durable subscription with `selector` (empty: none).
pub fn non_durable(selector: &str) -> SubscriptionOptions {
    SubscriptionOptions {
        durable: false,
        ..durable(selector)
    }
}

/// Subscription `name` of `topic`, per `list_topics`, if it is listed.
pub async fn find_subscription(
    store: &Arc<dyn Store>,
    topic: &str,
    name: &str,
) -> Option<SubscriptionInfo> {
    let list = store.topics().list_topics().await.unwrap();
    let t = list
        .iter()
        .find(|t| t.name == topic)
        .unwrap_or_else(|| panic!("topic '{topic}' missing from {list:?}"));
    t.subscriptions.iter().find(|s| s.name == name).cloned()
}

/// Ready and in-flight counts of subscription `name` of `topic`, per `list_topics`.
pub async fn sub_depth(store: &Arc<dyn Store>, topic: &str, name: &str) -> (u64, u64) {
    let s = find_subscription(store, topic, name)
        .await
        .unwrap_or_else(|| panic!("subscription '{name}' missing from topic '{topic}'"));
    (s.ready, s.in_flight)
}

/// Names of the queues `list_queues` reports.
pub async fn queue_names(store: &Arc<dyn Store>) -> Vec<String> {
    store
        .queues()
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect()
}

/// A property list with one of each type.
pub fn sample_properties() -> ferry_protocol::Properties {
    vec![
        ("flag".into(), PropertyValue::Bool(true)),
        ("n".into(), PropertyValue::Int(-42)),
        ("x".into(), PropertyValue::Float(2.5)),
        ("s".into(), PropertyValue::Str("héllo".into())),
    ]
    .into()
}

/// A delivery time no test reaches: the message stays delayed on every engine, whatever the
/// clock (ms since the Unix epoch; the year 2100).
pub const FAR_FUTURE: u64 = 4_102_444_800_000;

/// The figures of queue `name`, per `queue_details`.
pub async fn details(store: &Arc<dyn Store>, name: &str) -> QueueDetails {
    let all = store.admin().queue_details().await.unwrap();
    all.iter()
        .find(|q| q.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("queue '{name}' missing from {all:?}"))
}
