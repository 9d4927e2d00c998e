//! Who may do what: the users' grants (cached from the store), the policy for unauthenticated
//! sessions, and the limiter of failed authentications per address.
//!
//! Grants are read from the cache on every request, so a change takes effect for the next
//! operation of every live session. The cache is reloaded after every change made through
//! this broker and every [`RELOAD_EVERY`] (changes made through other nodes sharing a
//! PostgreSQL store, or by `ferry user` on it). Credentials are never cached: each
//! authentication reads the store.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ferry_auth::{Grants, Object, Permission};
use ferry_store::{Store, StoreError};
use rand::RngCore;
use tracing::warn;

use crate::admission::client_key;
use crate::config::BrokerConfig;

/// How often the grants are read again from the store.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The window over which failed authentications are counted per address.
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Most addresses whose failures are remembered at once; past it the oldest windows go (an
/// attacker with more addresses than this gains nothing they could not get by waiting).
const MAX_TRACKED_ADDRESSES: usize = 65_536;

/// Who a session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// No authentication: what [`Access::anonymous_grants`] allows.
    Anonymous,
    /// A user proven by SCRAM (or a TLS client certificate).
    User(Arc<str>),
    /// A gateway inside the broker that the operator configured (the datagram ingest): it
    /// may do what its settings tell it to, whoever sent the datagrams.
    Operator,
}

impl Principal {
    /// How the principal is named in messages and logs.
    pub fn describe(&self) -> String {
        match self {
            Principal::Anonymous => "anonymous session".to_owned(),
            Principal::User(u) => format!("user '{u}'"),
            Principal::Operator => "the broker's own gateway".to_owned(),
        }
    }
}

/// Failed authentications of one address in the current window.
#[derive(Debug, Clone, Copy)]
struct Failures {
    since: Instant,
    count: u32,
}

/// Authentication and authorization state of one broker.
pub struct Access {
    grants: RwLock<HashMap<String, Arc<Grants>>>,
    has_users: AtomicBool,
    allow_anonymous: bool,
    anonymous_grants: Arc<Grants>,
    all: Arc<Grants>,
    none: Arc<Grants>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
    max_failures: u32,
    /// How long a failed authentication waits before its answer.
    pub failure_delay: Duration,
    /// Derives the salts answered for unknown users (see `ferry_auth::scram`).
    pub secret: [u8; 32],
    /// Iterations of credentials this broker creates.
    pub iterations: u32,
}

impl Access {
    /// The access state `config` sets up, with no users known yet (see [`Access::reload`]).
    pub fn new(config: &BrokerConfig) -> Access {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        Access {
            grants: RwLock::new(HashMap::new()),
            has_users: AtomicBool::new(false),
            allow_anonymous: config.allow_anonymous,
            // Validated with the configuration.
            anonymous_grants: Arc::new(Grants::parse(&config.anonymous_grants).unwrap_or_default()),
            all: Arc::new(Grants::all()),
            none: Arc::new(Grants::default()),
            failures: Mutex::new(HashMap::new()),
            max_failures: config.max_auth_failures_per_min,
            failure_delay: Duration::from_millis(u64::from(config.auth_failure_delay_ms)),
            secret,
            iterations: config.scram_iterations,
        }
    }

    /// Reads every user's grants from the store. Grant lines that do not parse (written by a
    /// newer build, say) are skipped with a warning: they grant nothing.
    pub async fn reload(&self, store: &dyn Store) -> Result<(), StoreError> {
        let users = store.users().list_users().await?;
        let mut map = HashMap::with_capacity(users.len());
        for u in users {
            let name = &u.name;
            let grants = u.grants.iter().filter_map(|line| match line.parse() {
                Ok(g) => Some(g),
                Err(e) => {
                    warn!(user = %name, grant = %line, error = %e, "ignoring a grant that does not parse");
                    None
                }
            });
            let grants = Arc::new(Grants::new(grants));
            map.insert(u.name, grants);
        }
        self.has_users.store(!map.is_empty(), Ordering::Release);
        *self.grants.write().unwrap_or_else(|e| e.into_inner()) = map;
        Ok(())
    }

    /// Whether any user exists (as of the last reload).
    pub fn has_users(&self) -> bool {
        self.has_users.load(Ordering::Acquire)
    }

    /// What an unauthenticated session may do now: everything while no user exists, the
    /// configured anonymous grants once one does.
    pub fn anonymous_grants(&self) -> Arc<Grants> {
        if self.has_users() {
            self.anonymous_grants.clone()
        } else {
            self.all.clone()
        }
    }

