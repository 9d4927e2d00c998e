//! The acceptance table: (selector, expected truth value) against one message, covering
//! three-valued logic, LIKE escapes, numeric promotion, type mismatches, BETWEEN and IN with
//! NULLs, keyword case and precedence.

use ferry_selector::{Selector, SimpleMessage};

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
/// UNKNOWN.
const U: Option<bool> = None;

/// The message every row is evaluated against. `missing` is never set.
fn message() -> SimpleMessage {
    let mut msg = SimpleMessage::new("shop")
        .with("region", "eu")
        .with("price", 150)
        .with("weight", 2.5)
        .with("flag", true)
        .with("off", false)
        .with("name", "a_b")
        .with("code", "abc")
        .with("pct", "100%")
        .with("quote", "it's")
        .with("empty", "")
        .with("uni", "naïve")
        .with("big", i64::MAX)
        .with("min", i64::MIN)
        .with("zero", 0)
        .with("nan", f64::NAN);
    msg.priority = 7;
    msg.context = 42;
    msg.created_at = 1_700_000_000_000;
    msg
}

const NULL_LOGIC: &[(&str, Option<bool>)] = &[
    // AND
    ("TRUE AND TRUE", T),
    ("TRUE AND FALSE", F),
    ("TRUE AND missing", U),
    ("FALSE AND FALSE", F),
    ("FALSE AND missing", F),
    ("missing AND TRUE", U),
    ("missing AND FALSE", F),
    ("missing AND missing", U),
    ("TRUE AND TRUE AND missing", U),
    ("TRUE AND missing AND FALSE", F),
    // OR
    ("TRUE OR TRUE", T),
    ("TRUE OR FALSE", T),
    ("TRUE OR missing", T),
    ("FALSE OR FALSE", F),
    ("FALSE OR missing", U),
    ("missing OR TRUE", T),
    ("missing OR FALSE", U),
    ("missing OR missing", U),
    ("FALSE OR missing OR TRUE", T),
    // NOT
    ("NOT TRUE", F),
    ("NOT FALSE", T),
    ("NOT missing", U),
    ("NOT (missing = 1)", U),
    ("NOT NOT (missing = 1)", U),
    // comparisons and arithmetic with NULL
    ("missing = 1", U),
    ("missing <> 1", U),
    ("missing = missing", U),
    ("missing + 1 = 1", U),
    ("-missing = 1", U),
    ("missing > 1 OR region = 'eu'", T),
    ("missing > 1 AND region = 'eu'", U),
    ("missing > 1 AND region = 'us'", F),
    // IS [NOT] NULL
    ("missing IS NULL", T),
    ("missing IS NOT NULL", F),
    ("region IS NULL", F),
    ("region IS NOT NULL", T),
    ("(missing = 1) IS NULL", T),
    ("(price = 150) IS NULL", F),
    ("(missing + 1) IS NULL", T),
    ("empty IS NULL", F),
    ("receiver IS NULL", T),
    ("receiver = 'x'", U),
    ("NOT receiver = 'x'", U),
    // a bare identifier as a condition
    ("flag", T),
    ("off", F),
    ("NOT flag", F),
    ("flag = TRUE", T),
    ("flag <> off", T),
    ("flag AND price > 100", T),
    ("region", U),
    ("price", U),
    ("missing", U),
    // the empty selector selects everything
    ("", T),
    ("   ", T),
];

const LIKE: &[(&str, Option<bool>)] = &[
    ("name LIKE 'a\\_%' ESCAPE '\\'", T),
    ("code LIKE 'a\\_%' ESCAPE '\\'", F),
    ("name LIKE 'a!_b' ESCAPE '!'", T),
    ("code LIKE 'a!_c' ESCAPE '!'", F),
    ("name LIKE 'a__'", T),
    ("code LIKE 'a_c'", T),
    ("code LIKE 'a_'", F),
    ("code LIKE '_b_'", T),
    ("code LIKE 'a%'", T),
    ("code LIKE '%c'", T),
    ("code LIKE '%b%'", T),
    ("code LIKE '%'", T),
    ("code LIKE 'abc'", T),
    ("code LIKE 'ab'", F),
    ("code LIKE 'A%'", F),
    ("code LIKE 'a%c'", T),
    ("code LIKE 'a%b'", F),
    ("code NOT LIKE 'a%'", F),
    ("code NOT LIKE 'x%'", T),
    ("pct LIKE '100!%' ESCAPE '!'", T),
    ("code LIKE '100!%' ESCAPE '!'", F),
    ("pct LIKE '100%'", T),
    ("pct LIKE '%!%' ESCAPE '!'", T),
    ("code LIKE '%!%' ESCAPE '!'", F),
    ("pct LIKE '100!!' ESCAPE '!'", F),
    ("quote LIKE '%''%'", T),
    ("quote LIKE 'it''s'", T),
    ("uni LIKE 'na_ve'", T),
    ("uni LIKE '_____'", T),
    ("empty LIKE ''", T),
    ("empty LIKE '%'", T),
    ("empty LIKE '_'", F),
    ("missing LIKE '%'", U),
    ("missing NOT LIKE '%'", U),
    ("price LIKE '1%'", F),
    ("price NOT LIKE '1%'", T),
    ("flag LIKE '%'", F),
    ("sender LIKE 'sh%'", T),
    ("receiver LIKE '%'", U),
];

