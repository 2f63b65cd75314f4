//! The Arrow Flight SQL endpoint (gRPC, `--flight-listen`): Altertable's second
//! interface, used by its Python Flight client, its dbt adapter and ADBC.
//!
//! Built on `arrow-flight`'s `FlightSqlService` and tonic. It drives the same
//! protocol-independent SQL layer as HTTP `/query` (`sql::SqlSession`: parsing, the
//! guards, DDL/DML through the engine), with the same users and grants, the same query
//! memory pool, query log and cancellation, and the same ingest flow for bulk ingest.
//!
//! - `session.rs`: handshake, bearer tokens and the per-connection state.
//! - `query.rs`: running statements.
//! - `result.rs`: results until their DoGet, streamed; the query log; statuses.
//! - `metadata.rs`: catalogs, schemas, tables, table types, SQL info.
//! - `ingest.rs`: `CommandStatementIngest`.
//! - `messages.rs`: the session-option messages `arrow-flight` does not generate.

mod ingest;
mod messages;
mod metadata;
mod query;
mod result;
mod session;
mod transaction;

pub use session::{MAX_BOUND_BYTES, MAX_PENDING, MAX_PREPARED, SESSION_EXPIRED};

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::server::{DoPutError, FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionBeginTransactionRequest, ActionBeginTransactionResult,
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, ActionEndTransactionRequest, Any, CommandGetCatalogs,
    CommandGetDbSchemas, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandGetXdbcTypeInfo, CommandPreparedStatementQuery, CommandPreparedStatementUpdate,
    CommandStatementIngest, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, EndTransaction, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse,
    IpcMessage, SchemaAsIpc, Ticket,
};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use crate::catalog::{DEFAULT_SCHEMA, validate_name};
use crate::error::ApiError;
use crate::sql::SqlSession;
use crate::state::AppState;
use messages::{
    CLOSED, CloseSessionResult, GetSessionOptionsResult, INVALID_NAME, INVALID_VALUE,
    SessionOptionValue, SetSessionOptionsError, SetSessionOptionsRequest, SetSessionOptionsResult,
    session_option_value::OptionValue,
};
pub use result::status;
use session::{Caller, Prepared, Session, Sessions};

/// Largest gRPC message the endpoint accepts or sends (one Arrow batch of an ingest or of
/// bound parameters; results are cut into messages far below it). The clients allow
/// 512 MiB.
pub const MAX_MESSAGE_BYTES: usize = 512 * deltalite::MIB;

/// Compute sizes `SetSessionOptions` accepts (Altertable's; they change nothing here: one
/// server, one memory pool).
const COMPUTE_SIZES: [&str; 8] = ["XS", "S", "M", "L", "XL", "2XL", "3XL", "4XL"];

/// The Flight SQL service.
pub struct FlightSql {
    state: Arc<AppState>,
    sessions: Arc<Sessions>,
}

