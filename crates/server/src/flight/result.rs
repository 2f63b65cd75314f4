//! An executed statement's result on its way to the client: kept until its DoGet,
//! streamed batch by batch, and logged once, whether it completes, fails, or is never
//! fetched. Also the one mapping of failures to gRPC statuses.

use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow_flight::FlightData;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use tonic::Status;

use crate::error::ApiError;
use crate::output::{Limits, ResultStream, Stop};
use crate::sql::Output;
use crate::sql::plain::{plain_batch, plain_schema};
use crate::state::AppState;

/// A failure as the gRPC status a client sees. The message is the HTTP API's error text
/// (`Permission Error: …`, `Catalog Error: …`); transient failures are `Unavailable`
/// (retryable), everything final is not.
pub fn status(e: ApiError) -> Status {
    let msg = e.to_string();
    match e {
        ApiError::Unauthorized => Status::unauthenticated(msg),
        ApiError::BadRequest(_) => Status::invalid_argument(msg),
        ApiError::NotFound(_) => Status::not_found(msg),
        ApiError::TooLarge(_) => Status::resource_exhausted(msg),
        ApiError::Unavailable(_) => Status::unavailable(msg),
        ApiError::Timeout(_) => Status::deadline_exceeded(msg),
        ApiError::Internal(_) => Status::internal(msg),
    }
}

/// A query's log entry, finished exactly once: when its result ends or fails, or, for a
/// result nobody fetched, when it is dropped.
pub struct Logged {
    pub(super) state: Arc<AppState>,
    pub(super) query_id: String,
    pub(super) start: Instant,
    pub(super) done: bool,
}

impl Logged {
    pub(super) fn finish(mut self, rows: u64, error: Option<String>) {
        self.done = true;
        self.record(rows, error);
    }

    fn record(&self, rows: u64, error: Option<String>) {
        let end = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
        let ms = self.start.elapsed().as_millis() as u64;
        self.state
            .queries()
            .finish(&self.query_id, end, ms, rows, error);
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if !self.done {
            self.record(
                0,
                Some("INTERRUPT Error: the result was not fetched (no DoGet, or the client went away)".into()),
            );
        }
    }
}

/// An executed statement: its result, waiting for the DoGet that streams it.
pub struct Pending {
    /// The query log id of the statement (for `GET`/`DELETE /query/{id}`).
    pub query_id: String,
    pub(super) output: Output,
    pub(super) limits: Limits,
    /// The log entry of a result still to be produced (a stream); `None` when the
    /// statement's work is done (DDL, DML, a materialized result).
    pub(super) log: Option<Logged>,
}

impl Pending {
    /// The schema the result's stream has, exactly (what its FlightInfo announces).
    pub fn schema(&self) -> SchemaRef {
        plain_schema(&self.output.schema())
    }

    /// Rows of a materialized result; `-1` (unknown) for a stream.
    pub fn total_records(&self) -> i64 {
        match &self.output {
            Output::Batches(_, b) => b.iter().map(|b| b.num_rows() as i64).sum(),
            Output::Stream(_) => -1,
        }
    }

    /// The rows a DML statement changed (`None`: not DML).
    pub fn affected_rows(&self) -> Option<i64> {
        self.output.affected_rows()
    }

    /// Run the result to its end without sending it (statements executed through
    /// DoPut); its rows count.
    pub async fn drain(self) -> Result<u64, Status> {
        let mut result = ResultStream::new(self.output, self.limits, 0, None);
        loop {
            match result.next().await {
                None => break,
                Some(Ok(_)) => {}
                Some(Err(stop)) => {
                    let e = stop_status(stop);
                    if let Some(log) = self.log {
                        log.finish(result.rows(), Some(e.message().to_string()));
                    }
                    return Err(e);
                }
            }
        }
        if let Some(log) = self.log {
            log.finish(result.rows(), None);
        }
        Ok(result.rows())
    }

    /// The result as Flight data: the schema message (always, also without rows), then
    /// one message per batch as DataFusion produces it.
    pub fn into_flight_data(self) -> BoxStream<'static, Result<FlightData, Status>> {
        let schema = self.schema();
        let result = ResultStream::new(self.output, self.limits, 0, None);
        let batches = futures::stream::unfold(
            (result, self.log, false),
            |(mut result, log, ended)| async move {
                if ended {
                    return None;
                }
                match result.next().await {
                    Some(Ok(batch)) => Some((Ok(plain_batch(&batch)), (result, log, false))),
                    Some(Err(stop)) => {
                        let e = stop_status(stop);
                        if let Some(log) = log {
                            log.finish(result.rows(), Some(e.message().to_string()));
                        }
                        Some((Err(FlightError::Tonic(Box::new(e))), (result, None, true)))
                    }
                    None => {
                        if let Some(log) = log {
                            log.finish(result.rows(), None);
                        }
                        None
                    }
                }
            },
        );
        FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from)
            .boxed()
    }
}

pub(super) fn stop_status(stop: Stop) -> Status {
    match stop {
        Stop::Cancelled => Status::cancelled("INTERRUPT Error: Query cancelled"),
        other => status(other.into_error()),
    }
}
