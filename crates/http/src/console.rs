//! The web console: one page, a script and a style sheet, embedded in the binary (no build
//! step, nothing fetched from elsewhere). It polls the JSON API every two seconds.

use axum::extract::Path;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use ferry_protocol::ErrorCode;

use crate::error::ApiError;

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");

/// `GET /`: the console's page.
pub async fn index() -> Html<&'static str> {
    Html(INDEX)
}

/// `GET /console/{file}`: its script and style sheet.
pub async fn asset(Path(file): Path<String>) -> Response {
    let (kind, body) = match file.as_str() {
        "app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "style.css" => ("text/css; charset=utf-8", STYLE_CSS),
        _ => {
            return ApiError::new(ErrorCode::NotFound, format!("no console file '{file}'"))
                .into_response()
        }
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
