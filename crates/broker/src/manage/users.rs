//! Users and permissions through the management facade (the HTTP API), and the password
//! check gateways use ([`Management::login`]). Every change reloads the grants at once, so it
//! holds for the next operation of every live session on this node (other nodes sharing the
//! store within `access::RELOAD_EVERY`).

use std::net::IpAddr;

use ferry_auth::{verify_password, Grant, Grants, StoredCredential};
use ferry_protocol::{ErrorCode, ErrorReply};
use ferry_store::UserRecord;
use tracing::{info, warn};

use super::Management;
use crate::access::Principal;
use crate::handlers::validate;
use crate::stats::Stats;

/// A user as shown to operators: no credential, only how it is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserView {
    /// The name.
    pub name: String,
    /// The grants, one line each.
    pub grants: Vec<String>,
    /// PBKDF2 iterations of the stored credential (0 when it does not parse).
    pub iterations: u32,
}

fn view(u: &UserRecord) -> UserView {
    UserView {
        name: u.name.clone(),
        grants: u.grants.clone(),
        iterations: StoredCredential::decode(&u.credential).map_or(0, |c| c.iterations),
    }
}

fn store_reply(e: &ferry_store::StoreError) -> ErrorReply {
    ErrorReply::new(e.code(), e.to_string())
}

fn parse_grants(lines: &[String]) -> Result<Grants, ErrorReply> {
    Grants::parse(lines).map_err(|e| ErrorReply::new(ErrorCode::InvalidArgument, e.to_string()))
}

/// What a principal may do through the HTTP API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpAccess {
    /// Read the API and metrics (`monitor`).
    pub monitor: bool,
    /// Change anything, users included (`admin`).
    pub admin: bool,
}

impl Management {
    /// Whether callers must prove a user (any user exists).
    pub fn requires_login(&self) -> bool {
        self.shared.access.has_users()
    }

    /// What `principal` may do through the HTTP API now.
    pub fn http_access(&self, principal: &Principal) -> HttpAccess {
        let grants = self.shared.access.grants(principal);
        HttpAccess {
            monitor: grants.may_monitor(),
            admin: grants.is_admin(),
        }
    }

    async fn reload_access(&self) {
        if let Err(e) = self.shared.access.reload(&*self.shared.store).await {
            warn!(error = %e, "cannot reload the users' grants after a change");
        }
    }

    /// Every user, sorted by name.
    pub async fn users(&self) -> Result<Vec<UserView>, ErrorReply> {
        let users = self.shared.store.users().list_users().await;
        Ok(users
            .map_err(|e| store_reply(&e))?
            .iter()
            .map(view)
            .collect())
    }

    /// One user; `NotFound` when it does not exist.
    pub async fn user(&self, name: &str) -> Result<UserView, ErrorReply> {
        match self.shared.store.users().user(name).await {
            Ok(Some(u)) => Ok(view(&u)),
            Ok(None) => Err(ErrorReply::new(
                ErrorCode::NotFound,
                format!("user '{name}' does not exist"),
            )),
            Err(e) => Err(store_reply(&e)),
        }
    }

    /// Adds a user with `password` and `grants` (lines; checked).
    pub async fn add_user(
        &self,
        name: &str,
        password: &str,
        grants: &[String],
    ) -> Result<UserView, ErrorReply> {
        validate::name("user", name, &self.shared.limits)?;
        if password.is_empty() {
            return Err(ErrorReply::new(
                ErrorCode::InvalidArgument,
                "the password is empty",
            ));
        }
        let grants = parse_grants(grants)?;
        let credential = derive(password, self.shared.access.iterations).await?;
        let record = UserRecord {
            name: name.to_owned(),
            credential: credential.encode(),
            grants: grants.lines(),
        };
        self.shared
            .store
            .users()
            .create_user(&record)
            .await
            .map_err(|e| store_reply(&e))?;
        info!(user = %name, "user added");
        self.reload_access().await;
        Ok(view(&record))
    }

