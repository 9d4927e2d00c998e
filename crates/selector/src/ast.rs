//! The parsed form of a selector: an expression tree built once and only read afterwards.

use crate::like::LikePattern;
use crate::value::Header;

/// `+ - * /`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// `= <> < <= > >=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A numeric literal in an `IN` list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Int(i64),
    Float(f64),
}

/// The literals of an `IN` list, split by type so that membership needs no conversion.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct InList {
    /// Sorted and without duplicates, for binary search.
    pub(crate) strings: Vec<Box<str>>,
    pub(crate) numbers: Vec<Number>,
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
    Header(Header),
    Property(Box<str>),
    /// Unary `+`: the operand if it is a number, otherwise UNKNOWN.
    Plus(Box<Expr>),
    /// Unary `-`.
    Neg(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// Two or more operands; a chain of `AND`s is one node, so long chains stay shallow.
    And(Vec<Expr>),
    /// Two or more operands.
    Or(Vec<Expr>),
    Between {
        negated: bool,
        operand: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
    },
    In {
        negated: bool,
        operand: Box<Expr>,
        list: InList,
    },
    Like {
        negated: bool,
        operand: Box<Expr>,
        pattern: LikePattern,
    },
    IsNull {
        negated: bool,
        operand: Box<Expr>,
    },
}
