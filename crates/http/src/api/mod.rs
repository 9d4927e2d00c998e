//! The JSON endpoints, one file per area. Field names are stable (snake_case); times are ms
//! since the Unix epoch; errors are [`crate::error::ApiError`].

pub mod clients;
pub mod definitions;
pub mod messages;
pub mod overview;
pub mod paging;
pub mod queues;
pub mod topics;
pub mod users;

use std::sync::Arc;

use axum::extract::State;

use crate::state::AppState;

/// The state extractor every handler takes.
pub type St = State<Arc<AppState>>;
