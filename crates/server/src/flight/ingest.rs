//! `CommandStatementIngest` (bulk ingest): the client's Arrow batches are spooled to a
//! Parquet file as they arrive, then written by the one ingest flow every HTTP write
//! endpoint uses (`ingest::write`): one commit, a created table's rows in its first
//! version, a failure leaving no table behind.

use std::sync::Arc;

use arrow_flight::error::FlightError;
use arrow_flight::sql::server::PeekableFlightDataStream;
use arrow_flight::sql::{CommandStatementIngest, TableExistsOption, TableNotExistOption};
use futures::{StreamExt, TryStreamExt};
use tonic::Status;

use super::result::status;
use super::session::Session;
use super::transaction::before_statement;
use crate::catalog::TableName;
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
        .unwrap_or_else(|| "main".into());
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
/// `max_body_bytes` of Arrow data.
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
    let mut batches = arrow_data(stream);
    let mut writer: Option<parquet::arrow::ArrowWriter<std::fs::File>> = None;
    let mut file = Some(file);
    let mut held: u64 = 0;
    let decode = |e: FlightError| bad(format!("invalid Arrow data: {e}"));
    while let Some(batch) = batches.next().await {
        let batch = batch.map_err(decode)?;
        held = held.saturating_add(batch.get_array_memory_size() as u64);
        if held > limit {
            return Err(status(ApiError::TooLarge(limit)));
        }
        if writer.is_none() {
            writer = Some(new_writer(&mut file, batch.schema())?);
        }
        if let Some(w) = writer.as_mut() {
            w.write(&batch)
                .map_err(|e| bad(format!("cannot spool rows: {e}")))?;
        }
    }
    let writer = match writer {
        Some(w) => w,
        // No batch: the stream's schema alone (a table without rows).
        None => {
            let schema = batches
                .schema()
                .cloned()
                .ok_or_else(|| bad("no Arrow schema was sent"))?;
            new_writer(&mut file, schema)?
        }
    };
    writer
        .close()
        .map_err(|e| bad(format!("cannot spool rows: {e}")))?;
    Ok(spool)
}

fn new_writer(
    file: &mut Option<std::fs::File>,
    schema: arrow::datatypes::SchemaRef,
) -> Result<parquet::arrow::ArrowWriter<std::fs::File>, Status> {
    let file = file
        .take()
        .ok_or_else(|| Status::internal("spool: the file was already used"))?;
    parquet::arrow::ArrowWriter::try_new(file, schema, None)
        .map_err(|e| bad(format!("cannot spool rows: {e}")))
}
