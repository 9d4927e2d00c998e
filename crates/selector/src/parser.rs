//! The parser: tokens to an [`Expr`], by recursive descent with one function per precedence
//! level (JMS order, loosest first):
//!
//! ```text
//! selector   := or?                                   (empty selects everything)
//! or         := and (OR and)*
//! and        := not (AND not)*
//! not        := NOT not | comparison
//! comparison := sum [ ( = | <> | < | <= | > | >= ) sum
//!                   | [NOT] BETWEEN sum AND sum
//!                   | [NOT] IN ( literal (, literal)* )
//!                   | [NOT] LIKE string [ESCAPE string]
//!                   | IS [NOT] NULL ]
//! sum        := product ((+ | -) product)*
//! product    := unary ((* | /) unary)*
//! unary      := (+ | -) unary | primary
//! primary    := literal | identifier | ( or )
//! ```
//!
//! Besides the grammar, the parser checks types where it can know them (literals, header
//! fields, the results of operators): `'a' + 1`, `NOT 5` or `sender < 'm'` are errors, while an
//! expression involving a property is checked when evaluated (a comparison of the wrong types is
//! FALSE then, arithmetic on a non-number UNKNOWN).
//! Nesting is bounded by [`MAX_DEPTH`] both for recursion here and for the tree's depth.

use crate::ast::{ArithOp, CmpOp, Expr, InList, Number};
use crate::error::{SelectorError, MAX_DEPTH, MAX_SELECTOR_LEN};
use crate::lexer::{tokenize, Keyword, Tok, Token};
use crate::like::LikePattern;
use crate::value::Header;

/// What the parser knows of an expression's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Num,
    Str,
    /// Depends on the message (a property).
    Any,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Bool => "a boolean",
            Kind::Num => "a number",
            Kind::Str => "a string",
            Kind::Any => "a value",
        }
    }
}

/// An expression with what the parser knows about it.
struct Node {
    expr: Expr,
    kind: Kind,
    /// Byte offset where it starts.
    pos: usize,
    /// Height of the tree below and including it.
    depth: usize,
}

/// Parses selector text; `None` for an empty (or all-whitespace) selector.
pub(crate) fn parse(text: &str) -> Result<Option<Expr>, SelectorError> {
    if text.len() > MAX_SELECTOR_LEN {
        return Err(SelectorError::new(
            MAX_SELECTOR_LEN,
            format!("selector longer than {MAX_SELECTOR_LEN} bytes"),
        ));
    }
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        index: 0,
        nesting: 0,
    };
    if parser.peek() == &Tok::End {
        return Ok(None);
    }
    let node = parser.or()?;
    if parser.peek() != &Tok::End {
        let found = parser.peek().describe();
        return Err(parser.error(format!("unexpected {found}")));
    }
    let expr = require(node, Kind::Bool, "a selector must be a condition")?;
    Ok(Some(expr))
}

/// The node's expression if its kind is `want` or unknown; otherwise an error at its start.
fn require(node: Node, want: Kind, context: &str) -> Result<Expr, SelectorError> {
    if node.kind == want || node.kind == Kind::Any {
        Ok(node.expr)
    } else {
        Err(SelectorError::new(
            node.pos,
            format!(
                "{context}: expected {}, found {}",
                want.describe(),
                node.kind.describe()
            ),
        ))
    }
}

fn boxed(node: Node, want: Kind, context: &str) -> Result<Box<Expr>, SelectorError> {
    require(node, want, context).map(Box::new)
}

struct Parser<'s> {
    tokens: Vec<Token<'s>>,
    index: usize,
    /// Current recursion through parentheses, `NOT`s and unary signs.
    nesting: usize,
}

