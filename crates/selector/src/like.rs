//! `LIKE` patterns, compiled once when the selector is parsed and matched without allocating.
//!
//! `_` matches exactly one character (a Unicode scalar value, not a byte), `%` any run of
//! characters including none; an escape character makes the `_`, `%` or escape character after it
//! literal. The common shapes (`'abc'`, `'abc%'`, `'%abc'`, `'%abc%'`, `'%'`) become plain string
//! tests; anything else runs a backtracking matcher that needs no memory beyond two positions.

/// One element of a general pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    /// This exact character.
    Char(char),
    /// `_`: any one character.
    One,
    /// `%`: any run of characters.
    Many,
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LikePattern {
    /// No wildcard: the whole string must be equal.
    Exact(Box<str>),
    /// `abc%`.
    Prefix(Box<str>),
    /// `%abc`.
    Suffix(Box<str>),
    /// `%abc%`.
    Contains(Box<str>),
    /// `%` alone (or several): every string.
    Anything,
    /// Anything else.
    General(Box<[Elem]>),
}

impl LikePattern {
    /// Compiles `pattern`, with `escape` as the escape character if given.
    ///
    /// An escape character must be followed by `_`, `%` or itself; otherwise the error message
    /// is returned (the caller knows where the pattern is in the selector).
    pub(crate) fn compile(pattern: &str, escape: Option<char>) -> Result<LikePattern, String> {
        let mut elems: Vec<Elem> = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            let elem = if Some(c) == escape {
                match chars.next() {
                    Some(next) if next == '_' || next == '%' || Some(next) == escape => {
                        Elem::Char(next)
                    }
                    Some(next) => {
                        return Err(format!(
                            "escape character {c:?} must be followed by '_', '%' or itself, not {next:?}"
                        ))
                    }
                    None => {
                        return Err(format!("pattern ends with the escape character {c:?}"));
                    }
                }
            } else {
                match c {
                    '_' => Elem::One,
                    '%' => Elem::Many,
                    c => Elem::Char(c),
                }
            };
            // `%%` means the same as `%` and only slows the matcher down.
            if !(elem == Elem::Many && elems.last() == Some(&Elem::Many)) {
                elems.push(elem);
            }
        }
        Ok(Self::classify(elems))
    }

    fn classify(elems: Vec<Elem>) -> LikePattern {
        if elems.contains(&Elem::One) {
            return LikePattern::General(elems.into_boxed_slice());
        }
        let literal = |run: &[Elem]| -> Box<str> {
            run.iter()
                .filter_map(|e| match e {
                    Elem::Char(c) => Some(*c),
                    _ => None,
                })
                .collect::<String>()
                .into_boxed_str()
        };
        let wildcards = elems.iter().filter(|e| **e == Elem::Many).count();
        let starts = elems.first() == Some(&Elem::Many);
        let ends = elems.last() == Some(&Elem::Many);
        match (wildcards, starts, ends) {
            (0, _, _) => LikePattern::Exact(literal(&elems)),
            (1, true, true) => LikePattern::Anything,
            (1, false, true) => LikePattern::Prefix(literal(&elems)),
            (1, true, false) => LikePattern::Suffix(literal(&elems)),
            (2, true, true) => LikePattern::Contains(literal(&elems)),
            _ => LikePattern::General(elems.into_boxed_slice()),
        }
    }

    /// Whether `text` matches the pattern.
    pub(crate) fn matches(&self, text: &str) -> bool {
        match self {
            LikePattern::Exact(s) => text == &**s,
            LikePattern::Prefix(s) => text.starts_with(&**s),
            LikePattern::Suffix(s) => text.ends_with(&**s),
            LikePattern::Contains(s) => text.contains(&**s),
            LikePattern::Anything => true,
            LikePattern::General(elems) => general_match(elems, text),
        }
    }
}