/// Serve Flight SQL on `listener` until `shutdown` resolves, then let running calls end.
pub async fn serve(
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let sessions = Arc::new(Sessions::new(
        Arc::clone(&state.storage),
        state.config.flight_session_idle_timeout,
        state.config.flight_max_sessions,
    ));
    let sweeper = {
        let sessions = Arc::clone(&sessions);
        let every = (state.config.flight_session_idle_timeout / 4)
            .clamp(Duration::from_secs(1), Duration::from_secs(30));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                sessions.sweep();
            }
        })
    };
    let service = FlightServiceServer::new(FlightSql {
        state,
        sessions: Arc::clone(&sessions),
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let server = tonic::transport::Server::builder()
        // HTTP/2's default receive window is 64 KiB a stream: a client's bulk ingest
        // (DoPut) waited for a window update every 64 KiB. A few MiB let it stream;
        // what one stream can have in flight stays bounded.
        .initial_stream_window_size(FLIGHT_STREAM_WINDOW_BYTES)
        .initial_connection_window_size(FLIGHT_CONNECTION_WINDOW_BYTES)
        // Every call carries a request id (the client's `x-request-id`, else a new one),
        // echoed in the response metadata and on every log line of the call.
        .layer(
            tower::ServiceBuilder::new()
                .layer(crate::request_id::set())
                .layer(
                    tower_http::trace::TraceLayer::new_for_grpc()
                        .make_span_with(rpc_span)
                        .on_request(())
                        .on_response(rpc_done)
                        .on_body_chunk(())
                        .on_eos(())
                        .on_failure(()),
                )
                .layer(crate::request_id::propagate()),
        )
        .add_service(service);
    let served = match tls {
        None => {
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            server
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
        Some(tls) => {
            server
                .serve_with_incoming_shutdown(tls_incoming(listener, tls), shutdown)
                .await
        }
    };
    sweeper.abort();
    served
}

/// The span of one Flight call: its request id and method.
fn rpc_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    tracing::info_span!(
        "rpc",
        request_id = crate::request_id::of(request.headers()),
        method = request.uri().path()
    )
}

/// The log line of a finished call (its headers; a streamed result's own status comes
/// in its trailers), in the call's span.
fn rpc_done<B>(response: &axum::http::Response<B>, latency: Duration, _span: &tracing::Span) {
    let grpc_status = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("0");
    tracing::info!(grpc_status, ms = latency.as_millis() as u64, "rpc");
}

/// TLS connections from `listener`, each handshake on its own task (a slow client does
/// not hold up the others; handshakes are bounded by the HTTP listener's header timeout).
fn tls_incoming(
    listener: tokio::net::TcpListener,
    tls: tokio_rustls::TlsAcceptor,
) -> impl Stream<Item = Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>, std::io::Error>>
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "flight accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                // The server stopped taking connections.
                _ = tx.closed() => return,
            };
            let _ = stream.set_nodelay(true);
            let (tls, tx) = (tls.clone(), tx.clone());
            tokio::spawn(async move {
                if let Some(stream) =
                    crate::tls::handshake(&tls, stream, crate::HEADER_READ_TIMEOUT).await
                {
                    let _ = tx.send(Ok(stream)).await;
                }
            });
        }
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// HTTP/2 receive window of one Flight stream (see `serve`).
const FLIGHT_STREAM_WINDOW_BYTES: u32 = 4 * 1024 * 1024;
/// HTTP/2 receive window of one Flight connection, across its streams.
const FLIGHT_CONNECTION_WINDOW_BYTES: u32 = 8 * 1024 * 1024;

type DataStream = Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send>>;

fn user_agent<T>(request: &Request<T>) -> Option<String> {
    request
        .metadata()
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

/// A FlightInfo whose one endpoint's ticket is `ticket` (fetched from this server).
fn flight_info(
    schema: &Schema,
    ticket: impl ProstMessageExt,
    descriptor: FlightDescriptor,
    total_records: i64,
) -> Result<Response<FlightInfo>, Status> {
    let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec()));
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(format!("result schema: {e}")))?
        .with_endpoint(endpoint)
        .with_descriptor(descriptor)
        .with_total_records(total_records)
        .with_ordered(true);
    Ok(Response::new(info))
}