impl<'s> Parser<'s> {
    fn peek(&self) -> &Tok<'s> {
        self.tokens.get(self.index).map_or(&Tok::End, |t| &t.tok)
    }

    fn pos(&self) -> usize {
        self.tokens
            .get(self.index)
            .or_else(|| self.tokens.last())
            .map_or(0, |t| t.pos)
    }

    fn advance(&mut self) -> Tok<'s> {
        let tok = self.peek().clone();
        if tok != Tok::End {
            self.index += 1;
        }
        tok
    }

    fn error(&self, message: impl Into<String>) -> SelectorError {
        SelectorError::new(self.pos(), message)
    }

    fn is_keyword(&self, kw: Keyword) -> bool {
        self.peek() == &Tok::Keyword(kw)
    }

    fn expect(&mut self, tok: &Tok<'_>, what: &str) -> Result<(), SelectorError> {
        if self.peek() == tok {
            self.advance();
            Ok(())
        } else {
            let found = self.peek().describe();
            Err(self.error(format!("expected {what}, found {found}")))
        }
    }

    /// Enters one level of recursion, refusing to go past [`MAX_DEPTH`].
    fn enter(&mut self) -> Result<(), SelectorError> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(self.error(format!("selector nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    /// A node over `children`, refusing trees deeper than [`MAX_DEPTH`].
    fn node(
        &self,
        expr: Expr,
        kind: Kind,
        pos: usize,
        children: &[usize],
    ) -> Result<Node, SelectorError> {
        let depth = 1 + children.iter().copied().max().unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(SelectorError::new(
                pos,
                format!("selector nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(Node {
            expr,
            kind,
            pos,
            depth,
        })
    }

    fn or(&mut self) -> Result<Node, SelectorError> {
        self.chain(Keyword::Or, Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Node, SelectorError> {
        self.chain(Keyword::And, Self::not, Expr::And)
    }

    /// `operand (kw operand)*` as one n-ary node.
    fn chain(
        &mut self,
        kw: Keyword,
        operand: fn(&mut Self) -> Result<Node, SelectorError>,
        build: fn(Vec<Expr>) -> Expr,
    ) -> Result<Node, SelectorError> {
        let first = operand(self)?;
        if !self.is_keyword(kw) {
            return Ok(first);
        }
        let pos = first.pos;
        let context = format!("operand of {}", kw.name());
        let mut depth = first.depth;
        let mut operands = vec![require(first, Kind::Bool, &context)?];
        while self.is_keyword(kw) {
            self.advance();
            let next = operand(self)?;
            depth = depth.max(next.depth);
            operands.push(require(next, Kind::Bool, &context)?);
        }
        self.node(build(operands), Kind::Bool, pos, &[depth])
    }

    fn not(&mut self) -> Result<Node, SelectorError> {
        if !self.is_keyword(Keyword::Not) {
            return self.comparison();
        }
        let pos = self.pos();
        self.advance();
        self.enter()?;
        let operand = self.not()?;
        self.leave();
        let depth = operand.depth;
        let expr = Expr::Not(boxed(operand, Kind::Bool, "operand of NOT")?);
        self.node(expr, Kind::Bool, pos, &[depth])
    }

    fn comparison(&mut self) -> Result<Node, SelectorError> {
        let left = self.sum()?;
        let pos = left.pos;
        let op = match self.peek() {
            Tok::Eq => CmpOp::Eq,
            Tok::Ne => CmpOp::Ne,
            Tok::Lt => CmpOp::Lt,
            Tok::Le => CmpOp::Le,
            Tok::Gt => CmpOp::Gt,
            Tok::Ge => CmpOp::Ge,
            Tok::Keyword(Keyword::Is) => return self.is_null(left),
            Tok::Keyword(Keyword::Not) => {
                self.advance();
                return self.negatable(left, true);
            }
            Tok::Keyword(Keyword::Between | Keyword::In | Keyword::Like) => {
                return self.negatable(left, false)
            }
            _ => return Ok(left),
        };
        let op_token = self.advance();
        let right = self.sum()?;
        let depth = left.depth.max(right.depth);
        let (left, right) = if matches!(op, CmpOp::Eq | CmpOp::Ne) {
            (Box::new(left.expr), Box::new(right.expr))
        } else {
            let context = format!("{} compares numbers only", op_token.describe());
            (
                boxed(left, Kind::Num, &context)?,
                boxed(right, Kind::Num, &context)?,
            )
        };
        self.node(Expr::Cmp(op, left, right), Kind::Bool, pos, &[depth])
    }

    /// `IS [NOT] NULL`, with `IS` next.
    fn is_null(&mut self, operand: Node) -> Result<Node, SelectorError> {
        self.advance();
        let negated = self.is_keyword(Keyword::Not);
        if negated {
            self.advance();
        }
        self.expect(&Tok::Keyword(Keyword::Null), "NULL")?;
        let (pos, depth) = (operand.pos, operand.depth);
        let expr = Expr::IsNull {
            negated,
            operand: Box::new(operand.expr),
        };
        self.node(expr, Kind::Bool, pos, &[depth])
    }

    /// `BETWEEN`, `IN` or `LIKE` (after `NOT` if `negated`).
    fn negatable(&mut self, operand: Node, negated: bool) -> Result<Node, SelectorError> {
        let (pos, depth) = (operand.pos, operand.depth);
        let expr = match self.advance() {
            Tok::Keyword(Keyword::Between) => {
                let low = self.sum()?;
                self.expect(&Tok::Keyword(Keyword::And), "AND")?;
                let high = self.sum()?;
                let depth = depth.max(low.depth).max(high.depth);
                let context = "BETWEEN compares numbers only";
                let expr = Expr::Between {
                    negated,
                    operand: boxed(operand, Kind::Num, context)?,
                    low: boxed(low, Kind::Num, context)?,
                    high: boxed(high, Kind::Num, context)?,
                };
                return self.node(expr, Kind::Bool, pos, &[depth]);
            }
            Tok::Keyword(Keyword::In) => Expr::In {
                negated,
                operand: Box::new(operand.expr),
                list: self.in_list()?,
            },
            Tok::Keyword(Keyword::Like) => Expr::Like {
                negated,
                operand: boxed(operand, Kind::Str, "LIKE matches strings only")?,
                pattern: self.like_pattern()?,
            },
            other => {
                // Step back so that the error points at the offending token.
                self.index = self.index.saturating_sub(usize::from(other != Tok::End));
                let found = other.describe();
                return Err(self.error(format!(
                    "expected BETWEEN, IN or LIKE after NOT, found {found}"
                )));
            }
        };
        self.node(expr, Kind::Bool, pos, &[depth])
    }

    /// `( literal, ... )` after `IN`.
    fn in_list(&mut self) -> Result<InList, SelectorError> {
        self.expect(&Tok::LParen, "'(' after IN")?;
        let mut list = InList::default();
        loop {
            let sign = match self.peek() {
                Tok::Minus => Some('-'),
                Tok::Plus => Some('+'),
                _ => None,
            };
            if sign.is_some() {
                self.advance();
            }
            let negative = sign == Some('-');
            let signed = |n: Number| match (negative, n) {
                (false, n) => Some(n),
                (true, Number::Int(i)) => i.checked_neg().map(Number::Int),
                (true, Number::Float(f)) => Some(Number::Float(-f)),
            };
            let item = match self.peek() {
                Tok::Str(_) if sign.is_none() => None,
                Tok::Int(i) => signed(Number::Int(*i)),
                Tok::Float(f) => signed(Number::Float(*f)),
                Tok::IntMinMagnitude if negative => Some(Number::Int(i64::MIN)),
                other => {
                    let found = other.describe();
                    return Err(self.error(format!(
                        "expected a string or number in the IN list, found {found}"
                    )));
                }
            };
            match (item, self.advance()) {
                (_, Tok::Str(s)) => list.strings.push(s.into_boxed_str()),
                (Some(n), _) => list.numbers.push(n),
                // `-i64::MIN`: cannot happen for a literal that lexed, but stay total.
                (None, _) => return Err(self.error("integer literal out of range")),
            }
            if self.peek() == &Tok::Comma {
                self.advance();
                continue;
            }
            self.expect(&Tok::RParen, "',' or ')' in the IN list")?;
            break;
        }
        list.strings.sort_unstable();
        list.strings.dedup();
        Ok(list)
    }

    /// `'pattern' [ESCAPE 'c']` after `LIKE`.
    fn like_pattern(&mut self) -> Result<LikePattern, SelectorError> {
        let pattern_pos = self.pos();
        let Tok::Str(pattern) = self.peek().clone() else {
            let found = self.peek().describe();
            return Err(self.error(format!(
                "expected a string pattern after LIKE, found {found}"
            )));
        };
        self.advance();
        let mut escape = None;
        if self.is_keyword(Keyword::Escape) {
            self.advance();
            let escape_pos = self.pos();
            let Tok::Str(text) = self.peek().clone() else {
                let found = self.peek().describe();
                return Err(self.error(format!("expected a string after ESCAPE, found {found}")));
            };
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => escape = Some(c),
                _ => {
                    return Err(SelectorError::new(
                        escape_pos,
                        "the ESCAPE string must be exactly one character",
                    ))
                }
            }
            self.advance();
        }
        LikePattern::compile(&pattern, escape).map_err(|msg| SelectorError::new(pattern_pos, msg))
    }

    fn sum(&mut self) -> Result<Node, SelectorError> {
        let mut left = self.product()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => ArithOp::Add,
                Tok::Minus => ArithOp::Sub,
                _ => return Ok(left),
            };
            self.advance();
            let right = self.product()?;
            left = self.arith(op, left, right)?;
        }
    }

    fn product(&mut self) -> Result<Node, SelectorError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Star => ArithOp::Mul,
                Tok::Slash => ArithOp::Div,
                _ => return Ok(left),
            };
            self.advance();
            let right = self.unary()?;
            left = self.arith(op, left, right)?;
        }
    }

    fn arith(&self, op: ArithOp, left: Node, right: Node) -> Result<Node, SelectorError> {
        let (pos, depth) = (left.pos, left.depth.max(right.depth));
        let context = "arithmetic needs numbers";
        let expr = Expr::Arith(
            op,
            boxed(left, Kind::Num, context)?,
            boxed(right, Kind::Num, context)?,
        );
        self.node(expr, Kind::Num, pos, &[depth])
    }

    fn unary(&mut self) -> Result<Node, SelectorError> {
        let negative = match self.peek() {
            Tok::Minus => true,
            Tok::Plus => false,
            _ => return self.primary(),
        };
        let pos = self.pos();
        self.advance();
        if negative && self.peek() == &Tok::IntMinMagnitude {
            self.advance();
            return self.node(Expr::Int(i64::MIN), Kind::Num, pos, &[]);
        }
        self.enter()?;
        let operand = self.unary()?;
        self.leave();
        let depth = operand.depth;
        let context = "a sign needs a number";
        let expr = match (negative, require(operand, Kind::Num, context)?) {
            // Fold signs on literals so that `-5` is a literal as the user meant it.
            (true, Expr::Int(i)) if i != i64::MIN => Expr::Int(-i),
            (true, Expr::Float(f)) => Expr::Float(-f),
            (true, e) => Expr::Neg(Box::new(e)),
            (false, e @ (Expr::Int(_) | Expr::Float(_))) => e,
            (false, e) => Expr::Plus(Box::new(e)),
        };
        self.node(expr, Kind::Num, pos, &[depth])
    }

    fn primary(&mut self) -> Result<Node, SelectorError> {
        let pos = self.pos();
        let (expr, kind) = match self.advance() {
            Tok::Int(i) => (Expr::Int(i), Kind::Num),
            Tok::Float(f) => (Expr::Float(f), Kind::Num),
            Tok::Str(s) => (Expr::Str(s.into_boxed_str()), Kind::Str),
            Tok::Keyword(Keyword::True) => (Expr::Bool(true), Kind::Bool),
            Tok::Keyword(Keyword::False) => (Expr::Bool(false), Kind::Bool),
            Tok::Ident(name) => match Header::from_identifier(name) {
                Some(header) => (Expr::Header(header), header_kind(header)),
                None => (Expr::Property(name.into()), Kind::Any),
            },
            Tok::LParen => {
                self.enter()?;
                let inner = self.or()?;
                self.leave();
                self.expect(&Tok::RParen, "')'")?;
                return Ok(Node { pos, ..inner });
            }
            Tok::IntMinMagnitude => {
                return Err(SelectorError::new(pos, "integer literal out of range"))
            }
            other => {
                self.index = self.index.saturating_sub(usize::from(other != Tok::End));
                return Err(SelectorError::new(
                    pos,
                    format!("expected an expression, found {}", other.describe()),
                ));
            }
        };
        self.node(expr, kind, pos, &[])
    }
}

