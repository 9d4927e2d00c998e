//! Pages of a listing by name (`GET /api/queues`, `/api/topics`, `/api/clients`): without
//! `limit`, everything at once; with it, at most `limit` entries named after `after`, and the
//! `next` page's `after`.

use axum::extract::rejection::QueryRejection;
use axum::extract::Query;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};

/// Most entries a page of a listing holds.
pub const MAX_LIST_PAGE: usize = 10_000;

/// A listing's parameters: without `limit`, every entry at once.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Entries per page, 1 to [`MAX_LIST_PAGE`].
    pub limit: Option<usize>,
    /// Only entries named after this (a previous page's `next`).
    pub after: Option<String>,
}

impl ListQuery {
    /// The query of a request, refused precisely when malformed or out of range.
    pub fn checked(q: Result<Query<ListQuery>, QueryRejection>) -> ApiResult<ListQuery> {
        let Query(page) = q?;
        if page.limit.is_some_and(|l| l == 0 || l > MAX_LIST_PAGE) {
            return Err(ApiError::invalid(format!(
                "limit must be 1 to {MAX_LIST_PAGE}"
            )));
        }
        Ok(page)
    }

    /// The page of `entries` (in any order) this query asks for, by `name`, and the `next`
    /// page's `after` (`None` on the last page).
    pub fn page<T>(&self, entries: Vec<T>, name: impl Fn(&T) -> &str) -> (Vec<T>, Option<String>) {
        let mut shown: Vec<T> = entries
            .into_iter()
            .filter(|e| self.after.as_deref().is_none_or(|a| name(e) > a))
            .collect();
        shown.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        let more = self.limit.is_some_and(|l| shown.len() > l);
        if let Some(l) = self.limit {
            shown.truncate(l);
        }
        let next = if more {
            shown.last().map(|e| name(e).to_owned())
        } else {
            None
        };
        (shown, next)
    }
}