const NUMBERS: &[(&str, Option<bool>)] = &[
    ("1 = 1.0", T),
    ("2.5 > 2", T),
    ("2 < 2.5", T),
    ("2 <= 2.0", T),
    ("3 >= 2.99", T),
    ("1 <> 1.0", F),
    ("price = 150.0", T),
    ("weight > 2", T),
    ("weight < 3", T),
    ("weight * 2 = 5", T),
    ("weight * 2 = 5.0", T),
    ("price / 2 = 75", T),
    ("7 / 2 = 3", T),
    ("-7 / 2 = -3", T),
    ("7 / 2.0 = 3.5", T),
    ("7.0 / 2 = 3.5", T),
    ("price + weight = 152.5", T),
    ("1 / 0 = 1", U),
    ("(1 / 0) IS NULL", T),
    ("zero / zero = 0", U),
    ("1.0 / 0 > 1000000", T),
    ("1 / 0.0 > 1000000", T),
    ("-1 / 0.0 < 0", T),
    ("big + 1 > 0", U),
    ("big * 2 > 0", U),
    ("min - 1 < 0", U),
    ("min / -1 = 0", U),
    ("-min = 0", U),
    ("big + 1.0 > 0", T),
    ("big = 9223372036854775807", T),
    ("min = -9223372036854775808", T),
    ("-9223372036854775808 < 0", T),
    ("9007199254740993 = 9007199254740992.0", T),
    ("0x10 = 16", T),
    ("0XfF = 255", T),
    ("010 = 8", T),
    ("5L = 5", T),
    ("1e2 = 100", T),
    ("1E2 = 100", T),
    ("1.5e1 = 15", T),
    ("2.5E-1 = 0.25", T),
    (".5 = 0.5", T),
    ("7. = 7", T),
    ("2f = 2", T),
    ("priority = 7.0", T),
    ("nan = nan", F),
    ("nan <> nan", T),
    ("nan < 1", F),
    ("nan >= 1", F),
    ("NOT nan = nan", T),
    ("1 + 2 * 3 = 7", T),
    ("(1 + 2) * 3 = 9", T),
    ("10 - 2 - 3 = 5", T),
    ("100 / 10 / 5 = 2", T),
    ("2 * -3 = -6", T),
    ("- - 3 = 3", T),
    ("-(-3) = 3", T),
    ("+price = 150", T),
    ("-weight = -2.5", T),
    ("-region = 1", U),
    ("+region = 1", U),
    ("price - -1 = 151", T),
];

const TYPE_MISMATCH: &[(&str, Option<bool>)] = &[
    // A comparison of values of different types is FALSE (JMS), whatever the operator.
    ("region = 1", F),
    ("region <> 1", F),
    ("NOT region = 1", T),
    ("NOT region <> 1", T),
    ("price = '150'", F),
    ("price <> '150'", F),
    ("flag = 1", F),
    ("flag = 'true'", F),
    ("'1' = 1", F),
    ("TRUE = 1", F),
    ("price < region", F),
    ("region < price", F),
    ("region >= 1", F),
    ("NOT region >= 1", T),
    ("weight = 'x'", F),
    ("flag = weight", F),
    // Strings and booleans are not ordered: such a comparison cannot be made either.
    ("off < flag", F),
    ("region < quote", F),
    ("NOT region > code", T),
    // NULL still makes a comparison UNKNOWN, even against another type.
    ("missing = 'eu'", U),
    ("missing <> 1", U),
    ("receiver = 1", U),
    // Arithmetic on a non-number is UNKNOWN (NULL), and so is a comparison with it.
    ("region + 1 = 1", U),
    ("flag * 2 = 2", U),
    ("region = 'eu' OR price = 'x'", T),
    ("price = 'x' OR region = 'eu'", T),
    ("region = 'eu' AND price = 'x'", F),
    ("region = 'eu' AND NOT price = 'x'", T),
    ("region AND TRUE", U),
    ("price OR FALSE", U),
    ("NOT code", U),
    ("sender = 5", F),
    ("priority = '7'", F),
    ("NOT priority = '7'", T),
    ("context <> 'x'", F),
];