    /// Replaces a user's password.
    pub async fn set_password(&self, name: &str, password: &str) -> Result<(), ErrorReply> {
        if password.is_empty() {
            return Err(ErrorReply::new(
                ErrorCode::InvalidArgument,
                "the password is empty",
            ));
        }
        let credential = derive(password, self.shared.access.iterations).await?;
        self.shared
            .store
            .users()
            .set_user_credential(name, &credential.encode())
            .await
            .map_err(|e| store_reply(&e))?;
        info!(user = %name, "password changed");
        Ok(())
    }

    /// Removes a user; its live sessions keep running with no permission left.
    pub async fn delete_user(&self, name: &str) -> Result<(), ErrorReply> {
        self.shared
            .store
            .users()
            .delete_user(name)
            .await
            .map_err(|e| store_reply(&e))?;
        info!(user = %name, "user deleted");
        self.reload_access().await;
        Ok(())
    }

    /// Adds (`revoke` false) or removes grants of a user; returns the user as it is now.
    pub async fn permit(
        &self,
        name: &str,
        lines: &[String],
        revoke: bool,
    ) -> Result<UserView, ErrorReply> {
        let changes: Vec<Grant> = parse_grants(lines)?.iter().cloned().collect();
        let user = self.user(name).await?;
        let mut grants = parse_grants(&user.grants)?;
        for g in changes {
            if revoke {
                grants.remove(&g);
            } else {
                grants.add(g);
            }
        }
        self.shared
            .store
            .users()
            .set_user_grants(name, &grants.lines())
            .await
            .map_err(|e| store_reply(&e))?;
        info!(user = %name, grants = ?grants.lines(), "grants changed");
        self.reload_access().await;
        self.user(name).await
    }

    /// Checks a user name and password, for gateways that receive a password (a STOMP
    /// passcode, HTTP basic auth over TLS): the same rate limit per address, delay, counters
    /// and logs as the native protocol's SCRAM. `Unauthorized` (or `LimitExceeded`) when
    /// refused; the principal to run the session as otherwise.
    pub async fn login(
        &self,
        user: &str,
        password: &str,
        ip: Option<IpAddr>,
    ) -> Result<Principal, ErrorReply> {
        let shared = &self.shared;
        let access = &shared.access;
        if let Some(wait) = ip.and_then(|ip| access.blocked(ip)) {
            Stats::add(&shared.stats.auth_refused_rate, 1);
            return Err(ErrorReply::new(
                ErrorCode::LimitExceeded,
                format!(
                    "too many failed authentications from this address: try again in {} s",
                    wait.as_secs().max(1)
                ),
            ));
        }
        let record = shared
            .store
            .users()
            .user(user)
            .await
            .map_err(|e| store_reply(&e))?;
        let credential = record.and_then(|u| StoredCredential::decode(&u.credential).ok());
        let password = password.to_owned();
        let ok = tokio::task::spawn_blocking(move || match credential {
            Some(c) => verify_password(&c, &password),
            None => {
                // An unknown user costs the same derivation, so that timing does not tell.
                let dummy = StoredCredential {
                    iterations: ferry_auth::DEFAULT_ITERATIONS,
                    salt: vec![0; 16],
                    stored_key: [0; 32],
                    server_key: [0; 32],
                };
                let _ = verify_password(&dummy, &password);
                false
            }
        })
        .await
        .unwrap_or(false);
        if ok {
            Stats::add(&shared.stats.auth_succeeded, 1);
            return Ok(Principal::User(user.into()));
        }
        Stats::add(&shared.stats.auth_failed, 1);
        if let Some(ip) = ip {
            access.record_failure(ip);
        }
        warn!(peer = %ip.map_or_else(|| "unknown".to_owned(), |i| i.to_string()), user = %user,
            "password authentication failed");
        tokio::time::sleep(access.failure_delay).await;
        Err(ErrorReply::new(
            ErrorCode::Unauthorized,
            "authentication failed: unknown user or wrong password",
        ))
    }
}

/// A new credential for `password` (PBKDF2 off the async workers).
async fn derive(password: &str, iterations: u32) -> Result<StoredCredential, ErrorReply> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || StoredCredential::new(&password, iterations))
        .await
        .map_err(|e| ErrorReply::new(ErrorCode::Internal, format!("deriving the credential: {e}")))
}
