//! [`Name`]: a queue or client name that the messages carrying it share.
//!
//! A subscription's deliveries all come from one queue, and most from one sender. Decoding
//! each delivery's names into strings of its own allocated two strings per message, which at
//! a million deliveries a second was a tenth of a consumer's time; a delivery whose name
//! repeats the previous one's shares that one's allocation instead.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// An immutable name, cheap to clone (a reference count), read like a `&str`: it dereferences
/// to `str` and compares equal to strings with the same text.
#[derive(Clone, Eq, PartialOrd, Ord, Default)]
pub struct Name(Arc<str>);

/// Equal text; two clones of one name are recognised by pointer, without comparing bytes.
impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.same_allocation(other) || *self.0 == *other.0
    }
}

impl Name {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `self` and `other` share one allocation (not only equal text).
    pub fn same_allocation(&self, other: &Name) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// By text, as equality compares.
impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name(Arc::from(s))
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Self {
        Name(Arc::from(s.as_str()))
    }
}

impl From<Arc<str>> for Name {
    fn from(s: Arc<str>) -> Self {
        Name(s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> Self {
        n.0.as_ref().to_owned()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_and_compares_like_its_text() {
        let n = Name::from("orders");
        assert_eq!(n, "orders");
        assert_eq!("orders", n);
        assert_eq!(n, String::from("orders"));
        assert_eq!(String::from("orders"), n);
        assert_ne!(n, "order");
        assert_eq!(n.len(), 6);
        assert_eq!(n.as_str(), "orders");
        assert_eq!(format!("{n} {n:?}"), "orders \"orders\"");
        assert_eq!(String::from(n.clone()), "orders");
        let (a, b) = (Name::from("a"), Name::from("b"));
        assert!(a < b);
    }

    #[test]
    fn a_set_of_names_is_looked_up_by_text() {
        let set: std::collections::HashSet<Name> = ["orders".into(), "prices".into()].into();
        assert!(set.contains("orders"));
        assert!(set.contains(&Name::from(String::from("prices"))));
        assert!(!set.contains("order"));
    }

    #[test]
    fn a_clone_shares_the_allocation_and_equal_text_alone_does_not() {
        let n = Name::from("orders");
        assert!(n.clone().same_allocation(&n));
        let other = Name::from(String::from("orders"));
        assert_eq!(other, n);
        assert!(!other.same_allocation(&n));
    }
}
