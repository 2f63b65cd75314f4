//! `CommandStatementIngest` (bulk ingest): the client's Arrow batches are spooled to a
//! Parquet file as they arrive, then written by the one ingest flow every HTTP write
//! endpoint uses (`ingest::write`): one commit, a created table's rows in its first
//! version, a failure leaving no table behind.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::sql::server::PeekableFlightDataStream;
use arrow_flight::sql::{CommandStatementIngest, TableExistsOption, TableNotExistOption};
use deltalite::parquet::arrow::ArrowWriter;
use deltalite::parquet::errors::ParquetError;
use futures::{StreamExt, TryStreamExt};
use tonic::Status;

use super::result::status;
use super::session::Session;
use super::transaction::before_statement;
use crate::catalog::{DEFAULT_SCHEMA, TableName};
use crate::error::ApiError;
use crate::ingest::{self, Format, INGEST_ERR, IngestMode, IngestRequest, SpoolOrigin, UploadMode};
use crate::spool::spool_file;
use crate::sql::targets::Write;
use crate::state::AppState;

fn bad(msg: impl std::fmt::Display) -> Status {
    status(ApiError::BadRequest(format!("{INGEST_ERR}: {msg}")))
}

/// The ingest mode a command asks for: its table definition options, or an upsert when
/// the `primary_key` option (a JSON array of column names, `cursor_field` likewise) is set.
fn mode(cmd: &CommandStatementIngest, exists: bool) -> Result<IngestMode, Status> {
    let list = |key: &str| -> Result<Vec<String>, Status> {
        match cmd.options.get(key) {
            None => Ok(Vec::new()),
            Some(text) => serde_json::from_str::<Vec<String>>(text).map_err(|_| {
                bad(format!(
                    "option {key} must be a JSON array of column names, got {text:?}"
                ))
            }),
        }
    };
    let options = cmd.table_definition_options.unwrap_or_default();
    let if_not_exist = TableNotExistOption::try_from(options.if_not_exist)
        .unwrap_or(TableNotExistOption::Unspecified);
    let if_exists =
        TableExistsOption::try_from(options.if_exists).unwrap_or(TableExistsOption::Unspecified);
    if !exists && if_not_exist != TableNotExistOption::Create {
        return Err(bad(format!(
            "Catalog Error: Table with name {} does not exist!",
            cmd.table
        )));
    }
    let keys = list("primary_key")?;
    let cursor = list("cursor_field")?;
    if let Some(unknown) = cmd
        .options
        .keys()
        .find(|k| !matches!(k.as_str(), "primary_key" | "cursor_field"))
    {
        return Err(bad(format!(
            "unknown option {unknown:?} (expected primary_key, cursor_field)"
        )));
    }
    if !keys.is_empty() {
        if exists && if_exists == TableExistsOption::Fail {
            return Err(bad(format!(
                "Table with name {} already exists!",
                cmd.table
            )));
        }
        return Ok(IngestMode::Upsert {
            keys,
            cursor,
            delete_column: None,
        });
    }
    if !cursor.is_empty() {
        return Err(bad("cursor_field needs primary_key"));
    }
    Ok(IngestMode::Upload(match (if_not_exist, if_exists) {
        (_, TableExistsOption::Fail) if exists => {
            return Err(bad(format!(
                "Table with name {} already exists!",
                cmd.table
            )));
        }
        (TableNotExistOption::Create, TableExistsOption::Fail) => UploadMode::Create,
        (TableNotExistOption::Create, TableExistsOption::Append) => UploadMode::CreateAppend,
        (_, TableExistsOption::Append) => UploadMode::Append,
        (_, TableExistsOption::Replace) => UploadMode::Overwrite,
        _ => {
            return Err(bad(
                "table_definition_options must say what to do when the table exists and when it does not",
            ));
        }
    }))
}

/// The Arrow data of a DoPut stream. Messages without an IPC header (a first message
/// carrying only the descriptor, as clients send for statements without data) are
/// skipped rather than failing the decoder.
pub(super) fn arrow_data(
    stream: PeekableFlightDataStream,
) -> arrow_flight::decode::FlightRecordBatchStream {
    let messages = stream
        .try_filter(|m| std::future::ready(!m.data_header.is_empty()))
        .map_err(FlightError::from);
    arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(messages)
}

