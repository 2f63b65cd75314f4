//! Server errors and their HTTP mapping.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use deltalite::{DeltaLiteError, ErrorKind};

/// Invalid configuration at startup.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

/// An error answered to a client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Missing or wrong credentials.
    #[error("Unauthorized")]
    Unauthorized,
    /// The request is wrong and retrying will not help.
    #[error("{0}")]
    BadRequest(String),
    /// The object does not exist or is not visible to the caller.
    #[error("{0}")]
    NotFound(String),
    /// The body is larger than the configured limit.
    #[error("Request body exceeds the limit of {0} bytes")]
    TooLarge(u64),
    /// A transient condition (commit race lost, storage hiccup): retry later.
    #[error("{0}")]
    Unavailable(String),
    /// The query ran longer than the timeout.
    #[error("{0}")]
    Timeout(String),
    /// A bug or an unexpected storage failure.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// HTTP status of the error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Map an engine error; `prefix` is the client-visible verb. This and
    /// [`ApiError::from_failure`] are the server's only mapping of failures to statuses:
    /// transient (the engine's classification) → `503` with `Retry-After`; final (bad
    /// input, a table that cannot take it, a store that refuses) → `400`; a bug → `500`.
    pub fn from_engine(prefix: &str, err: DeltaLiteError) -> Self {
        let msg = format!("{prefix}: {err}");
        match err.kind() {
            ErrorKind::CommitConflict | ErrorKind::Transient => ApiError::Unavailable(msg),
            ErrorKind::InvalidInput
            | ErrorKind::SchemaMismatch
            | ErrorKind::TableNotFound
            | ErrorKind::UnsupportedTable
            | ErrorKind::SourceTooLarge
            | ErrorKind::Failed => ApiError::BadRequest(msg),
            ErrorKind::Internal => ApiError::Internal(msg),
        }
    }

    /// Map any other failure from below (storage listings, DataFusion execution):
    /// transient → `503`, else `otherwise(msg)`.
    pub fn from_failure(
        err: &(dyn std::error::Error + 'static),
        msg: String,
        otherwise: fn(String) -> ApiError,
    ) -> Self {
        if deltalite::error::is_transient(err) {
            ApiError::Unavailable(msg)
        } else {
            otherwise(msg)
        }
    }

    /// Whether a client may retry the request as it is.
    pub fn is_transient(&self) -> bool {
        matches!(self, ApiError::Unavailable(_))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = self.to_string();
        body.push('\n');
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        match status {
            StatusCode::UNAUTHORIZED => {
                headers.insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Basic realm=\"lakehouse\""),
                );
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from_static("1"),
                );
            }
            _ => {}
        }
        response
    }
}

/// Result alias of request handlers.
pub type ApiResult<T> = Result<T, ApiError>;