/// One materialized batch as a DoGet stream.
fn batch_stream(batch: RecordBatch) -> Response<DataStream> {
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(batch.schema())
        .build(futures::stream::once(async { Ok::<_, FlightError>(batch) }))
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

/// The record batches of a DoPut stream, in memory, at most `limit` bytes.
async fn read_batches(
    stream: PeekableFlightDataStream,
    limit: usize,
) -> Result<Vec<RecordBatch>, Status> {
    let mut decoded = ingest::arrow_data(stream);
    let mut out = Vec::new();
    let mut held = 0usize;
    while let Some(batch) = decoded.next().await {
        let batch = batch.map_err(|e| {
            Status::invalid_argument(format!("Invalid Input Error: invalid Arrow data: {e}"))
        })?;
        held = held.saturating_add(deltalite::runtime::held::batch_bytes(&batch));
        if held > limit {
            return Err(status(ApiError::TooLarge(limit as u64)));
        }
        out.push(batch);
    }
    Ok(out)
}

/// Bound values sent as several batches, as one.
fn concat(batches: Vec<RecordBatch>) -> Result<Option<RecordBatch>, Status> {
    let Some(first) = batches.first() else {
        return Ok(None);
    };
    let schema = first.schema();
    arrow::compute::concat_batches(&schema, &batches)
        .map(Some)
        .map_err(|e| Status::invalid_argument(format!("Invalid Input Error: bound values: {e}")))
}

/// A message sent raw, or (as some clients do for every action) packed in an `Any`.
fn decode_action_body<M: Message + Default>(body: &[u8], type_name: &str) -> Result<M, Status> {
    if let Ok(any) = Any::decode(body)
        && any.type_url.ends_with(type_name)
        && let Ok(m) = M::decode(any.value.as_ref())
    {
        return Ok(m);
    }
    M::decode(body).map_err(|e| {
        Status::invalid_argument(format!("Invalid Input Error: malformed {type_name}: {e}"))
    })
}

fn option_string(value: &SessionOptionValue) -> Option<&str> {
    match &value.option_value {
        Some(OptionValue::StringValue(s)) => Some(s.as_str()),
        _ => None,
    }
}

impl FlightSql {
    fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        self.sessions.caller(&self.state.auth, request.metadata())
    }

    fn session<T>(&self, request: &Request<T>) -> Result<Arc<Session>, Status> {
        Ok(Arc::clone(self.caller(request)?.session()))
    }

    /// Execute `sql` and keep its result for the DoGet of the returned FlightInfo.
    async fn statement_info(
        &self,
        session: &Session,
        pending: result::Pending,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = pending.schema();
        let total = pending.total_records();
        let query_id = pending.query_id.clone();
        let id = session.keep_result(pending);
        let mut info = flight_info(
            &schema,
            TicketStatementQuery {
                statement_handle: id.into(),
            },
            descriptor,
            total,
        )?;
        // The statement's query log id: `GET /query/{id}` shows it, `DELETE` cancels it.
        let info_ref = info.get_mut();
        info_ref.app_metadata = query_id.into_bytes().into();
        Ok(info)
    }

    /// `SetSessionOptions`: `catalog` (applied first), `schema` (in the catalog just set),
    /// `compute_size`; each refused option is named in the result's `errors`.
    async fn set_session_options(
        &self,
        session: &Session,
        body: &[u8],
    ) -> Result<SetSessionOptionsResult, Status> {
        let req: SetSessionOptionsRequest = decode_action_body(body, "SetSessionOptionsRequest")?;
        let user = session.sql_user();
        let (mut catalog, mut schema) = session.defaults();
        let mut errors = HashMap::new();
        let mut refuse = |name: &str, value: i32| {
            errors.insert(name.to_string(), SetSessionOptionsError { value });
        };
        if let Some(value) = req.session_options.get("catalog") {
            match option_string(value) {
                Some(c) if user.can_see(c) => {
                    if catalog.as_deref() != Some(c) {
                        // Like `USE catalog`: its `main` schema, unless a schema is set too.
                        catalog = Some(c.to_string());
                        schema = None;
                    }
                }
                None if value.option_value.is_none() => {
                    catalog = None;
                    schema = None;
                }
                _ => refuse("catalog", INVALID_VALUE),
            }
        }
        if let Some(value) = req.session_options.get("schema") {
            match option_string(value) {
                Some(s) => {
                    let c = catalog
                        .clone()
                        .or_else(|| user.catalogs.first().cloned())
                        .unwrap_or_default();
                    let exists = validate_name("schema", s).is_ok()
                        && user.can_see(&c)
                        && (s == DEFAULT_SCHEMA
                            || self
                                .state
                                .storage
                                .schema_exists(&c, s)
                                .await
                                .map_err(status)?);
                    if exists {
                        schema = Some(s.to_string());
                    } else {
                        refuse("schema", INVALID_VALUE);
                    }
                }
                None if value.option_value.is_none() => schema = None,
                None => refuse("schema", INVALID_VALUE),
            }
        }
        for (name, value) in &req.session_options {
            match name.as_str() {
                "catalog" | "schema" => {}
                "compute_size" => {
                    let known = option_string(value).is_some_and(|v| {
                        COMPUTE_SIZES
                            .iter()
                            .any(|s| s.eq_ignore_ascii_case(v.trim()))
                    });
                    if !known && value.option_value.is_some() {
                        refuse("compute_size", INVALID_VALUE);
                    }
                }
                other => refuse(other, INVALID_NAME),
            }
        }
        session.set_defaults(catalog, schema);
        Ok(SetSessionOptionsResult { errors })
    }

    fn get_session_options(&self, session: &Session) -> GetSessionOptionsResult {
        let user = session.sql_user();
        let (catalog, schema) = session.defaults();
        let string = |s: String| SessionOptionValue {
            option_value: Some(OptionValue::StringValue(s)),
        };
        let mut options = HashMap::new();
        if let Some(c) = catalog.or_else(|| user.catalogs.first().cloned()) {
            options.insert("catalog".to_string(), string(c));
        }
        options.insert(
            "schema".to_string(),
            string(schema.unwrap_or_else(|| DEFAULT_SCHEMA.into())),
        );
        GetSessionOptionsResult {
            session_options: options,
        }
    }
}

