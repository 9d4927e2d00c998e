//! Bad selectors: each is refused with the byte position of the problem and a message saying
//! what is wrong. Also the limits on length and nesting.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use ferry_selector::{Selector, MAX_DEPTH, MAX_SELECTOR_LEN};

/// (selector, position, a fragment of the message)
const BAD: &[(&str, usize, &str)] = &[
    ("price >", 7, "expected an expression, found end of input"),
    ("price > (1 + 2", 14, "expected ')', found end of input"),
    ("region = 'eu", 9, "unterminated string literal"),
    ("a = 1 AND", 9, "expected an expression"),
    ("a = 1 OR", 8, "expected an expression"),
    ("a == 1", 3, "expected an expression, found '='"),
    ("a = 1 b", 6, "unexpected identifier 'b'"),
    ("a = 1 = 2", 6, "unexpected '='"),
    ("a LIKE 'x' ESCAPE 'ab'", 18, "exactly one character"),
    ("a LIKE 'x' ESCAPE ''", 18, "exactly one character"),
    (
        "a LIKE 'x!' ESCAPE '!'",
        7,
        "pattern ends with the escape character",
    ),
    ("a LIKE 'x!y' ESCAPE '!'", 7, "must be followed by"),
    ("a LIKE y", 7, "expected a string pattern after LIKE"),
    ("a LIKE 'x' ESCAPE y", 18, "expected a string after ESCAPE"),
    (
        "a NOT 5",
        6,
        "expected BETWEEN, IN or LIKE after NOT, found a number",
    ),
    (
        "a NOT",
        5,
        "expected BETWEEN, IN or LIKE after NOT, found end of input",
    ),
    ("a IN ()", 6, "expected a string or number in the IN list"),
    ("a IN 'x'", 5, "expected '(' after IN"),
    ("a IN ('x' 'y')", 10, "expected ',' or ')' in the IN list"),
    (
        "a IN ('x',)",
        10,
        "expected a string or number in the IN list",
    ),
    ("a IN (b)", 6, "expected a string or number in the IN list"),
    (
        "a IN (-'x')",
        7,
        "expected a string or number in the IN list",
    ),
    (
        "a IN (+'x')",
        7,
        "expected a string or number in the IN list",
    ),
    ("a BETWEEN 1 2", 12, "expected AND, found a number"),
    ("a BETWEEN 1", 11, "expected AND, found end of input"),
    ("a IS 5", 5, "expected NULL"),
    ("a IS NOT", 8, "expected NULL"),
    (
        "'a' + 1 = 1",
        0,
        "arithmetic needs numbers: expected a number, found a string",
    ),
    ("1 - TRUE = 1", 4, "arithmetic needs numbers"),
    ("-'a' = 1", 1, "a sign needs a number"),
    ("sender < 'm'", 0, "'<' compares numbers only"),
    ("a >= 'm'", 5, "'>=' compares numbers only"),
    ("flag < TRUE", 7, "compares numbers only"),
    ("a BETWEEN 'a' AND 'b'", 10, "BETWEEN compares numbers only"),
    ("sender BETWEEN 1 AND 2", 0, "BETWEEN compares numbers only"),
    ("priority LIKE 'x'", 0, "LIKE matches strings only"),
    ("5 LIKE 'x'", 0, "LIKE matches strings only"),
    (
        "NOT 5",
        4,
        "operand of NOT: expected a boolean, found a number",
    ),
    ("flag AND 1", 9, "operand of AND: expected a boolean"),
    (
        "'x' OR flag",
        0,
        "operand of OR: expected a boolean, found a string",
    ),
    (
        "price + 1",
        0,
        "a selector must be a condition: expected a boolean, found a number",
    ),
    ("'eu'", 0, "a selector must be a condition"),
    ("sender", 0, "a selector must be a condition"),
    ("x = 9223372036854775808", 4, "integer literal out of range"),
    (
        "x = 99999999999999999999",
        4,
        "integer literal out of range",
    ),
    ("x = 0x1FFFFFFFFFFFFFFFF", 4, "integer literal out of range"),
    ("x = 12abc", 4, "invalid numeric literal"),
    ("x = 1.2.3", 4, "invalid numeric literal"),
    ("x = 09", 4, "invalid octal literal"),
    ("x = 1e", 4, "invalid numeric literal"),
    ("a # 1", 2, "unexpected character '#'"),
    ("a != 1", 2, "use '<>'"),
    ("a = \"x\"", 4, "unexpected character '\"'"),
    ("(", 1, "expected an expression, found end of input"),
    (")", 0, "expected an expression, found ')'"),
    ("()", 1, "expected an expression, found ')'"),
    ("AND", 0, "expected an expression, found AND"),
    ("a = NULL", 4, "expected an expression, found NULL"),
    ("é = 'x' AND", 12, "expected an expression"),
];

#[test]
fn bad_selectors_name_their_position() {
    let mut failures = Vec::new();
    for &(text, position, fragment) in BAD {
        match Selector::parse(text) {
            Ok(_) => failures.push(format!("{text:?}: parsed")),
            Err(err) => {
                if err.position != position || !err.message.contains(fragment) {
                    failures.push(format!(
                        "{text:?}: expected {fragment:?} at {position}, got {:?} at {}",
                        err.message, err.position
                    ));
                }
                assert_eq!(
                    err.to_string(),
                    format!("{} at position {}", err.message, err.position)
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn length_limit() {
    let filler = MAX_SELECTOR_LEN - "a = ''".len();
    let longest = format!("a = '{}'", "x".repeat(filler));
    assert_eq!(longest.len(), MAX_SELECTOR_LEN);
    assert!(Selector::parse(&longest).is_ok());
    let too_long = format!("a = '{}'", "x".repeat(filler + 1));
    let err = Selector::parse(&too_long).unwrap_err();
    assert_eq!(err.position, MAX_SELECTOR_LEN);
    assert!(err.message.contains("longer than"), "{err}");
}

fn nested_error(text: &str) {
    let err = Selector::parse(text).unwrap_err();
    assert!(err.message.contains("nested deeper"), "{err}");
}

#[test]
fn nesting_limit() {
    let ok = format!(
        "{}a{}",
        "(".repeat(MAX_DEPTH - 1),
        ")".repeat(MAX_DEPTH - 1)
    );
    assert!(Selector::parse(&ok).is_ok());
    nested_error(&format!(
        "{}a{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    ));
    // Far deeper than any stack would take, and unbalanced.
    nested_error(&"(".repeat(60_000));
    nested_error(&format!("{}a", "NOT ".repeat(10_000)));
    nested_error(&format!("{}1 = 1", "-".repeat(60_000)));
    nested_error(&format!("{}1 = 1", "1 + ".repeat(1_000)));
    nested_error(&format!("a IN (1) AND ({}1 = 1)", "1 * ".repeat(MAX_DEPTH)));
}

#[test]
fn long_flat_chains_are_not_nesting() {
    let ors = vec!["a = 1"; 5_000].join(" OR ");
    let selector = Selector::parse(&ors).unwrap();
    let msg = ferry_selector::SimpleMessage::new("s").with("a", 1);
    assert!(selector.matches(&msg));
    let ands = vec!["a = 1"; 5_000].join(" AND ");
    assert!(Selector::parse(&ands).unwrap().matches(&msg));
}
