//! What a user may do: a list of [`Grant`]s, each one line of text.
//!
//! ```text
//! manage queue orders-*     create, delete, purge, change settings of matching queues
//! send topic prices.*       send to matching queues / publish to matching topics
//! receive queue orders-*    receive, subscribe, browse, ack on matching queues / topics
//! client shop-*             open sessions under matching client names
//! monitor                   read the HTTP API and metrics
//! admin                     everything: users and permissions, and every other grant
//! ```
//!
//! Patterns are names in which `*` stands for any run of characters (none included). A user
//! may always open sessions under its own name; `client` grants add others. Nothing is
//! allowed that no grant allows.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// What a destination grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Create, delete, purge, change settings.
    Manage,
    /// Send, publish.
    Send,
    /// Receive, subscribe, browse, ack.
    Receive,
    /// Read the HTTP API and metrics.
    Monitor,
    /// Users and permissions (and everything else).
    Admin,
}

impl Permission {
    /// The word for it, as grants and `Unauthorized` messages write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Manage => "manage",
            Permission::Send => "send",
            Permission::Receive => "receive",
            Permission::Monitor => "monitor",
            Permission::Admin => "admin",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of destination a grant is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Object {
    /// Queues.
    Queue,
    /// Topics.
    Topic,
}

impl Object {
    /// `queue` or `topic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Object::Queue => "queue",
            Object::Topic => "topic",
        }
    }
}

/// A name pattern: `*` matches any run of characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern(String);

impl Pattern {
    /// A pattern; `GrantError` when empty or holding whitespace.
    pub fn new(text: &str) -> Result<Pattern, GrantError> {
        if text.is_empty() || text.len() > 256 || text.chars().any(char::is_whitespace) {
            return Err(GrantError(format!("bad pattern '{text}'")));
        }
        Ok(Pattern(text.to_owned()))
    }

    /// The pattern's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        glob(self.0.as_bytes(), name.as_bytes())
    }
}

/// Glob match with `*` only; iterative with one backtrack point, so linear in practice.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(c) if Some(c) == name.get(n) => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

/// One grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Grant {
    /// `manage|send|receive queue|topic PATTERN`.
    Destination {
        /// Manage, send or receive.
        permission: Permission,
        /// Queues or topics.
        object: Object,
        /// Names it covers.
        pattern: Pattern,
    },
    /// `client PATTERN`: client names the user may open sessions under.
    Client(Pattern),
    /// `monitor`.
    Monitor,
    /// `admin`.
    Admin,
}

/// A grant's text does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}; a grant is 'manage|send|receive queue|topic PATTERN', 'client PATTERN', 'monitor' or 'admin'")]
pub struct GrantError(pub String);

impl FromStr for Grant {
    type Err = GrantError;

    fn from_str(text: &str) -> Result<Grant, GrantError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let permission = |w: &str| match w {
            "manage" => Some(Permission::Manage),
            "send" => Some(Permission::Send),
            "receive" => Some(Permission::Receive),
            _ => None,
        };
        match words.as_slice() {
            ["monitor"] => Ok(Grant::Monitor),
            ["admin"] => Ok(Grant::Admin),
            ["client", p] => Ok(Grant::Client(Pattern::new(p)?)),
            [perm, object, p] => {
                let permission = permission(perm)
                    .ok_or_else(|| GrantError(format!("unknown permission '{perm}'")))?;
                let object = match *object {
                    "queue" => Object::Queue,
                    "topic" => Object::Topic,
                    o => return Err(GrantError(format!("unknown object '{o}'"))),
                };
                Ok(Grant::Destination {
                    permission,
                    object,
                    pattern: Pattern::new(p)?,
                })
            }
            _ => Err(GrantError(format!("cannot read grant '{text}'"))),
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Destination {
                permission,
                object,
                pattern,
            } => write!(f, "{permission} {} {}", object.as_str(), pattern.as_str()),
            Grant::Client(p) => write!(f, "client {}", p.as_str()),
            Grant::Monitor => f.write_str("monitor"),
            Grant::Admin => f.write_str("admin"),
        }
    }
}

/// Everything a user may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(Vec<Grant>);

impl Grants {
    /// Grants from a list (duplicates dropped).
    pub fn new(grants: impl IntoIterator<Item = Grant>) -> Grants {
        let mut g = Grants::default();
        for one in grants {
            g.add(one);
        }
        g
    }

    /// Every permission (what `admin` gives).
    pub fn all() -> Grants {
        Grants(vec![Grant::Admin])
    }

    /// Parses one grant per string.
    pub fn parse<S: AsRef<str>>(lines: &[S]) -> Result<Grants, GrantError> {
        Ok(Grants::new(
            lines
                .iter()
                .map(|l| l.as_ref().parse())
                .collect::<Result<Vec<Grant>, _>>()?,
        ))
    }

    /// The grants, one text line each.
    pub fn lines(&self) -> Vec<String> {
        self.0.iter().map(Grant::to_string).collect()
    }

    /// The grants.
    pub fn iter(&self) -> impl Iterator<Item = &Grant> {
        self.0.iter()
    }

