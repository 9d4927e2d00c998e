//! How topic listings are shown: a table with one row per subscription, and a JSON array.

use std::fmt::Write as _;

use ferry_protocol::TopicInfo;

/// Shown in the subscription column of a topic without subscriptions.
const NONE: &str = "-";

/// The topic table: one row per subscription (a topic without any gets one row of dashes),
/// columns sized to fit; the selector comes last because it may be long.
pub fn topic_table(topics: &[TopicInfo]) -> String {
    let mut rows: Vec<[String; 7]> = Vec::new();
    for t in topics {
        if t.subscriptions.is_empty() {
            rows.push([
                t.name.clone(),
                NONE.into(),
                NONE.into(),
                NONE.into(),
                NONE.into(),
                NONE.into(),
                String::new(),
            ]);
        }
        for s in &t.subscriptions {
            rows.push([
                t.name.clone(),
                s.name.clone(),
                yes_no(s.durable),
                yes_no(s.shared),
                s.ready.to_string(),
                s.in_flight.to_string(),
                s.selector.clone(),
            ]);
        }
    }
    let width = |i: usize, title: &str| {
        rows.iter()
            .map(|r| r.get(i).map_or(0, String::len))
            .chain(std::iter::once(title.len()))
            .max()
            .unwrap_or(title.len())
    };
    let (tw, sw) = (width(0, "TOPIC"), width(1, "SUBSCRIPTION"));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<tw$}  {:<sw$}  {:<7}  {:<6}  {:>10}  {:>10}  SELECTOR",
        "TOPIC", "SUBSCRIPTION", "DURABLE", "SHARED", "READY", "IN FLIGHT"
    );
    for r in &rows {
        let line = format!(
            "{:<tw$}  {:<sw$}  {:<7}  {:<6}  {:>10}  {:>10}  {}",
            r[0], r[1], r[2], r[3], r[4], r[5], r[6]
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// The topic listing as a JSON array, for scripts: each topic (or pattern of wildcard
/// subscriptions, `"pattern": true`) with its subscriptions.
pub fn topic_list_json(topics: &[TopicInfo]) -> String {
    let rows: Vec<serde_json::Value> = topics
        .iter()
        .map(|t| {
            let subs: Vec<serde_json::Value> = t
                .subscriptions
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "name": s.name,
                        "durable": s.durable,
                        "shared": s.shared,
                        "selector": s.selector,
                        "ready": s.ready,
                        "in_flight": s.in_flight,
                    })
                })
                .collect();
            serde_json::json!({
                "name": t.name,
                "pattern": ferry_protocol::topic::is_pattern(&t.name),
                "subscriptions": subs,
            })
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::SubscriptionInfo;

    fn topics() -> Vec<TopicInfo> {
        vec![
            TopicInfo {
                name: "empty".into(),
                subscriptions: Vec::new(),
            },
            TopicInfo {
                name: "prices".into(),
                subscriptions: vec![
                    SubscriptionInfo {
                        name: "audit".into(),
                        durable: true,
                        shared: true,
                        selector: "region = 'eu'".into(),
                        ready: 12,
                        in_flight: 3,
                    },
                    SubscriptionInfo {
                        name: "~cli.1".into(),
                        durable: false,
                        shared: false,
                        selector: String::new(),
                        ready: 0,
                        in_flight: 0,
                    },
                ],
            },
        ]
    }

    #[test]
    fn table_has_a_row_per_subscription() {
        assert_eq!(
            topic_table(&topics()),
            "TOPIC   SUBSCRIPTION  DURABLE  SHARED       READY   IN FLIGHT  SELECTOR\n\
             empty   -             -        -                -           -\n\
             prices  audit         yes      yes             12           3  region = 'eu'\n\
             prices  ~cli.1        no       no               0           0\n"
        );
    }

    #[test]
    fn json_nests_subscriptions() {
        let v: serde_json::Value = serde_json::from_str(&topic_list_json(&topics())).unwrap();
        assert_eq!(v[0]["name"], "empty");
        assert_eq!(v[0]["pattern"], false);
        assert_eq!(v[0]["subscriptions"], serde_json::json!([]));
        let s = &v[1]["subscriptions"][0];
        assert_eq!(s["name"], "audit");
        assert_eq!(s["durable"], true);
        assert_eq!(s["shared"], true);
        assert_eq!(s["selector"], "region = 'eu'");
        assert_eq!(s["ready"], 12);
        assert_eq!(s["in_flight"], 3);
    }
}
