//! Request ids, on both protocols: the client's `x-request-id` when it sends one, else a
//! new UUID; echoed in the response (HTTP header, gRPC metadata) and carried by the span
//! every log line of that request is written in.

use axum::http::{HeaderMap, HeaderName};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};

/// The header (and gRPC metadata key) of the request id.
pub const HEADER: &str = "x-request-id";

fn header() -> HeaderName {
    HeaderName::from_static(HEADER)
}

/// Sets the request id of a request without one; the outermost layer.
pub fn set() -> SetRequestIdLayer<MakeRequestUuid> {
    SetRequestIdLayer::new(header(), MakeRequestUuid)
}

/// Copies the request id into the response.
pub fn propagate() -> PropagateRequestIdLayer {
    PropagateRequestIdLayer::new(header())
}

/// The request id of a request that went through [`set`] (`""` if its value is not
/// text, which `set` does not replace).
pub fn of(headers: &HeaderMap) -> &str {
    headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}
