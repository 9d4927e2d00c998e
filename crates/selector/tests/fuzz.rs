//! Property tests: no input makes the parser panic, no parsed selector makes evaluation panic,
//! and evaluation obeys three-valued logic and agrees with a reference `LIKE` matcher.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use ferry_selector::{OwnedValue, Selector, SimpleMessage, MAX_SELECTOR_LEN};
use proptest::prelude::*;

/// Every kind of token the grammar knows, plus a few near misses.
const TOKENS: &[&str] = &[
    "AND",
    "or",
    "Not",
    "BETWEEN",
    "IN",
    "LIKE",
    "ESCAPE",
    "IS",
    "NULL",
    "TRUE",
    "false",
    "(",
    ")",
    ",",
    "=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "a",
    "b",
    "s",
    "flag",
    "missing",
    "priority",
    "sender",
    "receiver",
    "context",
    "created_at",
    "JMSPriority",
    "JMSTimestamp",
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "0x7F",
    "017",
    "2.5",
    "1e3",
    ".5",
    "7.",
    "'x'",
    "''",
    "'%'",
    "'_'",
    "'a\\_%'",
    "'\\'",
    "'!'",
    "'it''s'",
    "'",
    "!=",
    "==",
    "#",
    "\"",
    "é",
    "$x",
    "_y",
    "12abc",
];

fn property_value() -> impl Strategy<Value = Option<OwnedValue>> {
    prop_oneof![
        Just(None),
        any::<bool>().prop_map(|b| Some(OwnedValue::Bool(b))),
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(-1),
            Just(i64::MAX),
            Just(i64::MIN),
            any::<i64>()
        ]
        .prop_map(|i| Some(OwnedValue::Int(i))),
        prop_oneof![
            Just(0.0f64),
            Just(2.5),
            Just(f64::NAN),
            Just(f64::INFINITY),
            any::<f64>()
        ]
        .prop_map(|f| Some(OwnedValue::Float(f))),
        "[ab%_x\\\\!é]{0,6}".prop_map(|s| Some(OwnedValue::Str(s))),
    ]
}

fn message() -> impl Strategy<Value = SimpleMessage> {
    (
        proptest::collection::vec(property_value(), 4),
        1i64..=10,
        proptest::option::of("[a-z]{1,4}"),
        any::<i64>(),
    )
        .prop_map(|(values, priority, receiver, context)| {
            let mut msg = SimpleMessage::new("shop");
            msg.priority = priority;
            msg.receiver = receiver;
            msg.context = context;
            msg.created_at = 1_700_000_000_000;
            for (name, value) in ["a", "b", "s", "flag"].into_iter().zip(values) {
                if let Some(value) = value {
                    msg = msg.with(name, value);
                }
            }
            msg
        })
}

fn evaluate_all(selector: &Selector, msgs: &[SimpleMessage]) {
    for msg in msgs {
        let truth = selector.evaluate(msg);
        assert_eq!(selector.matches(msg), truth == Some(true));
    }
}

/// Arithmetic expressions over properties, literals and headers, as text.
fn arithmetic() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("s".to_string()),
        Just("missing".to_string()),
        Just("priority".to_string()),
        Just("context".to_string()),
        (-5i64..5).prop_map(|i| i.to_string()),
        Just("2.5".to_string()),
        Just("9223372036854775807".to_string()),
    ];
    leaf.prop_recursive(4, 16, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(&["+", "-", "*", "/"][..]),
                inner.clone()
            )
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            inner.prop_map(|e| format!("-{e}")),
        ]
    })
}

