//! Query results as response bodies: the NDJSON result protocol, CSV, JSONL and Parquet.
//!
//! The driver ([`ResultStream`]) pulls record batches, applies `offset`/`limit`, and races
//! each batch against cancellation and the deadline, ending with a typed [`Stop`]. The
//! handler pulls the first batch before it sends any header, so an error found early is a
//! proper answer. After the headers, a streamed format ends according to its contract: the
//! NDJSON protocol with an in-stream `{"error"}` line; CSV and JSONL by aborting the
//! response (no terminating chunk), so every HTTP client reports an incomplete body instead
//! of a short file that looks complete. Parquet is written to a spool file first and sent
//! only when complete, so every error there is a proper status.

pub mod ndjson;

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::util::display::FormatOptions;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::sql::plain::{plain_batch, plain_schema};
use crate::sql::{Output, sql_error};
use ndjson::RowWriter;

/// How a result is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    /// The streamed NDJSON result protocol: metadata, columns, one array per row.
    Ndjson,
    /// CSV with a header row.
    Csv,
    /// One JSON object per row.
    Jsonl,
    /// One Parquet file.
    Parquet,
}

impl OutFormat {
    /// The `format` field of a `/query` request.
    pub fn parse(format: Option<&str>) -> Result<Self, ApiError> {
        match format.map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("default") | Some("json") => Ok(Self::Ndjson),
            Some("csv") => Ok(Self::Csv),
            Some("jsonl") | Some("ndjson") => Ok(Self::Jsonl),
            Some("parquet") => Ok(Self::Parquet),
            Some(other) => Err(ApiError::BadRequest(format!("unknown format {other:?}"))),
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            // `requests` guesses the charset of an `application/*` body without one, and
            // the real dlt client reads `.text`: a guess of cp1252 turns `▶` into `â–¶`.
            Self::Ndjson | Self::Jsonl => "application/x-ndjson; charset=utf-8",
            Self::Csv => "text/csv; charset=utf-8",
            Self::Parquet => "application/parquet",
        }
    }
}

/// Why a result ended before its last row.
#[derive(Debug)]
pub enum Stop {
    /// `DELETE /query/{id}` cancelled it.
    Cancelled,
    /// The query ran past its deadline.
    TimedOut,
    /// Execution failed.
    Failed(ApiError),
}

impl Stop {
    /// The error a client sees.
    pub fn into_error(self) -> ApiError {
        match self {
            Stop::Cancelled => ApiError::BadRequest("INTERRUPT Error: Query cancelled".into()),
            Stop::TimedOut => ApiError::Timeout("INTERRUPT Error: Query timed out".into()),
            Stop::Failed(e) => e,
        }
    }
}

/// What ends a query early: a cancellation token and a deadline.
#[derive(Clone)]
pub struct Limits {
    /// Cancelled by `DELETE /query/{id}` (and when the log entry goes).
    pub token: CancellationToken,
    /// The query timeout's end.
    pub deadline: tokio::time::Instant,
}

impl Limits {
    /// Resolves when the query must stop.
    pub async fn stopped(&self) -> Stop {
        tokio::select! {
            _ = self.token.cancelled() => Stop::Cancelled,
            _ = tokio::time::sleep_until(self.deadline) => Stop::TimedOut,
        }
    }
}

/// A result's rows, windowed by `offset`/`limit`, each pull racing the [`Limits`].
pub struct ResultStream {
    schema: SchemaRef,
    batches: BoxStream<'static, Result<RecordBatch, ApiError>>,
    limits: Limits,
    offset: u64,
    limit: Option<u64>,
    skipped: u64,
    emitted: u64,
}

impl ResultStream {
    /// Drive `output` within `limits`, skipping `offset` rows and ending after `limit`.
    pub fn new(output: Output, limits: Limits, offset: u64, limit: Option<u64>) -> Self {
        let schema = output.schema();
        let batches = match output {
            Output::Stream(s) => s.map(|r| r.map_err(sql_error)).boxed(),
            Output::Batches(_, b) => futures::stream::iter(b.into_iter().map(Ok)).boxed(),
        };
        Self {
            schema,
            batches,
            limits,
            offset,
            limit,
            skipped: 0,
            emitted: 0,
        }
    }

    /// The result's schema.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Rows handed out so far.
    pub fn rows(&self) -> u64 {
        self.emitted
    }

