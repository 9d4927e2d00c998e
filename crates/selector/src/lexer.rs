//! The lexer: selector text to tokens, each with the byte position where it starts.
//!
//! Keywords are case-insensitive, identifiers case-sensitive. Numbers follow Java's literal
//! syntax as JMS asks: decimal, hexadecimal (`0x1F`) and octal (`017`) integers with an optional
//! `L` suffix; floats with a point and/or an exponent and an optional `F`/`D` suffix.

use crate::error::SelectorError;

/// A reserved word. Matched without regard to case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    And,
    Or,
    Not,
    Between,
    In,
    Like,
    Escape,
    Is,
    Null,
    True,
    False,
}

impl Keyword {
    const ALL: [(&'static str, Keyword); 11] = [
        ("AND", Keyword::And),
        ("OR", Keyword::Or),
        ("NOT", Keyword::Not),
        ("BETWEEN", Keyword::Between),
        ("IN", Keyword::In),
        ("LIKE", Keyword::Like),
        ("ESCAPE", Keyword::Escape),
        ("IS", Keyword::Is),
        ("NULL", Keyword::Null),
        ("TRUE", Keyword::True),
        ("FALSE", Keyword::False),
    ];

    fn lookup(word: &str) -> Option<Keyword> {
        Keyword::ALL
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(word))
            .map(|&(_, kw)| kw)
    }

    pub(crate) fn name(self) -> &'static str {
        Keyword::ALL
            .iter()
            .find(|&&(_, kw)| kw == self)
            .map_or("?", |&(name, _)| name)
    }
}

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok<'s> {
    Ident(&'s str),
    Keyword(Keyword),
    /// A string literal with its `''` escapes resolved.
    Str(String),
    /// An exact numeric literal that fits an `i64`.
    Int(i64),
    /// The decimal literal 9223372036854775808, only valid right after a unary minus.
    IntMinMagnitude,
    Float(f64),
    LParen,
    RParen,
    Comma,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    End,
}

impl Tok<'_> {
    /// How an error message names this token.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(name) => format!("identifier '{name}'"),
            Tok::Keyword(kw) => kw.name().to_string(),
            Tok::Str(_) => "a string".to_string(),
            Tok::Int(_) | Tok::IntMinMagnitude | Tok::Float(_) => "a number".to_string(),
            Tok::LParen => "'('".to_string(),
            Tok::RParen => "')'".to_string(),
            Tok::Comma => "','".to_string(),
            Tok::Eq => "'='".to_string(),
            Tok::Ne => "'<>'".to_string(),
            Tok::Lt => "'<'".to_string(),
            Tok::Le => "'<='".to_string(),
            Tok::Gt => "'>'".to_string(),
            Tok::Ge => "'>='".to_string(),
            Tok::Plus => "'+'".to_string(),
            Tok::Minus => "'-'".to_string(),
            Tok::Star => "'*'".to_string(),
            Tok::Slash => "'/'".to_string(),
            Tok::End => "end of input".to_string(),
        }
    }
}

/// A token and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'s> {
    pub(crate) tok: Tok<'s>,
    pub(crate) pos: usize,
}

/// Splits `text` into tokens, ending with [`Tok::End`] at `text.len()`.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token<'_>>, SelectorError> {
    let mut lexer = Lexer { text, pos: 0 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let end = token.tok == Tok::End;
        tokens.push(token);
        if end {
            return Ok(tokens);
        }
    }
}

struct Lexer<'s> {
    text: &'s str,
    pos: usize,
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$'
}