type ActionStream = BoxStream<'static, Result<arrow_flight::Result, Status>>;

fn one_result(body: Vec<u8>) -> Response<ActionStream> {
    Response::new(
        futures::stream::once(async move { Ok(arrow_flight::Result { body: body.into() }) })
            .boxed(),
    )
}

#[tonic::async_trait]
impl FlightSqlService for FlightSql {
    type FlightService = FlightSql;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let token = self.sessions.open(&self.state.auth, request.metadata())?;
        let header = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|e| Status::internal(format!("token header: {e}")))?;
        let payload = HandshakeResponse {
            protocol_version: 0,
            payload: token.into_bytes().into(),
        };
        let stream = futures::stream::once(async move { Ok(payload) });
        let mut response: Response<
            Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>,
        > = Response::new(Box::pin(stream));
        // The clients take the token from this response header (initial metadata).
        response.metadata_mut().insert("authorization", header);
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        cmd: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let session = self.session(&request)?;
        let transaction = session.transaction(cmd.transaction_id.as_deref())?;
        // Executed now: DDL and DML take effect here (ADBC never fetches their results);
        // a query's stream is planned here and pulled by the DoGet.
        let pending = query::run(
            &self.state,
            &session,
            &cmd.query,
            transaction.as_deref(),
            user_agent(&request),
        )
        .await?;
        self.statement_info(&session, pending, request.into_inner())
            .await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let session = self.session(&request)?;
        let handle = cmd.prepared_statement_handle.to_vec();
        let (sql, bound) = session.prepared(&handle)?;
        let transaction = session.prepared_transaction(&handle)?;
        let transaction = session.transaction(transaction.as_deref())?;
        let parameters = crate::sql::params::parameters(&sql).map_err(status)?;
        // Values bound since the statement last ran (ADBC binds, then asks for the
        // FlightInfo) run now, like a statement without parameters: DDL and DML take
        // effect here, whether or not a DoGet follows.
        let fresh = session.take_fresh(&handle)?;
        if parameters.is_empty() || fresh.is_some() {
            let (pending, _) = query::run_bound(
                &self.state,
                &session,
                &sql,
                fresh.as_ref(),
                transaction.as_deref(),
                user_agent(&request),
            )
            .await?;
            return self
                .statement_info(&session, pending, request.into_inner())
                .await;
        }
        // No values yet, or only ones a run already used: altertable-flightsql asks for
        // the FlightInfo first and binds after it (for every run of the same handle), so
        // the statement runs at the DoGet, with the values bound by then. The schema
        // announced is its plan's with the values bound now, if any.
        let schema = match bound.as_ref().filter(|b| b.num_rows() > 0) {
            Some(values) => {
                let bound_sql = crate::sql::params::bind(&sql, values, 0).map_err(status)?;
                query::result_schema(&self.state, &session, &bound_sql, transaction.as_deref())
                    .await?
            }
            None => None,
        };
        let schema = schema.unwrap_or_else(|| Arc::new(Schema::empty()));
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn get_flight_info_catalogs(
        &self,
        cmd: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.session(&request)?;
        let schema = cmd.into_builder().schema();
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn get_flight_info_schemas(
        &self,
        cmd: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.session(&request)?;
        let schema = cmd.clone().into_builder().schema();
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn get_flight_info_tables(
        &self,
        cmd: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.session(&request)?;
        let schema = cmd.clone().into_builder().schema();
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn get_flight_info_table_types(
        &self,
        cmd: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.session(&request)?;
        let schema = cmd.into_builder().schema();
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn get_flight_info_sql_info(
        &self,
        cmd: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.session(&request)?;
        let data = metadata::SQL_INFO
            .as_ref()
            .map_err(|e| Status::internal(e.clone()))?;
        let schema = cmd.clone().into_builder(data).schema();
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        cmd: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.session(&request)?;
        let data = metadata::XDBC_TYPES
            .as_ref()
            .map_err(|e| Status::internal(e.clone()))?;
        let schema = cmd.into_builder(data).schema();
        flight_info(&schema, cmd, request.into_inner(), -1)
    }

    async fn do_get_xdbc_type_info(
        &self,
        cmd: CommandGetXdbcTypeInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        self.session(&request)?;
        Ok(batch_stream(metadata::xdbc_types(cmd)?))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        let session = self.session(&request)?;
        let pending = session
            .take_result(&ticket.statement_handle)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "Invalid Input Error: unknown ticket (a result is fetched once, by the session \
                 that asked for it; a session keeps its {MAX_PENDING} newest unfetched results)"
                ))
            })?;
        Ok(Response::new(pending.into_flight_data()))
    }

    async fn do_get_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        let session = self.session(&request)?;
        let (sql, _) = session.prepared(&cmd.prepared_statement_handle)?;
        let transaction = session.prepared_transaction(&cmd.prepared_statement_handle)?;
        let transaction = session.transaction(transaction.as_deref())?;
        let bound = session.use_bound(&cmd.prepared_statement_handle)?;
        let (pending, _) = query::run_bound(
            &self.state,
            &session,
            &sql,
            bound.as_ref(),
            transaction.as_deref(),
            user_agent(&request),
        )
        .await?;
        Ok(Response::new(pending.into_flight_data()))
    }

    async fn do_get_catalogs(
        &self,
        cmd: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        let session = self.session(&request)?;
        Ok(batch_stream(metadata::catalogs(&session.sql_user(), cmd)?))
    }

    async fn do_get_schemas(
        &self,
        cmd: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        let session = self.session(&request)?;
        let batch = metadata::schemas(&self.state.storage, &session.sql_user(), cmd).await?;
        Ok(batch_stream(batch))
    }

    async fn do_get_tables(
        &self,
        cmd: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        let session = self.session(&request)?;
        let batch = metadata::tables(&self.state, &session.sql_user(), cmd).await?;
        Ok(batch_stream(batch))
    }

    async fn do_get_table_types(
        &self,
        cmd: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        self.session(&request)?;
        Ok(batch_stream(metadata::table_types(cmd)?))
    }

    async fn do_get_sql_info(
        &self,
        cmd: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DataStream>, Status> {
        self.session(&request)?;
        Ok(batch_stream(metadata::sql_info(cmd)?))
    }

    async fn do_put_statement_update(
        &self,
        cmd: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let session = self.session(&request)?;
        let transaction = session.transaction(cmd.transaction_id.as_deref())?;
        let agent = user_agent(&request);
        // The statement carries no data; whatever the client sent is read and ignored.
        let mut input = request.into_inner();
        while let Some(message) = input.next().await {
            message?;
        }
        let pending = query::run(
            &self.state,
            &session,
            &cmd.query,
            transaction.as_deref(),
            agent,
        )
        .await?;
        update_count(pending, None).await
    }

    async fn do_put_statement_ingest(
        &self,
        cmd: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let session = self.session(&request)?;
        ingest::ingest(&self.state, &session, cmd, request.into_inner()).await
    }

    /// A `DoPut` with no message at all, or whose first message names no command: the
    /// Go ADBC driver sends nothing for an ingest of zero rows, so there is no table to
    /// name (a client's mistake, not a missing feature); nothing was written.
    async fn do_put_error_callback(
        &self,
        _request: Request<PeekableFlightDataStream>,
        error: DoPutError,
    ) -> Result<Response<<Self as FlightService>::DoPutStream>, Status> {
        Err(Status::invalid_argument(match error {
            DoPutError::MissingCommand => {
                "Invalid Input Error: the DoPut stream holds no message, so no command: \
                 nothing was written (an ADBC ingest of zero rows sends none)"
            }
            DoPutError::MissingFlightDescriptor => {
                "Invalid Input Error: the DoPut stream's first message has no flight \
                 descriptor, so no command: nothing was written"
            }
        }))
    }

    async fn do_put_prepared_statement_query(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let session = self.session(&request)?;
        let handle = cmd.prepared_statement_handle.to_vec();
        session.parameters(&handle)?;
        let batches = read_batches(request.into_inner(), MAX_BOUND_BYTES).await?;
        if let Some(values) = concat(batches)? {
            session.bind(&handle, values)?;
        }
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(cmd.prepared_statement_handle),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        cmd: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let session = self.session(&request)?;
        let agent = user_agent(&request);
        let (sql, _) = session.prepared(&cmd.prepared_statement_handle)?;
        let transaction = session.prepared_transaction(&cmd.prepared_statement_handle)?;
        let transaction = session.transaction(transaction.as_deref())?;
        let bound = session.use_bound(&cmd.prepared_statement_handle)?;
        // The values travel with the call (one execution per row), else the ones bound
        // before.
        let sent = concat(read_batches(request.into_inner(), MAX_BOUND_BYTES).await?)?
            .filter(|b| b.num_rows() > 0);
        let values = sent.or(bound);
        let (pending, affected) = query::run_bound(
            &self.state,
            &session,
            &sql,
            values.as_ref(),
            transaction.as_deref(),
            agent,
        )
        .await?;
        update_count(pending, affected).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        cmd: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let session = self.session(&request)?;
        // A transaction named must be the open one; the statement runs in whichever is
        // open when it runs (`Session::prepared_transaction`).
        session.transaction(cmd.transaction_id.as_deref())?;
        // Syntax and the statement guard answer now, as a database's PREPARE does.
        SqlSession::parse_script(&cmd.query).map_err(status)?;
        let parameters = crate::sql::params::parameters(&cmd.query).map_err(status)?;
        let parameter_schema = if parameters.is_empty() {
            bytes::Bytes::new()
        } else {
            // One uniquely named field per parameter; the type is the value's own (any).
            let schema = Schema::new(
                parameters
                    .iter()
                    .map(|p| {
                        arrow::datatypes::Field::new(
                            p.field_name(),
                            arrow::datatypes::DataType::Null,
                            true,
                        )
                    })
                    .collect::<Vec<_>>(),
            );
            let message: Result<IpcMessage, _> =
                SchemaAsIpc::new(&schema, &arrow::ipc::writer::IpcWriteOptions::default())
                    .try_into();
            message
                .map_err(|e| Status::internal(format!("parameter schema: {e}")))?
                .0
        };
        let handle = session.prepare(Prepared {
            sql: cmd.query,
            parameters,
            bound: None,
            fresh: false,
        });
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema: bytes::Bytes::new(),
            parameter_schema,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        cmd: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        let session = self.session(&request)?;
        session.close_prepared(&cmd.prepared_statement_handle);
        Ok(())
    }

    async fn do_action_begin_transaction(
        &self,
        _cmd: ActionBeginTransactionRequest,
        request: Request<Action>,
    ) -> Result<ActionBeginTransactionResult, Status> {
        let session = self.session(&request)?;
        Ok(ActionBeginTransactionResult {
            transaction_id: session.begin(&self.state.storage)?.into(),
        })
    }

    async fn do_action_end_transaction(
        &self,
        cmd: ActionEndTransactionRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        let session = self.session(&request)?;
        let commit = match EndTransaction::try_from(cmd.action) {
            Ok(EndTransaction::Commit) => true,
            Ok(EndTransaction::Rollback) => false,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "Invalid Input Error: EndTransaction action {} is neither COMMIT (1) nor ROLLBACK (2)",
                    cmd.action
                )));
            }
        };
        let transaction = session.end(&cmd.transaction_id)?;
        if commit {
            return transaction.commit(&self.state.storage).await;
        }
        transaction.rollback(&self.state.storage).await
    }

    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<Response<<Self as FlightService>::DoActionStream>, Status> {
        let session = self.session(&request)?;
        let action = request.into_inner();
        match action.r#type.as_str() {
            "SetSessionOptions" => {
                let result = self.set_session_options(&session, &action.body).await?;
                Ok(one_result(result.encode_to_vec()))
            }
            "GetSessionOptions" => Ok(one_result(
                self.get_session_options(&session).encode_to_vec(),
            )),
            "CloseSession" => {
                // An open transaction is rolled back before the close is answered.
                if let Some(t) = session.take_transaction()
                    && let Err(e) = t.rollback(&self.state.storage).await
                {
                    tracing::warn!(error = %e.message(), "rolling back a closing session's transaction");
                }
                self.sessions.close(&session);
                Ok(one_result(
                    CloseSessionResult { status: CLOSED }.encode_to_vec(),
                ))
            }
            other => Err(Status::unimplemented(format!(
                "Not implemented Error: action {other:?} is not supported"
            ))),
        }
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// What a statement run through DoPut answers: the rows DML changed; `0` for DDL; `-1`
/// (unknown) for a query, which is run to its end first (its errors are the call's).
async fn update_count(pending: result::Pending, affected: Option<i64>) -> Result<i64, Status> {
    if let Some(n) = affected.or_else(|| pending.affected_rows()) {
        return Ok(n);
    }
    let is_status = pending.total_records() >= 0;
    pending.drain().await?;
    Ok(if is_status { 0 } else { -1 })
}