/// Conditions, as text; all of them parse.
fn condition() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        (
            arithmetic(),
            prop::sample::select(&["=", "<>", "<", "<=", ">", ">="][..]),
            arithmetic()
        )
            .prop_map(|(l, op, r)| format!("{l} {op} {r}")),
        (
            prop::sample::select(&["s", "a", "missing"][..]),
            "[ab%_]{0,4}",
            any::<bool>()
        )
            .prop_map(|(p, pat, not)| format!("{p} {}LIKE '{pat}'", if not { "NOT " } else { "" })),
        (
            prop::sample::select(&["s", "a", "missing"][..]),
            any::<bool>()
        )
            .prop_map(|(p, not)| format!(
                "{p} {}IN ('a', 'b', 1, 2.5)",
                if not { "NOT " } else { "" }
            )),
        (arithmetic(), arithmetic(), arithmetic(), any::<bool>()).prop_map(|(x, l, h, not)| {
            format!("{x} {}BETWEEN {l} AND {h}", if not { "NOT " } else { "" })
        }),
        (arithmetic(), any::<bool>())
            .prop_map(|(x, not)| format!("{x} IS {}NULL", if not { "NOT " } else { "" })),
        Just("flag".to_string()),
        Just("TRUE".to_string()),
        Just("FALSE".to_string()),
    ];
    atom.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| format!("NOT ({c})")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) AND ({r})")),
            (inner.clone(), inner).prop_map(|(l, r)| format!("({l}) OR ({r})")),
        ]
    })
}

/// `LIKE` by the book: a direct recursive definition over characters.
fn like_reference(pattern: &[char], text: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some(('%', rest)) => (0..=text.len()).any(|i| like_reference(rest, &text[i..])),
        Some(('_', rest)) => !text.is_empty() && like_reference(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && like_reference(rest, &text[1..]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>(), msgs in proptest::collection::vec(message(), 2)) {
        if let Ok(selector) = Selector::parse(&text) {
            evaluate_all(&selector, &msgs);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = Selector::parse(&text);
    }

    #[test]
    fn token_soup_never_panics(
        tokens in proptest::collection::vec(prop::sample::select(TOKENS), 0..40),
        glue in prop::sample::select(&[" ", "", "  "][..]),
        msgs in proptest::collection::vec(message(), 3),
    ) {
        let text = tokens.join(glue);
        match Selector::parse(&text) {
            Ok(selector) => evaluate_all(&selector, &msgs),
            Err(err) => prop_assert!(err.position <= text.len().min(MAX_SELECTOR_LEN)),
        }
    }

    #[test]
    fn generated_selectors_parse_and_obey_three_valued_logic(
        cond in condition(),
        msgs in proptest::collection::vec(message(), 4),
    ) {
        let selector = Selector::parse(&cond).map_err(|e| TestCaseError::fail(format!("{cond}: {e}")))?;
        let negated = Selector::parse(&format!("NOT ({cond})")).unwrap();
        let is_null = Selector::parse(&format!("({cond}) IS NULL")).unwrap();
        let or_self = Selector::parse(&format!("({cond}) OR NOT ({cond})")).unwrap();
        for msg in &msgs {
            let truth = selector.evaluate(msg);
            prop_assert_eq!(negated.evaluate(msg), truth.map(|b| !b));
            // A bare property that is not a boolean is UNKNOWN as a condition, yet not NULL.
            if cond != "flag" {
                prop_assert_eq!(is_null.evaluate(msg), Some(truth.is_none()));
            }
            // The law of the excluded middle holds except for UNKNOWN.
            prop_assert_eq!(or_self.evaluate(msg), truth.map(|_| true));
        }
    }

    #[test]
    fn like_agrees_with_reference(pattern in "[ab%_]{0,8}", text in "[ab]{0,10}") {
        let selector = Selector::parse(&format!("s LIKE '{pattern}'")).unwrap();
        let msg = SimpleMessage::new("x").with("s", text.as_str());
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        prop_assert_eq!(selector.matches(&msg), like_reference(&p, &t));
    }

    #[test]
    fn like_with_escape_agrees_with_reference(pattern in "([ab%_]|![!%_]){0,6}", text in "[ab%_!]{0,8}") {
        let selector = Selector::parse(&format!("s LIKE '{pattern}' ESCAPE '!'")).unwrap();
        let msg = SimpleMessage::new("x").with("s", text.as_str());
        // Escaped characters become private-use stand-ins that only match themselves.
        let mut p = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            p.push(if c == '!' { chars.next().map_or('!', literal_stand_in) } else { c });
        }
        let t: Vec<char> = text.chars().map(literal_stand_in).collect();
        prop_assert_eq!(selector.matches(&msg), like_reference(&p, &t));
    }
}

fn literal_stand_in(c: char) -> char {
    match c {
        '%' => '\u{E000}',
        '_' => '\u{E001}',
        '!' => '\u{E002}',
        c => c,
    }
}