/// Wildcard matching with one backtrack point: on a mismatch, the last `%` seen swallows one
/// more character and matching resumes after it. Worst case O(pattern × text), no allocation.
fn general_match(elems: &[Elem], text: &str) -> bool {
    let mut p = 0; // index into elems
    let mut t = 0; // byte index into text
                   // After the last `%`: the element index following it, and where in the text it stopped.
    let mut backtrack: Option<(usize, usize)> = None;
    loop {
        let next_char = text.get(t..).and_then(|rest| rest.chars().next());
        let step = match (elems.get(p), next_char) {
            (Some(Elem::Many), _) => {
                backtrack = Some((p + 1, t));
                p += 1;
                continue;
            }
            (Some(Elem::One), Some(c)) => Some(c),
            (Some(Elem::Char(want)), Some(c)) if *want == c => Some(c),
            (None, None) => return true,
            _ => None,
        };
        if let Some(c) = step {
            p += 1;
            t += c.len_utf8();
            continue;
        }
        // Mismatch: let the last `%` take one more character, if there is one to take.
        let Some((after, from)) = backtrack else {
            return false;
        };
        let Some(c) = text.get(from..).and_then(|rest| rest.chars().next()) else {
            return false;
        };
        let from = from + c.len_utf8();
        backtrack = Some((after, from));
        p = after;
        t = from;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(pattern: &str, escape: Option<char>, text: &str) -> bool {
        LikePattern::compile(pattern, escape).unwrap().matches(text)
    }

    #[test]
    fn shapes() {
        assert_eq!(
            LikePattern::compile("abc", None).unwrap(),
            LikePattern::Exact("abc".into())
        );
        assert_eq!(
            LikePattern::compile("ab%", None).unwrap(),
            LikePattern::Prefix("ab".into())
        );
        assert_eq!(
            LikePattern::compile("%%ab", None).unwrap(),
            LikePattern::Suffix("ab".into())
        );
        assert_eq!(
            LikePattern::compile("%ab%", None).unwrap(),
            LikePattern::Contains("ab".into())
        );
        assert_eq!(
            LikePattern::compile("%", None).unwrap(),
            LikePattern::Anything
        );
        assert_eq!(
            LikePattern::compile("a\\%", Some('\\')).unwrap(),
            LikePattern::Exact("a%".into())
        );
        assert!(matches!(
            LikePattern::compile("a%b", None).unwrap(),
            LikePattern::General(_)
        ));
    }

    #[test]
    fn wildcards() {
        assert!(like("12%3", None, "123"));
        assert!(like("12%3", None, "12993"));
        assert!(!like("12%3", None, "1234"));
        assert!(like("l_se", None, "lose"));
        assert!(!like("l_se", None, "loose"));
        assert!(like("_", None, "é"));
        assert!(!like("_", None, ""));
        assert!(like("%", None, ""));
        assert!(like("", None, ""));
        assert!(!like("", None, "a"));
        assert!(like("%a%b%c%", None, "xxaxxbxxcxx"));
        assert!(!like("%a%b%c%", None, "xxcxxbxxaxx"));
        assert!(like("a%a%a", None, "aaa"));
        assert!(!like("a%a%a", None, "aa"));
        assert!(like("%_%", None, "x"));
        assert!(like("_%_", None, "xy"));
        assert!(!like("_%_", None, "x"));
    }

    #[test]
    fn escapes() {
        assert!(like("\\_%", Some('\\'), "_foo"));
        assert!(!like("\\_%", Some('\\'), "bar"));
        assert!(like("100!%", Some('!'), "100%"));
        assert!(!like("100!%", Some('!'), "1000"));
        assert!(like("a!!b", Some('!'), "a!b"));
        assert!(LikePattern::compile("a!b", Some('!')).is_err());
        assert!(LikePattern::compile("ab!", Some('!')).is_err());
        // Without ESCAPE, a backslash is an ordinary character.
        assert!(like("a\\_", None, "a\\x"));
    }

    #[test]
    fn quadratic_case_terminates() {
        let text = "a".repeat(2000);
        let pattern = format!("{}b", "%a".repeat(50));
        assert!(!like(&pattern, None, &text));
    }
}
