//! The console's files, compiled into the binary. `vendor/` holds third-party builds
//! fetched at pinned versions by `scripts/vendor-console.sh` (checked by CI), so
//! `cargo build` needs no JavaScript toolchain.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// (name, content type, bytes).
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/app.css"),
    ),
    (
        "grid.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/grid.js"),
    ),
    (
        "vendor/codemirror.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/vendor/codemirror.js"),
    ),
    (
        "vendor/codemirror.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/vendor/codemirror.css"),
    ),
    (
        "vendor/sql.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/vendor/sql.js"),
    ),
    (
        "vendor/show-hint.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/vendor/show-hint.js"),
    ),
    (
        "vendor/show-hint.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/vendor/show-hint.css"),
    ),
    (
        "vendor/chart.umd.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/vendor/chart.umd.js"),
    ),
];

const INDEX: &[u8] = include_bytes!("../../console/index.html");

/// The page's security headers: scripts and styles from this origin only (CodeMirror
/// and the chart set element styles, hence `'unsafe-inline'` for styles), no framing,
/// no sniffing, no referrer.
fn harden(response: &mut Response) {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
             img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; \
             base-uri 'self'; form-action 'self'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // A new binary's assets are picked up at once; they are small.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

/// `GET /`: the console's page.
pub(crate) async fn index() -> Response {
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        INDEX,
    )
        .into_response();
    harden(&mut response);
    response
}

/// `GET /console/assets/{*name}`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, bytes)) => {
            let mut response = (
                [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
                *bytes,
            )
                .into_response();
            harden(&mut response);
            response
        }
        None => (StatusCode::NOT_FOUND, "no such console file\n").into_response(),
    }
}