fn header_kind(header: Header) -> Kind {
    match header {
        Header::Priority | Header::Context | Header::CreatedAt => Kind::Num,
        Header::Sender | Header::Receiver => Kind::Str,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(text: &str) -> Expr {
        parse(text).unwrap().unwrap()
    }

    #[test]
    fn empty_selects_all() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse(" \n\t").unwrap(), None);
    }

    #[test]
    fn signs_on_literals_fold() {
        let Expr::Cmp(CmpOp::Eq, left, right) = expr("-5 = +2.5") else {
            panic!("not a comparison")
        };
        assert_eq!(*left, Expr::Int(-5));
        assert_eq!(*right, Expr::Float(2.5));
        let Expr::Cmp(_, left, _) = expr("-9223372036854775808 = x") else {
            panic!("not a comparison")
        };
        assert_eq!(*left, Expr::Int(i64::MIN));
        let Expr::Cmp(_, left, _) = expr("-x = 1") else {
            panic!("not a comparison")
        };
        assert_eq!(*left, Expr::Neg(Box::new(Expr::Property("x".into()))));
    }

    #[test]
    fn chains_are_flat() {
        let Expr::Or(operands) = expr("a OR b OR c AND d") else {
            panic!("not an OR")
        };
        assert_eq!(operands.len(), 3);
        assert!(matches!(&operands[2], Expr::And(v) if v.len() == 2));
    }

    #[test]
    fn headers_resolve_at_parse_time() {
        assert_eq!(
            expr("JMSPriority IS NULL"),
            Expr::IsNull {
                negated: false,
                operand: Box::new(Expr::Header(Header::Priority)),
            }
        );
        assert_eq!(
            expr("Priority IS NOT NULL"),
            Expr::IsNull {
                negated: true,
                operand: Box::new(Expr::Property("Priority".into())),
            }
        );
    }

    #[test]
    fn in_lists_sort_strings_and_keep_numbers() {
        let Expr::In { list, negated, .. } = expr("x NOT IN ('b', 'a', 'b', -1, 2.5)") else {
            panic!("not IN")
        };
        assert!(negated);
        assert_eq!(list.strings, vec!["a".into(), "b".into()]);
        assert_eq!(list.numbers, vec![Number::Int(-1), Number::Float(2.5)]);
    }

    #[test]
    fn like_compiles_its_pattern() {
        let Expr::Like { pattern, .. } = expr("x LIKE 'ab%'") else {
            panic!("not LIKE")
        };
        assert_eq!(pattern, LikePattern::Prefix("ab".into()));
    }

    #[test]
    fn parentheses_keep_the_opening_position_for_errors() {
        let err = parse("a AND ('x')").unwrap_err();
        assert_eq!(err.position, 6);
    }
}