    /// The next non-empty batch inside the window; `None` at the end.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, Stop>> {
        loop {
            if self.limit.is_some_and(|l| self.emitted >= l) {
                return None;
            }
            let next = tokio::select! {
                n = self.batches.next() => n,
                stop = self.limits.stopped() => return Some(Err(stop)),
            };
            let mut batch = match next? {
                Ok(b) => b,
                Err(e) => return Some(Err(Stop::Failed(e))),
            };
            if self.skipped < self.offset {
                let skip = (self.offset - self.skipped).min(batch.num_rows() as u64);
                self.skipped += skip;
                batch = batch.slice(skip as usize, batch.num_rows() - skip as usize);
            }
            if let Some(limit) = self.limit {
                let left = limit.saturating_sub(self.emitted);
                if (batch.num_rows() as u64) > left {
                    batch = batch.slice(0, left as usize);
                }
            }
            if batch.num_rows() > 0 {
                self.emitted += batch.num_rows() as u64;
                return Some(Ok(batch));
            }
        }
    }
}

/// Encodes batches of one result for a streamed format.
pub struct Encoder {
    format: OutFormat,
    names: Vec<String>,
    header_done: bool,
}

impl Encoder {
    /// An encoder for `format` (not Parquet) and the result's schema.
    pub fn new(format: OutFormat, schema: &Schema) -> Self {
        Self {
            format,
            names: schema.fields().iter().map(|f| f.name().clone()).collect(),
            header_done: false,
        }
    }

    /// One batch's bytes.
    pub fn batch(&mut self, batch: &RecordBatch) -> Result<Bytes, ApiError> {
        match self.format {
            OutFormat::Csv => {
                let mut buf = Vec::new();
                {
                    let mut w = arrow_csv::WriterBuilder::new()
                        .with_header(!self.header_done)
                        .build(&mut buf);
                    w.write(&csv_batch(&plain_batch(batch))?)
                        .map_err(|e| ApiError::BadRequest(format!("Conversion Error: {e}")))?;
                }
                self.header_done = true;
                Ok(Bytes::from(buf))
            }
            OutFormat::Ndjson | OutFormat::Jsonl | OutFormat::Parquet => {
                let options = FormatOptions::default().with_display_error(true);
                let writer = RowWriter::new(batch, &options);
                let mut out = String::new();
                for row in 0..batch.num_rows() {
                    if self.format == OutFormat::Jsonl {
                        writer.push_object_row(&mut out, &self.names, row);
                    } else {
                        writer.push_array_row(&mut out, row);
                    }
                }
                Ok(Bytes::from(out))
            }
        }
    }

    /// What ends a complete body: a CSV result without rows still has its header.
    pub fn finish(&mut self) -> Option<Bytes> {
        if self.format != OutFormat::Csv || self.header_done {
            return None;
        }
        self.header_done = true;
        let header = self
            .names
            .iter()
            .map(|n| csv_field(n))
            .collect::<Vec<_>>()
            .join(",");
        Some(Bytes::from(header + "\n"))
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Write the rest of a result (after `first`) as one Parquet file into `spool`; the file
/// is complete when this returns `Ok`.
pub async fn write_parquet(
    result: &mut ResultStream,
    first: Option<RecordBatch>,
    spool: &tempfile::NamedTempFile,
) -> Result<(), Stop> {
    let internal =
        |e: &dyn std::fmt::Display| Stop::Failed(ApiError::Internal(format!("spool: {e}")));
    let schema = plain_schema(&result.schema());
    let file = spool.reopen().map_err(|e| internal(&e))?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, Arc::clone(&schema), None)
        .map_err(|e| internal(&e))?;
    let mut next = first.map(Ok);
    loop {
        let batch = match next.take() {
            Some(b) => b,
            None => match result.next().await {
                Some(b) => b,
                None => break,
            },
        }?;
        writer
            .write(&plain_batch(&batch))
            .map_err(|e| internal(&e))?;
    }
    writer.close().map_err(|e| internal(&e))?;
    Ok(())
}

/// A batch for the CSV writer: lists, structs, maps and intervals as DuckDB's text
/// (`[1, NULL]`), which Arrow's CSV writer refuses or writes otherwise.
fn csv_batch(batch: &RecordBatch) -> Result<RecordBatch, ApiError> {
    use crate::sql::text_casts::{duckdb_text, written_otherwise};
    // Timestamps keep the CSV writer's own format.
    let as_text = |dt: &DataType| written_otherwise(dt) && !matches!(dt, DataType::Timestamp(..));
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| as_text(f.data_type())) {
        return Ok(batch.clone());
    }
    let conversion = |e: datafusion::error::DataFusionError| {
        ApiError::BadRequest(format!("Conversion Error: {e}"))
    };
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if written_otherwise(field.data_type())
            && !matches!(field.data_type(), DataType::Timestamp(..))
        {
            fields.push(Field::new(field.name(), DataType::Utf8, true));
            columns.push(duckdb_text(column).map_err(conversion)?);
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| ApiError::BadRequest(format!("Conversion Error: {e}")))
}