const BETWEEN_IN: &[(&str, Option<bool>)] = &[
    ("price BETWEEN 100 AND 200", T),
    ("price BETWEEN 150 AND 150", T),
    ("price BETWEEN 151 AND 200", F),
    ("price BETWEEN 200 AND 100", F),
    ("price NOT BETWEEN 100 AND 200", F),
    ("price NOT BETWEEN 151 AND 200", T),
    ("weight BETWEEN 2 AND 3", T),
    ("price BETWEEN 100.5 AND 150.5", T),
    ("price BETWEEN 100 + 50 AND 3 * 50", T),
    ("price BETWEEN 100 AND 200 AND flag", T),
    ("missing BETWEEN 1 AND 2", U),
    ("missing NOT BETWEEN 1 AND 2", U),
    ("price BETWEEN missing AND 200", U),
    ("price BETWEEN missing AND 100", F),
    ("price NOT BETWEEN missing AND 100", T),
    ("price BETWEEN 200 AND missing", F),
    ("region BETWEEN 1 AND 2", F),
    ("region NOT BETWEEN 1 AND 2", T),
    ("price BETWEEN region AND 200", F),
    ("priority BETWEEN 1 AND 10", T),
    ("context BETWEEN 40 AND 50", T),
    ("region IN ('eu', 'us')", T),
    ("region IN ('us', 'asia')", F),
    ("region IN ('eu')", T),
    ("region NOT IN ('us', 'asia')", T),
    ("region NOT IN ('eu')", F),
    ("region IN ('EU')", F),
    ("missing IN ('eu')", U),
    ("missing NOT IN ('eu')", U),
    ("price IN (100, 150)", T),
    ("price IN (150.0)", T),
    ("price IN (-1, 150)", T),
    ("price IN (1, 2)", F),
    ("weight IN (2.5, 3)", T),
    ("price IN ('150')", F),
    ("price NOT IN ('150')", T),
    ("region IN ('eu', 1)", T),
    ("region IN ('us', 1)", F),
    ("region NOT IN ('us', 1)", T),
    ("price IN ('150', 150)", T),
    ("price IN ('150', 151)", F),
    ("flag IN ('true')", F),
    ("flag NOT IN ('true')", T),
    ("sender IN ('shop', 'bank')", T),
    ("receiver IN ('shop')", U),
    ("receiver NOT IN ('shop')", U),
    ("quote IN ('it''s')", T),
    (
        "code IN ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'abc')",
        T,
    ),
];

const KEYWORDS_AND_NAMES: &[(&str, Option<bool>)] = &[
    ("region = 'eu' and price > 100", T),
    ("region = 'eu' AnD price > 100", T),
    ("flag oR FALSE", T),
    ("not flag", F),
    ("price between 100 And 200", T),
    ("region NoT In ('us')", T),
    ("code like 'a%' EsCaPe '!'", T),
    ("missing is null", T),
    ("region Is Not Null", T),
    ("flag = true", T),
    ("flag = True", T),
    ("off = false", T),
    ("Region = 'eu'", U),
    ("REGION IS NULL", T),
    ("sender = 'shop'", T),
    ("sender <> 'shop'", F),
    ("priority > 5", T),
    ("JMSPriority = 7", T),
    ("Priority = 7", U),
    ("context = 42", T),
    ("created_at > 1600000000000", T),
    ("JMSTimestamp = created_at", T),
    ("quote = 'it''s'", T),
    ("region = 'eu '", F),
    ("empty = ''", T),
    ("'a' = 'a'", T),
    ("'a' <> 'b'", T),
];

const PRECEDENCE: &[(&str, Option<bool>)] = &[
    ("TRUE OR TRUE AND FALSE", T),
    ("(TRUE OR TRUE) AND FALSE", F),
    ("FALSE AND FALSE OR TRUE", T),
    ("NOT FALSE AND FALSE", F),
    ("NOT (FALSE AND FALSE)", T),
    ("NOT price > 200", T),
    ("NOT price BETWEEN 1 AND 2", T),
    ("NOT region IN ('eu')", F),
    ("price > 100 + 40 AND price < 10 * 16", T),
    ("((((flag))))", T),
];

fn check(rows: &[(&str, Option<bool>)]) {
    let msg = message();
    let mut failures = Vec::new();
    for &(text, expected) in rows {
        match Selector::parse(text) {
            Ok(selector) => {
                let got = selector.evaluate(&msg);
                if got != expected {
                    failures.push(format!("{text:?}: expected {expected:?}, got {got:?}"));
                }
                assert_eq!(selector.matches(&msg), got == Some(true));
            }
            Err(err) => failures.push(format!("{text:?}: does not parse: {err}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn null_logic() {
    check(NULL_LOGIC);
}

#[test]
fn like_and_escapes() {
    check(LIKE);
}

#[test]
fn numeric_promotion_and_arithmetic() {
    check(NUMBERS);
}

#[test]
fn type_mismatches_are_false() {
    check(TYPE_MISMATCH);
}

#[test]
fn between_and_in_with_nulls() {
    check(BETWEEN_IN);
}

#[test]
fn keywords_ignore_case_and_identifiers_do_not() {
    check(KEYWORDS_AND_NAMES);
}

#[test]
fn precedence() {
    check(PRECEDENCE);
}

#[test]
fn addressed_message() {
    let mut msg = message();
    msg.receiver = Some("warehouse".into());
    for (text, expected) in [
        ("receiver = 'warehouse'", T),
        ("receiver IS NOT NULL", T),
        ("receiver IN ('shop', 'warehouse')", T),
        ("receiver LIKE 'ware%'", T),
        ("receiver <> sender", T),
    ] {
        assert_eq!(
            Selector::parse(text).unwrap().evaluate(&msg),
            expected,
            "{text}"
        );
    }
}
