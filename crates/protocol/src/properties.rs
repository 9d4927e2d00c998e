//! [`Properties`]: a message's named values, shared by reference between the messages that
//! carry the same ones.
//!
//! The messages of a batch (a `PublishBatch` on the way in, a `DeliverBatch` on the way out)
//! all carry exactly the batch's properties. Held as an owned vector, every message of the
//! batch needed its own copy (a vector and two strings per property, per message); shared,
//! the batch allocates them once and each message holds a reference. Changing one message's
//! properties ([`Properties::push`], [`Properties::to_mut`]) copies them first if they are
//! shared, so no other message sees the change.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A message property value, as selectors see it.
#[derive(Debug, Clone, PartialEq)]
pub enum PropertyValue {
    /// `true` or `false`.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string.
    Str(String),
}

/// One property: its name and value.
pub type Property = (String, PropertyValue);

/// Message properties in the order the sender gave them. Names are unique.
///
/// Reads as a slice of `(name, value)` pairs (`props.iter()`, `props.len()`, `&props[..]`).
/// A clone shares the properties instead of copying them, and no properties allocate
/// nothing. Build them from a vector (`vec![..].into()`) or an iterator (`collect()`).
#[derive(Clone, Default)]
pub struct Properties(Option<Arc<Vec<Property>>>);

/// What no properties read as.
const NONE: &[Property] = &[];

impl Properties {
    /// No properties (allocates nothing).
    pub const fn new() -> Properties {
        Properties(None)
    }

    /// Adds a property at the end (copying the properties first if they are shared).
    pub fn push(&mut self, property: Property) {
        self.to_mut().push(property);
    }

    /// The properties to change in place: this value's own (copied first if shared).
    pub fn to_mut(&mut self) -> &mut Vec<Property> {
        Arc::make_mut(self.0.get_or_insert_with(Default::default))
    }

    /// The properties as a vector of their own (without a copy when not shared).
    pub fn into_vec(self) -> Vec<Property> {
        match self.0 {
            None => Vec::new(),
            Some(shared) => Arc::try_unwrap(shared).unwrap_or_else(|shared| (*shared).clone()),
        }
    }

    /// Whether `self` and `other` are the same shared properties (not only equal ones).
    pub fn ptr_eq(&self, other: &Properties) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Deref for Properties {
    type Target = [Property];

    fn deref(&self) -> &[Property] {
        self.0.as_deref().map_or(NONE, Vec::as_slice)
    }
}

impl From<Vec<Property>> for Properties {
    fn from(v: Vec<Property>) -> Properties {
        if v.is_empty() {
            Properties(None)
        } else {
            Properties(Some(Arc::new(v)))
        }
    }
}

impl FromIterator<Property> for Properties {
    fn from_iter<I: IntoIterator<Item = Property>>(iter: I) -> Properties {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl<'a> IntoIterator for &'a Properties {
    type Item = &'a Property;
    type IntoIter = std::slice::Iter<'a, Property>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Properties) -> bool {
        self.ptr_eq(other) || **self == **other
    }
}

impl PartialEq<Vec<Property>> for Properties {
    fn eq(&self, other: &Vec<Property>) -> bool {
        **self == **other
    }
}

impl PartialEq<[Property]> for Properties {
    fn eq(&self, other: &[Property]) -> bool {
        **self == *other
    }
}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, v: i64) -> Property {
        (name.to_owned(), PropertyValue::Int(v))
    }

    #[test]
    fn clones_share_and_changes_copy() {
        let a: Properties = vec![one("a", 1)].into();
        let mut b = a.clone();
        assert!(a.ptr_eq(&b), "a clone shares");
        b.push(one("b", 2));
        assert!(!a.ptr_eq(&b), "a change copies first");
        assert_eq!(&a[..], &[one("a", 1)]);
        assert_eq!(&b[..], &[one("a", 1), one("b", 2)]);
    }

    #[test]
    fn none_reads_empty_and_equals_an_empty_vector() {
        let none = Properties::new();
        assert!(none.is_empty());
        assert_eq!(none, Properties::from(Vec::new()));
        assert_eq!(none.into_vec(), Vec::new());
    }

    #[test]
    fn equal_properties_compare_equal_unshared() {
        let a: Properties = vec![one("a", 1)].into();
        let b: Properties = [one("a", 1)].into_iter().collect();
        assert!(!a.ptr_eq(&b));
        assert_eq!(a, b);
        assert_ne!(a, Properties::new());
    }
}
