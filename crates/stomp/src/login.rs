//! Who may connect: the one place the gateway checks a CONNECT's `login` and `passcode`.
//!
//! - With a `login`, the passcode is checked against Ferry's users (their SCRAM stored keys,
//!   with the native protocol's rate limit of failed attempts per address, delay, counters and
//!   logs) and the session acts as that user: its grants decide every operation, and its
//!   client name must be its own or one its grants allow.
//! - Without one, the session is anonymous, under the native listener's rules: while no user
//!   exists, from loopback only (unless the broker allows anonymous sessions from anywhere);
//!   once users exist, only when anonymous grants are configured, and with those grants.

use std::net::IpAddr;

use ferry_broker::access::Principal;
use ferry_broker::local::Sessions;
use ferry_protocol::ErrorCode;

/// Why a connect was refused: the ERROR frame's `message` header and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// One line.
    pub message: String,
    /// The details.
    pub details: String,
}

/// Checks a CONNECT's `login` and `passcode` headers from a client at `ip`: the principal to
/// open the session as.
pub async fn check(
    sessions: &Sessions,
    login: Option<&str>,
    passcode: Option<&str>,
    ip: Option<IpAddr>,
) -> Result<Principal, Refused> {
    match login.filter(|l| !l.is_empty()) {
        Some(user) => sessions
            .login(user, passcode.unwrap_or_default(), ip)
            .await
            .map_err(|e| Refused {
                details: match e.code {
                    ErrorCode::LimitExceeded => {
                        "too many failed logins from this address; wait and try again".into()
                    }
                    _ => "the login and passcode headers name a Ferry user and its password".into(),
                },
                message: e.message,
            }),
        None => match sessions.admit_anonymous(ip) {
            Ok(()) => Ok(Principal::Anonymous),
            Err(reason) => Err(Refused {
                message: reason,
                details: "send login and passcode headers with a Ferry user's name and password"
                    .into(),
            }),
        },
    }
}
