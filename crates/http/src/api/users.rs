//! `/api/users`: users and their grants (admin only). Passwords go in, never out: a user is
//! shown with its grants and its credential's iteration count.

use axum::extract::Path;
use axum::Json;
use ferry_broker::manage::UserView;
use serde::Deserialize;
use serde_json::{json, Value};

use super::St;
use crate::error::ApiResult;

fn shown(u: &UserView) -> Value {
    json!({"name": u.name, "grants": u.grants, "iterations": u.iterations})
}

/// Every user.
pub async fn list(state: St) -> ApiResult<Json<Value>> {
    let users = state.mgmt.users().await?;
    Ok(Json(
        json!({"users": users.iter().map(shown).collect::<Vec<_>>()}),
    ))
}

/// One user.
pub async fn show(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(shown(&state.mgmt.user(&name).await?)))
}

/// The body of `PUT /api/users/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    password: String,
    #[serde(default)]
    grants: Vec<String>,
}

/// Adds a user.
pub async fn create(
    state: St,
    Path(name): Path<String>,
    Json(body): Json<NewUser>,
) -> ApiResult<Json<Value>> {
    let u = state
        .mgmt
        .add_user(&name, &body.password, &body.grants)
        .await?;
    Ok(Json(shown(&u)))
}

/// The body of `PATCH /api/users/{name}`: any of a new password, grants to add, to revoke.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserChange {
    password: Option<String>,
    #[serde(default)]
    grant: Vec<String>,
    #[serde(default)]
    revoke: Vec<String>,
}

/// Changes a user's password or grants.
pub async fn update(
    state: St,
    Path(name): Path<String>,
    Json(body): Json<UserChange>,
) -> ApiResult<Json<Value>> {
    let mgmt = &state.mgmt;
    mgmt.user(&name).await?;
    if let Some(p) = &body.password {
        mgmt.set_password(&name, p).await?;
    }
    if !body.grant.is_empty() {
        mgmt.permit(&name, &body.grant, false).await?;
    }
    if !body.revoke.is_empty() {
        mgmt.permit(&name, &body.revoke, true).await?;
    }
    Ok(Json(shown(&mgmt.user(&name).await?)))
}

/// Removes a user.
pub async fn remove(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    state.mgmt.delete_user(&name).await?;
    Ok(Json(json!({"deleted": name})))
}
