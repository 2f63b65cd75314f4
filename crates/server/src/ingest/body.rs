//! Request bodies: spooled to a temporary file as they arrive, under the size limit.

use std::path::Path;

use axum::body::Body;
use futures::StreamExt;
use tempfile::NamedTempFile;
use tokio::io::AsyncWriteExt;

use crate::error::{ApiError, ApiResult};

use super::{INGEST_ERR, bad, io_err};
use crate::spool::spool_file;

/// Stream a request body into a temporary file, enforcing the size limit as bytes arrive.
/// Bytes read and discarded after a 413, so that a client still sending gets the answer
/// instead of a connection reset; beyond this the connection is dropped.
const DRAIN_LIMIT: u64 = 16 * deltalite::MIB as u64;

/// Read and discard what is left of a body, up to [`DRAIN_LIMIT`] bytes or five seconds.
pub async fn drain(mut stream: axum::body::BodyDataStream) {
    let work = async {
        let mut drained: u64 = 0;
        while let Some(Ok(chunk)) = stream.next().await {
            drained += chunk.len() as u64;
            if drained > DRAIN_LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), work).await;
}

/// Whether a body of `len` bytes is small enough to drain before answering 413.
pub fn drainable(len: u64, limit: u64) -> bool {
    len <= limit.saturating_add(DRAIN_LIMIT)
}

pub async fn spool_body(body: Body, limit: u64, dir: Option<&Path>) -> ApiResult<NamedTempFile> {
    let spool = spool_file(dir).map_err(io_err)?;
    let mut file = tokio::fs::File::from_std(spool.reopen().map_err(io_err)?);
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            // A length-limit error from the body layer surfaces here as well.
            let msg = e.to_string();
            if msg.contains("length limit") {
                ApiError::TooLarge(limit)
            } else if msg.contains("timeout") {
                ApiError::BadRequest(format!(
                    "{INGEST_ERR}: the request body stopped arriving (idle timeout)"
                ))
            } else {
                ApiError::BadRequest(format!("{INGEST_ERR}: cannot read request body: {msg}"))
            }
        })?;
        total += chunk.len() as u64;
        if total > limit {
            drain(stream).await;
            return Err(ApiError::TooLarge(limit));
        }
        file.write_all(&chunk).await.map_err(io_err)?;
    }
    file.flush().await.map_err(io_err)?;
    file.sync_all().await.map_err(io_err)?;
    if total == 0 {
        return Err(bad("the request body is empty"));
    }
    Ok(spool)
}
