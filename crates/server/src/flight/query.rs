//! Running a statement for a Flight SQL call: the same `SqlSession`, guards, memory pool,
//! query log and cancellation as HTTP `/query`.

use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::result::{Logged, Pending, status};
use super::session::Session;
use super::transaction::{after_statement, before_statement};
use crate::catalog::Storage;
use crate::output::Limits;
use crate::registry::{ClientInterface, QueryStart};
use crate::sql::{Output, SqlSession};
use crate::state::AppState;

/// Run `sql` in `session`: parse, guard, and execute DDL/DML now; a query is planned and
/// its stream returned (not yet pulled). The statement is logged as an `ArrowFlightSQL`
/// query, cancellable through the log (`DELETE /query/{id}`), within the query timeout.
/// `USE` and `SET schema` carry over to the session's later calls. In a transaction
/// (`transaction`: its id, already checked) the tables the statement writes are pinned
/// before it runs and it runs on the transaction's view of the data root, so its commits
/// are staged; its renames are noted and its drops move folders aside instead of
/// deleting them, for a rollback (`super::transaction`).
pub async fn run(
    state: &Arc<AppState>,
    session: &Session,
    sql: &str,
    transaction: Option<&[u8]>,
    user_agent: Option<String>,
) -> Result<Pending, Status> {
    let limits = Limits {
        token: CancellationToken::new(),
        deadline: tokio::time::Instant::now() + state.config.query_timeout,
    };
    let query_id = uuid::Uuid::new_v4().to_string();
    let start = Instant::now();
    state
        .queries()
        .start(
            QueryStart {
                interface: ClientInterface::ArrowFlightSQL,
                query_id: query_id.clone(),
                user: session.user.name.clone(),
                session_id: session.id.clone(),
                statement: sql.to_string(),
                start_time: chrono::Utc::now()
                    .to_rfc3339_opts(chrono::SecondsFormat::Micros, false),
                visible: true,
                requested_by: None,
                user_agent,
            },
            limits.token.clone(),
        )
        // A fresh random id cannot collide with another user's.
        .map_err(|taken| Status::internal(taken.to_string()))?;
    let log = Logged {
        state: Arc::clone(state),
        query_id: query_id.clone(),
        start,
        done: false,
    };
    let executed = async {
        let storage = match transaction {
            Some(id) => session.with_transaction(id, |t| t.storage())?,
            None => Arc::clone(&state.storage),
        };
        let mut sql_session = sql_session(state, session, Arc::clone(&storage))?;
        let mut writes = Vec::new();
        if let Some(id) = transaction {
            // The statement's writes, resolved against the session's defaults, pinned
            // before it reads them.
            writes = sql_session.writes(sql).map_err(status)?;
            before_statement(&state.storage, session, id, &writes).await?;
        }
        let dropped = Arc::new(std::sync::Mutex::new(Vec::new()));
        if transaction.is_some() {
            sql_session = sql_session.setting_drops_aside(Arc::clone(&dropped));
        }
        let output = tokio::select! {
            r = sql_session.run(sql) => r.map_err(status),
            stop = limits.stopped() => Err(status(stop.into_error())),
        };
        if let Some(id) = transaction {
            let dropped = match dropped.lock() {
                Ok(mut d) => std::mem::take(&mut *d),
                Err(p) => std::mem::take(&mut *p.into_inner()),
            };
            after_statement(session, id, &storage, &writes, dropped).await?;
        }
        let output = output?;
        let (c, s) = sql_session.defaults();
        session.set_defaults(Some(c.to_string()), Some(s.to_string()));
        Ok::<_, Status>(output)
    }
    .await;
    match executed {
        Ok(output @ Output::Batches(..)) => {
            let rows = match &output {
                Output::Batches(_, b) => b.iter().map(|b| b.num_rows() as u64).sum(),
                Output::Stream(_) => 0,
            };
            log.finish(rows, None);
            Ok(Pending {
                query_id,
                output,
                limits,
                log: None,
            })
        }
        Ok(output) => Ok(Pending {
            query_id,
            output,
            limits,
            log: Some(log),
        }),
        Err(e) => {
            log.finish(0, Some(e.message().to_string()));
            Err(e)
        }
    }
}

