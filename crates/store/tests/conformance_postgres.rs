//! The conformance suite against the PostgreSQL engine, on a real PostgreSQL started for this
//! test binary ([`PgCluster`]), each test on a fresh database of its own.

use std::sync::{Arc, OnceLock};

use ferry_store::{conformance, PostgresConfig, PostgresStore, Store};
use ferry_testkit::PgCluster;

/// One cluster for the whole binary (its watcher stops it when the process exits).
fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

async fn fresh_store() -> Arc<dyn Store> {
    let url = tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap();
    let mut cfg = PostgresConfig::new(url);
    cfg.pool_size = 4;
    PostgresStore::open(cfg).await.unwrap() as Arc<dyn Store>
}

macro_rules! conformance_tests {
    ($($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                conformance::$module::$name(fresh_store().await).await;
            }
        )*
    };
}

conformance_tests!(
    queues::queue_lifecycle,
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
    sessions::claim_is_exclusive_until_ended,
    sessions::claims_and_leases_are_independent,
    sessions::heartbeat_of_a_lone_node_frees_nothing,
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
);

/// Every test of the suite is listed above (so none is forgotten when the suite grows).
#[test]
fn every_conformance_test_is_listed() {
    let source = include_str!("conformance_postgres.rs");
    for (name, _) in conformance::all() {
        assert!(
            source.contains(name),
            "{name} is not run against PostgreSQL"
        );
    }
}

/// The whole suite in one go, as `run_all` runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_all_passes() {
    conformance::run_all(fresh_store).await;
}