fn is_ident_part(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

impl<'s> Lexer<'s> {
    fn rest(&self) -> &'s str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn next_token(&mut self) -> Result<Token<'s>, SelectorError> {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
        let start = self.pos;
        let Some(c) = self.bump() else {
            return Ok(Token {
                tok: Tok::End,
                pos: start,
            });
        };
        let tok = match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' => Tok::Star,
            '/' => Tok::Slash,
            '=' => Tok::Eq,
            '<' => match self.peek() {
                Some('>') => {
                    self.bump();
                    Tok::Ne
                }
                Some('=') => {
                    self.bump();
                    Tok::Le
                }
                _ => Tok::Lt,
            },
            '>' => {
                if self.peek() == Some('=') {
                    self.bump();
                    Tok::Ge
                } else {
                    Tok::Gt
                }
            }
            '!' if self.peek() == Some('=') => {
                return Err(SelectorError::new(
                    start,
                    "'!=' is not an operator, use '<>'",
                ));
            }
            '\'' => self.string(start)?,
            '0'..='9' => self.number(start)?,
            '.' if self.peek().is_some_and(|d| d.is_ascii_digit()) => self.number(start)?,
            c if is_ident_start(c) => {
                while self.peek().is_some_and(is_ident_part) {
                    self.bump();
                }
                let word = self.text.get(start..self.pos).unwrap_or("");
                match Keyword::lookup(word) {
                    Some(kw) => Tok::Keyword(kw),
                    None => Tok::Ident(word),
                }
            }
            other => {
                return Err(SelectorError::new(
                    start,
                    format!("unexpected character {other:?}"),
                ))
            }
        };
        Ok(Token { tok, pos: start })
    }

    /// The rest of a string literal whose opening quote is at `start`.
    fn string(&mut self, start: usize) -> Result<Tok<'s>, SelectorError> {
        let mut value = String::new();
        loop {
            match self.bump() {
                None => return Err(SelectorError::new(start, "unterminated string literal")),
                Some('\'') => {
                    if self.peek() == Some('\'') {
                        self.bump();
                        value.push('\'');
                    } else {
                        return Ok(Tok::Str(value));
                    }
                }
                Some(c) => value.push(c),
            }
        }
    }

    fn digits(&mut self, radix: u32) {
        while self.peek().is_some_and(|c| c.is_digit(radix)) {
            self.bump();
        }
    }

    /// A numeric literal whose first character (a digit or a point) is at `start`.
    fn number(&mut self, start: usize) -> Result<Tok<'s>, SelectorError> {
        self.pos = start;
        let first = self.peek();
        if first == Some('0') && matches!(self.peek_at(1), Some('x' | 'X')) {
            self.bump();
            self.bump();
            let digits_start = self.pos;
            self.digits(16);
            let digits = self.text.get(digits_start..self.pos).unwrap_or("");
            if digits.is_empty() {
                return Err(SelectorError::new(start, "invalid hexadecimal literal"));
            }
            self.long_suffix();
            self.check_number_end(start)?;
            // Java reads hexadecimal literals as the bits of a long: 0xFFFFFFFFFFFFFFFF is -1.
            return u64::from_str_radix(digits, 16)
                .map(|bits| Tok::Int(bits as i64))
                .map_err(|_| SelectorError::new(start, "integer literal out of range"));
        }
        self.digits(10);
        let mut is_float = false;
        if self.peek() == Some('.') {
            is_float = true;
            self.bump();
            self.digits(10);
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let save = self.pos;
            self.bump();
            if matches!(self.peek(), Some('+' | '-')) {
                self.bump();
            }
            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                is_float = true;
                self.digits(10);
            } else {
                // Not an exponent; `check_number_end` reports the stray letter.
                self.pos = save;
            }
        }
        let body_end = self.pos;
        if matches!(self.peek(), Some('f' | 'F' | 'd' | 'D')) {
            is_float = true;
            self.bump();
        } else if !is_float {
            self.long_suffix();
        }
        self.check_number_end(start)?;
        let body = self.text.get(start..body_end).unwrap_or("");
        if is_float {
            return body
                .parse::<f64>()
                .map(Tok::Float)
                .map_err(|_| SelectorError::new(start, "invalid numeric literal"));
        }
        if body.len() > 1 && body.starts_with('0') {
            // Java's octal syntax: 017 is 15.
            return u64::from_str_radix(body.get(1..).unwrap_or(""), 8)
                .map(|bits| Tok::Int(bits as i64))
                .map_err(|_| SelectorError::new(start, "invalid octal literal"));
        }
        match body.parse::<u64>() {
            Ok(n) if n <= i64::MAX as u64 => Ok(Tok::Int(n as i64)),
            Ok(n) if n == i64::MIN.unsigned_abs() => Ok(Tok::IntMinMagnitude),
            _ => Err(SelectorError::new(start, "integer literal out of range")),
        }
    }

    fn long_suffix(&mut self) {
        if matches!(self.peek(), Some('l' | 'L')) {
            self.bump();
        }
    }

    /// A number must not run straight into a letter or digit (`12abc`, `1.2.3`).
    fn check_number_end(&self, start: usize) -> Result<(), SelectorError> {
        match self.peek() {
            Some(c) if is_ident_part(c) || c == '.' => {
                Err(SelectorError::new(start, "invalid numeric literal"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok<'_>> {
        tokenize(text).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn keywords_ignore_case_identifiers_do_not() {
        assert_eq!(
            toks("and Or NOT x X"),
            vec![
                Tok::Keyword(Keyword::And),
                Tok::Keyword(Keyword::Or),
                Tok::Keyword(Keyword::Not),
                Tok::Ident("x"),
                Tok::Ident("X"),
                Tok::End
            ]
        );
    }

    #[test]
    fn operators() {
        assert_eq!(
            toks("=<><<=>>=+-*/(),"),
            vec![
                Tok::Eq,
                Tok::Ne,
                Tok::Lt,
                Tok::Le,
                Tok::Gt,
                Tok::Ge,
                Tok::Plus,
                Tok::Minus,
                Tok::Star,
                Tok::Slash,
                Tok::LParen,
                Tok::RParen,
                Tok::Comma,
                Tok::End
            ]
        );
    }

    #[test]
    fn strings_with_doubled_quotes() {
        assert_eq!(toks("'it''s'"), vec![Tok::Str("it's".into()), Tok::End]);
        assert_eq!(toks("''"), vec![Tok::Str(String::new()), Tok::End]);
        let err = tokenize("x = 'abc").unwrap_err();
        assert_eq!(err.position, 4);
    }

    #[test]
    fn numbers() {
        assert_eq!(toks("57")[0], Tok::Int(57));
        assert_eq!(toks("57L")[0], Tok::Int(57));
        assert_eq!(toks("0x1F")[0], Tok::Int(31));
        assert_eq!(toks("017")[0], Tok::Int(15));
        assert_eq!(toks("0")[0], Tok::Int(0));
        assert_eq!(toks("0xFFFFFFFFFFFFFFFF")[0], Tok::Int(-1));
        assert_eq!(toks("7.")[0], Tok::Float(7.0));
        assert_eq!(toks(".5")[0], Tok::Float(0.5));
        assert_eq!(toks("6.02E23")[0], Tok::Float(6.02e23));
        assert_eq!(toks("1e-3")[0], Tok::Float(0.001));
        assert_eq!(toks("2f")[0], Tok::Float(2.0));
        assert_eq!(toks("2.5D")[0], Tok::Float(2.5));
        assert_eq!(toks("9223372036854775808")[0], Tok::IntMinMagnitude);
        assert!(tokenize("9223372036854775809").is_err());
        assert!(tokenize("12abc").is_err());
        assert!(tokenize("1.2.3").is_err());
        assert!(tokenize("09").is_err());
        assert!(tokenize("0x").is_err());
        assert!(tokenize("1e").is_err());
    }

    #[test]
    fn positions_are_bytes() {
        let tokens = tokenize("é = 'x'").unwrap();
        assert_eq!(tokens[0].tok, Tok::Ident("é"));
        assert_eq!(tokens[1].pos, 3);
        assert_eq!(tokens[2].pos, 5);
        assert_eq!(tokens[3].pos, 8);
    }

    #[test]
    fn bad_characters() {
        assert_eq!(tokenize("a # b").unwrap_err().position, 2);
        assert_eq!(tokenize("a != b").unwrap_err().position, 2);
    }
}