    /// The grants of `principal` now (nothing for a user deleted since it connected).
    pub fn grants(&self, principal: &Principal) -> Arc<Grants> {
        match principal {
            Principal::Anonymous => self.anonymous_grants(),
            Principal::Operator => self.all.clone(),
            Principal::User(name) => self
                .grants
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&**name)
                .cloned()
                .unwrap_or_else(|| self.none.clone()),
        }
    }

    /// Whether an unauthenticated session may start from `ip`; the reason when not.
    pub fn admit_anonymous(&self, ip: Option<IpAddr>) -> Result<(), String> {
        if self.has_users() {
            if self.anonymous_grants.iter().next().is_some() {
                return Ok(());
            }
            return Err(
                "authentication required: connect as a user (SCRAM-SHA-256, e.g. `--user NAME`)"
                    .into(),
            );
        }
        let local = ip.is_none_or(|ip| ip.is_loopback() || ip.to_canonical().is_loopback());
        if local || self.allow_anonymous {
            Ok(())
        } else {
            Err(
                "authentication required: this broker has no users yet and accepts \
                 unauthenticated sessions from loopback only (create a user with `ferry user add`, \
                 or start the broker with --allow-anonymous)"
                    .into(),
            )
        }
    }

    /// When `ip` may try again, if it is over its failed-authentication rate.
    pub fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        if self.max_failures == 0 {
            return None;
        }
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let f = failures.get(&client_key(ip))?;
        let age = f.since.elapsed();
        (age < FAILURE_WINDOW && f.count >= self.max_failures).then(|| FAILURE_WINDOW - age)
    }

    /// Counts a failed authentication from `ip`.
    pub fn record_failure(&self, ip: IpAddr) {
        let ip = client_key(ip);
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_TRACKED_ADDRESSES && !failures.contains_key(&ip) {
            failures.retain(|_, f| now.duration_since(f.since) < FAILURE_WINDOW);
            if failures.len() >= MAX_TRACKED_ADDRESSES {
                if let Some(oldest) = failures
                    .iter()
                    .min_by_key(|(_, f)| f.since)
                    .map(|(a, _)| *a)
                {
                    failures.remove(&oldest);
                }
            }
        }
        let f = failures.entry(ip).or_insert(Failures {
            since: now,
            count: 0,
        });
        if now.duration_since(f.since) >= FAILURE_WINDOW {
            *f = Failures {
                since: now,
                count: 0,
            };
        }
        f.count = f.count.saturating_add(1);
    }
}

/// The `Unauthorized` message for `principal` lacking `permission` on `object` `name`.
pub fn denied(principal: &Principal, permission: Permission, object: Object, name: &str) -> String {
    format!(
        "permission denied: {} lacks '{permission}' on {} '{name}'",
        principal.describe(),
        object.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(max: u32) -> Access {
        let config = BrokerConfig {
            max_auth_failures_per_min: max,
            ..BrokerConfig::default()
        };
        Access::new(&config)
    }

    #[test]
    fn an_address_is_blocked_once_over_its_failure_rate_and_others_are_not() {
        let a = access(3);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..2 {
            a.record_failure(ip);
        }
        assert_eq!(a.blocked(ip), None);
        a.record_failure(ip);
        assert!(a.blocked(ip).is_some());
        assert_eq!(a.blocked("10.0.0.2".parse().unwrap()), None);
        assert_eq!(access(0).blocked(ip), None, "0 means no limit");
    }

    #[test]
    fn failures_count_per_ipv6_network_not_per_address() {
        let a = access(3);
        // Three failures from three addresses of one /64: one client trying addresses.
        for host in ["2001:db8::1", "2001:db8::2", "2001:db8::ffff:3"] {
            a.record_failure(host.parse().unwrap());
        }
        assert!(a.blocked("2001:db8::77".parse().unwrap()).is_some());
        assert_eq!(a.blocked("2001:db8:0:1::1".parse().unwrap()), None);
    }

    #[test]
    fn anonymous_sessions_come_from_loopback_only_until_allowed() {
        let a = access(3);
        assert!(a
            .admit_anonymous(Some("127.0.0.1".parse().unwrap()))
            .is_ok());
        assert!(a.admit_anonymous(Some("::1".parse().unwrap())).is_ok());
        let remote = Some("192.0.2.7".parse().unwrap());
        assert!(a
            .admit_anonymous(remote)
            .unwrap_err()
            .contains("--allow-anonymous"));
        let open = Access::new(&BrokerConfig {
            allow_anonymous: true,
            ..BrokerConfig::default()
        });
        assert!(open.admit_anonymous(remote).is_ok());
        assert!(open.anonymous_grants().is_admin(), "no users: everything");
    }

    #[test]
    fn the_failure_table_stays_bounded() {
        let a = access(1);
        for i in 0..(MAX_TRACKED_ADDRESSES as u32 + 10) {
            a.record_failure(IpAddr::from(i.to_be_bytes()));
        }
        assert!(a.failures.lock().unwrap().len() <= MAX_TRACKED_ADDRESSES);
    }
}
