//! Ferry's HTTP listener: the management API, `/metrics`, `/healthz`, `/readyz` and the web
//! console, all on one port (`http_listen`, default `127.0.0.1:6731`).
//!
//! The broker binds the listener (so the runtime file names it) and hands it over; this crate
//! serves it over the broker's [`Management`] facade and never reaches into broker internals.
//!
//! Modules:
//! - [`server`]: the accept loop (connection limit, header timeout, graceful shutdown);
//!   [`stall`]: cuts off a connection whose client stops taking its answer;
//! - [`routes`]: the route table (the one list the OpenAPI test checks) and handlers' wiring;
//! - [`state`]: what the handlers share, and the listener's bounds ([`HttpLimits`]);
//! - [`error`]: errors as JSON with the protocol's error codes;
//! - [`admit`]: how many requests are served at once, each until its answer is sent; changes
//!   run to their end when their client goes away; [`shares`]: how many of them one client
//!   address may have;
//! - [`guard`]: refuses DNS-rebinding and cross-site requests; [`auth`]: users, once any
//!   exists (basic credentials; `monitor` to read, `admin` to change);
//! - [`metrics`]: the Prometheus / OpenMetrics exposition;
//! - [`rates`]: counters sampled every second, for rates over the last minute;
//! - [`api`]: the JSON endpoints; [`console`]: the embedded web console.

pub mod admit;
pub mod api;
pub mod auth;
pub mod console;
pub mod error;
pub mod guard;
pub mod metrics;
pub mod rates;
pub mod routes;
pub mod server;
pub mod shares;
pub mod stall;
pub mod state;

pub use ferry_broker::manage::Management;
pub use server::{serve, serve_with};
pub use state::HttpLimits;
