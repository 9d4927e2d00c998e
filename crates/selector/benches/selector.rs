//! The cost of `Selector::matches` per message for typical selectors, beside an always-true
//! selector, and the one-off cost of parsing.
//!
//! The message has ten properties and is read through `SimpleMessage`, whose property lookup is
//! a linear scan by name like the broker's property list.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use ferry_selector::{Selector, SimpleMessage};

const SELECTORS: &[(&str, &str)] = &[
    ("empty", ""),
    ("true", "TRUE"),
    ("eq_and_gt", "region = 'eu' AND price > 100"),
    ("header", "priority >= 5 AND sender = 'shop'"),
    ("like_prefix", "name LIKE 'order-%'"),
    ("like_general", "name LIKE 'o_der-%-eu'"),
    ("like_escape", "code LIKE 'A\\_%' ESCAPE '\\'"),
    ("in", "region IN ('us', 'eu', 'asia')"),
    ("between", "price BETWEEN 100 AND 200"),
    (
        "compound",
        "(region = 'eu' OR region = 'us') AND price * 1.2 BETWEEN 100 AND 200 AND NOT discounted",
    ),
    ("absent", "missing = 1 OR missing IS NULL"),
];

fn message() -> SimpleMessage {
    let mut msg = SimpleMessage::new("shop")
        .with("customer", "c-1042")
        .with("channel", "web")
        .with("currency", "EUR")
        .with("items", 3)
        .with("weight", 1.75)
        .with("code", "A_17")
        .with("name", "order-7781-eu")
        .with("discounted", false)
        .with("price", 150)
        .with("region", "eu");
    msg.priority = 7;
    msg.context = 99;
    msg.created_at = 1_700_000_000_000;
    msg
}

fn matches(c: &mut Criterion) {
    let msg = message();
    let mut group = c.benchmark_group("matches");
    for &(name, text) in SELECTORS {
        let selector = Selector::parse(text).expect("benchmark selectors parse");
        assert!(selector.matches(&msg), "{name} should match");
        group.bench_function(name, |b| {
            b.iter(|| black_box(&selector).matches(black_box(&msg)))
        });
    }
    group.finish();
}

fn parse(c: &mut Criterion) {
    let text = SELECTORS
        .iter()
        .find(|(name, _)| *name == "compound")
        .map_or("TRUE", |(_, text)| *text);
    c.bench_function("parse/compound", |b| {
        b.iter(|| Selector::parse(black_box(text)))
    });
}

criterion_group!(benches, matches, parse);
criterion_main!(benches);
