//! Evaluation of a parsed selector against one message, in SQL's three-valued logic.
//!
//! Booleans are `Option<bool>` here, `None` being UNKNOWN. Values are borrowed from the message
//! or from the selector's own literals, so nothing is allocated. Recursion is bounded by the
//! tree's depth, which the parser limits.

use std::cmp::Ordering;

use crate::ast::{ArithOp, CmpOp, Expr, InList, Number};
use crate::value::{SelectorSource, Value};

/// The truth value of a condition: `Some(true)`, `Some(false)` or UNKNOWN (`None`).
pub(crate) fn truth<S: SelectorSource + ?Sized>(expr: &Expr, msg: &S) -> Option<bool> {
    match expr {
        Expr::And(operands) => {
            // FALSE wins over UNKNOWN; stop at the first FALSE.
            let mut result = Some(true);
            for operand in operands {
                match truth(operand, msg) {
                    Some(false) => return Some(false),
                    None => result = None,
                    Some(true) => {}
                }
            }
            result
        }
        Expr::Or(operands) => {
            // TRUE wins over UNKNOWN; stop at the first TRUE.
            let mut result = Some(false);
            for operand in operands {
                match truth(operand, msg) {
                    Some(true) => return Some(true),
                    None => result = None,
                    Some(false) => {}
                }
            }
            result
        }
        Expr::Not(operand) => truth(operand, msg).map(|b| !b),
        Expr::Cmp(op, left, right) => compare(*op, value(left, msg), value(right, msg)),
        Expr::Between {
            negated,
            operand,
            low,
            high,
        } => {
            let v = value(operand, msg);
            let inside = and3(
                compare(CmpOp::Ge, v, value(low, msg)),
                compare(CmpOp::Le, v, value(high, msg)),
            );
            inside.map(|b| b != *negated)
        }
        Expr::In {
            negated,
            operand,
            list,
        } => member(value(operand, msg), list).map(|b| b != *negated),
        Expr::Like {
            negated,
            operand,
            pattern,
        } => match value(operand, msg) {
            Value::Str(s) => Some(pattern.matches(s) != *negated),
            Value::Null => None,
            // LIKE compares strings: any other value is a type mismatch, FALSE (JMS).
            _ => Some(*negated),
        },
        Expr::IsNull { negated, operand } => Some(value(operand, msg).is_null() != *negated),
        other => match value(other, msg) {
            Value::Bool(b) => Some(b),
            _ => None,
        },
    }
}

/// The value of an expression; conditions give `Bool` or `Null` (UNKNOWN).
pub(crate) fn value<'a, S: SelectorSource + ?Sized>(expr: &'a Expr, msg: &'a S) -> Value<'a> {
    match expr {
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Int(i) => Value::Int(*i),
        Expr::Float(f) => Value::Float(*f),
        Expr::Str(s) => Value::Str(s),
        Expr::Header(header) => msg.header(*header),
        Expr::Property(name) => msg.property(name),
        Expr::Plus(operand) => match value(operand, msg) {
            v @ (Value::Int(_) | Value::Float(_)) => v,
            _ => Value::Null,
        },
        Expr::Neg(operand) => match value(operand, msg) {
            Value::Int(i) => i.checked_neg().map_or(Value::Null, Value::Int),
            Value::Float(f) => Value::Float(-f),
            _ => Value::Null,
        },
        Expr::Arith(op, left, right) => arith(*op, value(left, msg), value(right, msg)),
        condition => truth(condition, msg).map_or(Value::Null, Value::Bool),
    }
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Both operands as floats, if both are numbers and at least one is a float.
fn promoted(left: Value<'_>, right: Value<'_>) -> Option<(f64, f64)> {
    // Java's binary numeric promotion: a long meeting a double becomes a double.
    #[allow(clippy::cast_precision_loss)]
    match (left, right) {
        (Value::Float(a), Value::Float(b)) => Some((a, b)),
        (Value::Int(a), Value::Float(b)) => Some((a as f64, b)),
        (Value::Float(a), Value::Int(b)) => Some((a, b as f64)),
        _ => None,
    }
}

/// A comparison: numbers with numbers (promoted), strings and booleans with their own kind by
/// `=` and `<>` only. A NULL on either side is UNKNOWN; any other comparison that cannot be made
/// (values of different types, or `<` between strings) is FALSE, as JMS specifies, whatever the
/// operator (`'a' <> 1` is FALSE too).
fn compare(op: CmpOp, left: Value<'_>, right: Value<'_>) -> Option<bool> {
    let ordering = match (left, right) {
        (Value::Null, _) | (_, Value::Null) => return None,
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(&b)),
        (Value::Str(a), Value::Str(b)) => return equality(op, a == b),
        (Value::Bool(a), Value::Bool(b)) => return equality(op, a == b),
        (l, r) => {
            let Some((a, b)) = promoted(l, r) else {
                return Some(false);
            };
            // NaN is unordered: every comparison with it is false except `<>`.
            a.partial_cmp(&b)
        }
    };
    Some(match (op, ordering) {
        (CmpOp::Eq, o) => o == Some(Ordering::Equal),
        (CmpOp::Ne, o) => o != Some(Ordering::Equal),
        (CmpOp::Lt, o) => o == Some(Ordering::Less),
        (CmpOp::Le, o) => matches!(o, Some(Ordering::Less | Ordering::Equal)),
        (CmpOp::Gt, o) => o == Some(Ordering::Greater),
        (CmpOp::Ge, o) => matches!(o, Some(Ordering::Greater | Ordering::Equal)),
    })
}