/// Run an ingest; the rows written.
pub async fn ingest(
    state: &Arc<AppState>,
    session: &Session,
    cmd: CommandStatementIngest,
    stream: PeekableFlightDataStream,
) -> Result<i64, Status> {
    if cmd.temporary {
        return Err(bad("temporary tables are not supported"));
    }
    let transaction = session.transaction(cmd.transaction_id.as_deref())?;
    let user = session.sql_user();
    let (default_catalog, default_schema) = session.defaults();
    let catalog = cmd
        .catalog
        .clone()
        .filter(|c| !c.is_empty())
        .or(default_catalog)
        .or_else(|| user.catalogs.first().cloned())
        .ok_or_else(|| bad("no catalog"))?;
    let schema = cmd
        .schema
        .clone()
        .filter(|s| !s.is_empty())
        .or(default_schema)
        .unwrap_or_else(|| DEFAULT_SCHEMA.into());
    let name = TableName::new(&catalog, &schema, &cmd.table).map_err(status)?;
    if !user.can_see(&name.catalog) {
        return Err(status(ApiError::NotFound(format!(
            "Catalog Error: Catalog with name {} does not exist!",
            name.catalog
        ))));
    }
    // In a transaction the table is pinned first and written through its view.
    let writes = [Write::Table(name.clone())];
    let storage = match &transaction {
        Some(id) => before_statement(&state.storage, session, id, &writes).await?,
        None => Arc::clone(&state.storage),
    };
    let exists = storage.table_exists(&name).await.map_err(status)?;
    let mode = mode(&cmd, exists)?;
    let spool = spool(state, stream).await?;
    let req = IngestRequest {
        name,
        spool,
        format: Format::Parquet,
        idempotency_key: None,
        spool_dir: state.config.spool_dir.clone(),
        origin: SpoolOrigin::Server,
    };
    // Detached from the call: a client that goes away mid-commit does not cut the write
    // short (the engine's commit is atomic either way; this keeps its cleanup running).
    let summary = tokio::spawn(async move { ingest::write(&storage, req, mode).await })
        .await
        .map_err(|e| Status::internal(format!("ingest task failed: {e}")));
    Ok(summary?.map_err(status)?.rows as i64)
}

/// The call's batches as one Parquet file in the spool directory, at most
/// `max_body_bytes` of Arrow data. The file is encoded as the engine encodes an append's
/// files, on a blocking thread while the next batches arrive and are decoded (encoding is
/// most of an ingest's server work; the two overlap on two cores).
async fn spool(
    state: &AppState,
    stream: PeekableFlightDataStream,
) -> Result<tempfile::NamedTempFile, Status> {
    let limit = state.config.max_body_bytes;
    let spool = spool_file(state.config.spool_dir.as_deref())
        .map_err(|e| Status::internal(format!("spool: {e}")))?;
    let file = spool
        .reopen()
        .map_err(|e| Status::internal(format!("spool: {e}")))?;
    // A few batches in flight: the decoder runs at most this far ahead of the encoder.
    let (tx, rx) = tokio::sync::mpsc::channel::<RecordBatch>(4);
    let encoder = tokio::task::spawn_blocking(move || encode(file, rx));
    let mut batches = arrow_data(stream);
    let mut held: u64 = 0;
    let decode = |e: FlightError| bad(format!("invalid Arrow data: {e}"));
    let received = async {
        while let Some(batch) = batches.next().await {
            let batch = batch.map_err(decode)?;
            held = held.saturating_add(deltalite::runtime::held::batch_bytes(&batch) as u64);
            if held > limit {
                return Err(status(ApiError::TooLarge(limit)));
            }
            if tx.send(batch).await.is_err() {
                // The encoder stopped: its error is the call's.
                break;
            }
        }
        Ok(())
    }
    .await;
    drop(tx);
    let encoded = encoder
        .await
        .map_err(|e| Status::internal(format!("spool: {e}")))?;
    received?;
    let writer = match encoded? {
        Some(w) => w,
        // No batch: the stream's schema alone (a table without rows).
        None => {
            let schema = batches
                .schema()
                .cloned()
                .ok_or_else(|| bad("no Arrow schema was sent"))?;
            let file = spool
                .reopen()
                .map_err(|e| Status::internal(format!("spool: {e}")))?;
            new_writer(file, schema)?
        }
    };
    writer.close().map_err(unspoolable)?;
    Ok(spool)
}

/// The encoder thread: every batch received into one Parquet writer over `file`; `None`
/// when no batch came.
fn encode(
    file: std::fs::File,
    mut batches: tokio::sync::mpsc::Receiver<RecordBatch>,
) -> Result<Option<ArrowWriter<std::fs::File>>, Status> {
    let Some(first) = batches.blocking_recv() else {
        return Ok(None);
    };
    let mut writer = new_writer(file, first.schema())?;
    let mut next = Some(first);
    while let Some(batch) = next {
        writer.write(&batch).map_err(unspoolable)?;
        next = batches.blocking_recv();
    }
    Ok(Some(writer))
}

fn new_writer(
    file: std::fs::File,
    schema: arrow::datatypes::SchemaRef,
) -> Result<ArrowWriter<std::fs::File>, Status> {
    ArrowWriter::try_new(file, schema, Some(deltalite::append_properties())).map_err(unspoolable)
}

/// A failure to encode the spool file: the disk's (full, over a file size limit) is the
/// server's, as on the HTTP paths; anything else (a batch whose schema differs from the
/// first's, a type Parquet cannot store) is the client's.
fn unspoolable(e: ParquetError) -> Status {
    match e {
        ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
            Ok(io) => status(ingest::io_err(*io)),
            Err(other) => bad(format!("cannot spool rows: {other}")),
        },
        e => bad(format!("cannot spool rows: {e}")),
    }
}