    /// Adds a grant; `false` when it was there already.
    pub fn add(&mut self, grant: Grant) -> bool {
        if self.0.contains(&grant) {
            return false;
        }
        self.0.push(grant);
        true
    }

    /// Removes a grant; `false` when it was not there.
    pub fn remove(&mut self, grant: &Grant) -> bool {
        let before = self.0.len();
        self.0.retain(|g| g != grant);
        before != self.0.len()
    }

    /// Whether `admin` is granted.
    pub fn is_admin(&self) -> bool {
        self.0.contains(&Grant::Admin)
    }

    /// Whether `monitor` (or `admin`) is granted.
    pub fn may_monitor(&self) -> bool {
        self.is_admin() || self.0.contains(&Grant::Monitor)
    }

    /// Whether `permission` is granted on the `object` named `name`.
    pub fn allows(&self, permission: Permission, object: Object, name: &str) -> bool {
        self.0.iter().any(|g| match g {
            Grant::Admin => true,
            Grant::Destination {
                permission: p,
                object: o,
                pattern,
            } => *p == permission && *o == object && pattern.matches(name),
            Grant::Client(_) | Grant::Monitor => false,
        })
    }

    /// Whether `permission` is granted on every name of `object` (a grant with pattern `*`).
    pub fn allows_every(&self, permission: Permission, object: Object) -> bool {
        self.0.iter().any(|g| match g {
            Grant::Admin => true,
            Grant::Destination {
                permission: p,
                object: o,
                pattern,
            } => *p == permission && *o == object && pattern.as_str().bytes().all(|c| c == b'*'),
            Grant::Client(_) | Grant::Monitor => false,
        })
    }

    /// Whether user `user` may open a session under `client`: its own name, or a `client`
    /// grant's pattern (or `admin`).
    pub fn allows_client(&self, user: &str, client: &str) -> bool {
        client == user
            || self.0.iter().any(|g| match g {
                Grant::Admin => true,
                Grant::Client(p) => p.matches(client),
                _ => false,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_with_stars_anywhere() {
        let p = |s: &str| Pattern::new(s).unwrap();
        assert!(p("shop-*").matches("shop-1"));
        assert!(p("shop-*").matches("shop-"));
        assert!(!p("shop-*").matches("shop"));
        assert!(p("*").matches("anything"));
        assert!(p("a*b*c").matches("aXXbYYc"));
        assert!(!p("a*b*c").matches("aXXbYY"));
        assert!(p("orders").matches("orders"));
        assert!(!p("orders").matches("orders2"));
        assert!(p("*.eu").matches("prices.eu"));
    }

    #[test]
    fn grants_round_trip_through_text() {
        let lines = [
            "manage queue orders-*",
            "send topic prices.*",
            "receive queue orders",
            "client shop-*",
            "monitor",
            "admin",
        ];
        let g = Grants::parse(&lines).unwrap();
        assert_eq!(g.lines(), lines);
    }

    #[test]
    fn bad_grants_are_refused_with_the_reason() {
        for t in [
            "",
            "send",
            "send queue",
            "write queue x",
            "send table x",
            "client",
            "monitor x",
        ] {
            assert!(t.parse::<Grant>().is_err(), "{t:?}");
        }
        let e = "read queue x".parse::<Grant>().unwrap_err();
        assert!(e.to_string().contains("unknown permission 'read'"));
    }

    #[test]
    fn a_destination_grant_allows_only_its_permission_object_and_names() {
        let g = Grants::parse(&["send queue orders-*"]).unwrap();
        assert!(g.allows(Permission::Send, Object::Queue, "orders-eu"));
        assert!(!g.allows(Permission::Receive, Object::Queue, "orders-eu"));
        assert!(!g.allows(Permission::Send, Object::Topic, "orders-eu"));
        assert!(!g.allows(Permission::Send, Object::Queue, "invoices"));
        assert!(!g.may_monitor());
        assert!(!g.allows_every(Permission::Send, Object::Queue));
    }

    #[test]
    fn admin_allows_everything() {
        let g = Grants::all();
        assert!(g.allows(Permission::Manage, Object::Topic, "x"));
        assert!(g.allows_every(Permission::Receive, Object::Queue));
        assert!(g.may_monitor());
        assert!(g.allows_client("root", "anyone"));
    }

    #[test]
    fn a_user_opens_sessions_under_its_own_name_and_granted_patterns_only() {
        let none = Grants::default();
        assert!(none.allows_client("warehouse", "warehouse"));
        assert!(!none.allows_client("shop", "warehouse"));
        let g = Grants::parse(&["client shop-*"]).unwrap();
        assert!(g.allows_client("shop", "shop-12"));
        assert!(!g.allows_client("shop", "warehouse"));
    }

    #[test]
    fn grants_are_added_and_removed_once() {
        let mut g = Grants::default();
        assert!(g.add(Grant::Monitor));
        assert!(!g.add(Grant::Monitor));
        assert!(g.remove(&Grant::Monitor));
        assert!(!g.remove(&Grant::Monitor));
    }
}