fn equality(op: CmpOp, equal: bool) -> Option<bool> {
    Some(match op {
        CmpOp::Eq => equal,
        CmpOp::Ne => !equal,
        // Strings and booleans are not ordered: the comparison cannot be made.
        _ => false,
    })
}

/// Arithmetic: integers stay integers unless they overflow or divide by zero (then UNKNOWN);
/// a float on either side makes the operation a float one (IEEE 754: `1.0 / 0` is infinity).
fn arith<'a>(op: ArithOp, left: Value<'_>, right: Value<'_>) -> Value<'a> {
    if let (Value::Int(a), Value::Int(b)) = (left, right) {
        let result = match op {
            ArithOp::Add => a.checked_add(b),
            ArithOp::Sub => a.checked_sub(b),
            ArithOp::Mul => a.checked_mul(b),
            ArithOp::Div => a.checked_div(b),
        };
        return result.map_or(Value::Null, Value::Int);
    }
    let Some((a, b)) = promoted(left, right) else {
        return Value::Null;
    };
    Value::Float(match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div => a / b,
    })
}

/// `IN` as the `OR` of `=` against each literal: UNKNOWN if the value is NULL, otherwise whether
/// some literal equals it (a literal of another type is a FALSE comparison).
fn member(value: Value<'_>, list: &InList) -> Option<bool> {
    match value {
        Value::Str(s) => Some(
            list.strings
                .binary_search_by(|item| (**item).cmp(s))
                .is_ok(),
        ),
        Value::Int(_) | Value::Float(_) => Some(list.numbers.iter().any(|n| {
            let literal = match *n {
                Number::Int(i) => Value::Int(i),
                Number::Float(f) => Value::Float(f),
            };
            compare(CmpOp::Eq, value, literal) == Some(true)
        })),
        Value::Bool(_) => Some(false),
        Value::Null => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons() {
        use Value::*;
        assert_eq!(compare(CmpOp::Eq, Int(1), Float(1.0)), Some(true));
        assert_eq!(compare(CmpOp::Lt, Int(2), Float(2.5)), Some(true));
        assert_eq!(compare(CmpOp::Ge, Int(3), Int(3)), Some(true));
        assert_eq!(compare(CmpOp::Eq, Str("a"), Str("a")), Some(true));
        assert_eq!(compare(CmpOp::Ne, Bool(true), Bool(false)), Some(true));
        assert_eq!(compare(CmpOp::Lt, Str("a"), Str("b")), Some(false));
        assert_eq!(compare(CmpOp::Gt, Bool(true), Bool(false)), Some(false));
        assert_eq!(compare(CmpOp::Eq, Str("1"), Int(1)), Some(false));
        assert_eq!(compare(CmpOp::Ne, Str("1"), Int(1)), Some(false));
        assert_eq!(compare(CmpOp::Eq, Bool(true), Float(1.0)), Some(false));
        assert_eq!(compare(CmpOp::Eq, Null, Null), None);
        assert_eq!(compare(CmpOp::Eq, Null, Int(1)), None);
        assert_eq!(compare(CmpOp::Ne, Str("a"), Null), None);
        assert_eq!(
            compare(CmpOp::Ne, Float(f64::NAN), Float(f64::NAN)),
            Some(true)
        );
        assert_eq!(compare(CmpOp::Le, Float(f64::NAN), Int(1)), Some(false));
    }

    #[test]
    fn arithmetic() {
        use Value::*;
        assert_eq!(arith(ArithOp::Div, Int(-7), Int(2)), Int(-3));
        assert_eq!(arith(ArithOp::Div, Int(1), Int(0)), Null);
        assert_eq!(arith(ArithOp::Div, Int(i64::MIN), Int(-1)), Null);
        assert_eq!(arith(ArithOp::Add, Int(i64::MAX), Int(1)), Null);
        assert_eq!(arith(ArithOp::Mul, Int(3), Float(0.5)), Float(1.5));
        assert_eq!(
            arith(ArithOp::Div, Float(1.0), Int(0)),
            Float(f64::INFINITY)
        );
        assert_eq!(arith(ArithOp::Sub, Str("a"), Int(1)), Null);
        assert_eq!(arith(ArithOp::Add, Null, Int(1)), Null);
    }

    #[test]
    fn membership() {
        use Value::*;
        let list = InList {
            strings: vec!["a".into(), "c".into()],
            numbers: vec![],
        };
        assert_eq!(member(Str("c"), &list), Some(true));
        assert_eq!(member(Str("b"), &list), Some(false));
        assert_eq!(member(Int(1), &list), Some(false));
        assert_eq!(member(Null, &list), None);
        let mixed = InList {
            strings: vec!["a".into()],
            numbers: vec![Number::Int(1), Number::Float(2.5)],
        };
        assert_eq!(member(Float(1.0), &mixed), Some(true));
        assert_eq!(member(Int(2), &mixed), Some(false));
        assert_eq!(member(Str("b"), &mixed), Some(false));
        assert_eq!(member(Str("a"), &mixed), Some(true));
        assert_eq!(member(Bool(true), &mixed), Some(false));
    }

    #[test]
    fn three_valued_connectives() {
        assert_eq!(and3(Some(true), None), None);
        assert_eq!(and3(None, Some(false)), Some(false));
        assert_eq!(and3(Some(true), Some(true)), Some(true));
    }
}