/// The schema `sql` will answer in `session` (plain types, as streamed), planned but not
/// run; `None` when only running can tell.
pub async fn result_schema(
    state: &Arc<AppState>,
    session: &Session,
    sql: &str,
    transaction: Option<&[u8]>,
) -> Result<Option<arrow::datatypes::SchemaRef>, Status> {
    // In a transaction, the tables it wrote are planned as it sees them.
    let storage = match transaction {
        Some(id) => session.with_transaction(id, |t| t.storage())?,
        None => Arc::clone(&state.storage),
    };
    let mut sql_session = sql_session(state, session, storage)?;
    let planned = tokio::time::timeout(state.config.query_timeout, sql_session.result_schema(sql))
        .await
        .map_err(|_| Status::deadline_exceeded("INTERRUPT Error: Query timed out"))?
        .map_err(status)?;
    Ok(planned.map(|s| crate::sql::plain::plain_schema(&s)))
}

/// Run a prepared statement with its bound values: once per bound row (a statement
/// without parameters once). Every run but the last is drained; the last one's result
/// is returned, with the rows all runs changed when they are DML.
pub async fn run_bound(
    state: &Arc<AppState>,
    session: &Session,
    sql: &str,
    bound: Option<&RecordBatch>,
    transaction: Option<&[u8]>,
    user_agent: Option<String>,
) -> Result<(Pending, Option<i64>), Status> {
    let parameters = crate::sql::params::parameters(sql).map_err(status)?;
    if parameters.is_empty() {
        let pending = run(state, session, sql, transaction, user_agent).await?;
        let affected = pending.affected_rows();
        return Ok((pending, affected));
    }
    let values = bound.filter(|b| b.num_rows() > 0).ok_or_else(|| {
        Status::invalid_argument(format!(
            "Invalid Input Error: the statement has {} parameter(s) and no values are bound",
            parameters.len()
        ))
    })?;
    // Several rows for a plain `INSERT … VALUES (?, …)` (DB-API's `executemany`): one
    // statement of many rows, one commit per chunk.
    let rows = values.num_rows();
    if rows > 1 {
        use crate::sql::params::{ROWS_PER_INSERT, bind_insert_rows};
        let chunks: Vec<_> = (0..rows)
            .step_by(ROWS_PER_INSERT)
            .map(|start| start..(start + ROWS_PER_INSERT).min(rows))
            .collect();
        if let Some(first) = bind_insert_rows(sql, values, chunks[0].clone()).map_err(status)? {
            let mut affected = 0;
            let mut statement = first;
            for (i, _) in chunks.iter().enumerate() {
                if i > 0 {
                    statement = bind_insert_rows(sql, values, chunks[i].clone())
                        .map_err(status)?
                        .ok_or_else(|| {
                            Status::internal("an INSERT that bound once did not again")
                        })?;
                }
                let pending =
                    run(state, session, &statement, transaction, user_agent.clone()).await?;
                affected += pending.affected_rows().unwrap_or(0);
                if i == chunks.len() - 1 {
                    return Ok((pending, Some(affected)));
                }
                pending.drain().await?;
            }
        }
    }
    let mut affected: Option<i64> = None;
    let last = values.num_rows() - 1;
    for row in 0..values.num_rows() {
        let bound_sql = crate::sql::params::bind(sql, values, row).map_err(status)?;
        let pending = run(state, session, &bound_sql, transaction, user_agent.clone()).await?;
        if let Some(n) = pending.affected_rows() {
            affected = Some(affected.unwrap_or(0) + n);
        }
        if row == last {
            return Ok((pending, affected));
        }
        pending.drain().await?;
    }
    Err(Status::internal("no row was run"))
}

/// A SQL session for `session` over `storage` (the data root, or a transaction's view).
fn sql_session(
    state: &Arc<AppState>,
    session: &Session,
    storage: Arc<Storage>,
) -> Result<SqlSession, Status> {
    let (catalog, schema) = session.defaults();
    Ok(SqlSession::new(
        storage,
        Arc::clone(&state.query_runtime),
        session.sql_user(),
        catalog.as_deref(),
        schema.as_deref(),
    )
    .map_err(status)?
    .with_attached(Arc::clone(&session.attached)))
}
