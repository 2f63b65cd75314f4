//! SQL over the Delta tables through DataFusion, DuckDB-flavoured.
//!
//! Queries are planned by DataFusion against a per-request catalog that holds only the
//! tables the statement names (resolved before planning, so only granted catalogs are
//! reachable and nothing else: no URL tables, no external tables, no COPY). DDL and DML are
//! executed here, each as one Delta commit through the engine or delta-rs.

mod aggregates;
mod analyzer;
mod arithmetic;
mod cast_names;
mod catalog_view;
mod collations;
mod column_case;
mod date_bounds;
mod ddl;
mod defaults;
mod dialect;
mod dml;
mod duckdb_catalog;
mod format;
mod guard;
mod info_schema;
mod json;
mod json_build;
mod lambdas;
mod lateral_aliases;
mod layout;
pub mod maintenance;
mod merge;
mod names;
mod normalize;
mod overrides;
pub mod params;
mod physical;
mod pivot;
pub mod plain;
mod power;
mod regexps;
mod relations;
mod resolve;
mod result_types;
mod rewrite;
mod sample;
mod scalar_subqueries;
mod scan;
mod set_operations;
mod show;
mod star_columns;
pub mod stores;
mod strings;
mod strptime;
mod summarize;
pub mod targets;
mod temp;
mod temporal;
pub mod text_casts;
pub mod time_travel;
mod time_zones;
mod timestamp_text;
mod type_dispatch;
mod type_planner;
mod udf;
mod using_joins;
mod vector_scan;
mod views;

pub use guard::{MAX_EXPR_DEPTH, MAX_SET_OPERATIONS};

/// The session's time zone: `TIMESTAMP WITH TIME ZONE` values are UTC, as tables store them.
const SESSION_TIME_ZONE: &str = "+00:00";

use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::MemoryCatalogProvider;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, DescribeAlias, Ident, ObjectName, ObjectNamePart, RenameTableNameKind,
    Statement,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::ParserError;
use futures::TryStreamExt;

use crate::auth::User;
use crate::catalog::{DEFAULT_SCHEMA, Storage, validate_name};
use crate::error::ApiError;

/// One statement of a request.
#[derive(Debug)]
pub enum Parsed {
    /// SQL that DataFusion's parser reads.
    Sql(DFStatement),
    /// One of Delta's table statements (`OPTIMIZE`, `VACUUM`, `DESCRIBE HISTORY`,
    /// `RESTORE`).
    Delta(maintenance::DeltaStatement),
}

impl std::fmt::Display for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Parsed::Sql(s) => s.fmt(f),
            Parsed::Delta(d) => d.fmt(f),
        }
    }
}

/// The result of the last statement of a request.
pub enum Output {
    /// A query's record-batch stream (bounded memory).
    Stream(SendableRecordBatchStream),
    /// A small materialized result (DDL/DML status).
    Batches(SchemaRef, Vec<RecordBatch>),
}

impl Output {
    /// Schema of the result.
    pub fn schema(&self) -> SchemaRef {
        match self {
            Output::Stream(s) => s.schema(),
            Output::Batches(s, _) => Arc::clone(s),
        }
    }

    /// The rows a DML statement (`INSERT`, `UPDATE`, `DELETE`, `MERGE`) changed: its
    /// `Count` result. `None` for every other result (DDL status, query rows).
    pub fn affected_rows(&self) -> Option<i64> {
        let Output::Batches(schema, batches) = self else {
            return None;
        };
        if schema.fields().len() != 1 || schema.field(0).name() != COUNT_COLUMN {
            return None;
        }
        let counts = batches
            .first()?
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()?;
        (counts.len() == 1).then(|| counts.value(0))
    }
}

/// The column of a DML statement's result: how many rows it changed.
const COUNT_COLUMN: &str = "Count";

/// Catalogs a client attached for the length of its connection (`ATTACH ':memory:' AS
/// name`), for a protocol whose sessions outlive one request (Flight SQL). Each is a
/// scratch catalog in storage (`catalog::Storage::create_scratch_catalog`), visible only
/// to the sessions holding this list; the owner of the list removes them when the
/// connection ends. A [`SqlSession`] without one refuses `ATTACH`.
#[derive(Debug, Default)]
pub struct Attached {
    names: Mutex<Vec<String>>,
    /// The session's temporary tables (`sql/temp.rs`).
    temp: Mutex<temp::TempTables>,
}

impl Attached {
    /// Most catalogs one connection may attach.
    pub const MAX: usize = 16;

    /// The attached catalogs' names.
    pub fn names(&self) -> Vec<String> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // A list of names stays consistent if a holder panicked.
        match self.names.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

pub(crate) fn sql_err(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

/// DuckDB's error classes, as its messages begin.
const ERROR_CLASSES: [&str; 9] = [
    "Binder Error: ",
    "Catalog Error: ",
    "Constraint Error: ",
    "Conversion Error: ",
    "Invalid Input Error: ",
    "Not implemented Error: ",
    "Out of Range Error: ",
    "Parser Error: ",
    "Permission Error: ",
];

/// A DataFusion error as the client sees it, with DuckDB's error class names; transient
/// storage failures underneath answer `503`.
pub fn sql_error(e: datafusion::error::DataFusionError) -> ApiError {
    use datafusion::error::DataFusionError as E;
    let msg = match e.find_root() {
        E::SQL(err, _) => parser_message(err),
        E::Plan(m) => format!("Binder Error: {m}"),
        E::SchemaError(err, _) => format!("Binder Error: {err}"),
        E::NotImplemented(m) => format!("Not implemented Error: {m}"),
        // A function's message that names its DuckDB class keeps it.
        E::Execution(m) if ERROR_CLASSES.iter().any(|c| m.starts_with(c)) => m.clone(),
        E::Execution(m) => format!("Invalid Input Error: {m}"),
        E::ArrowError(err, _) => match err.as_ref() {
            arrow::error::ArrowError::ArithmeticOverflow(m) => format!("Out of Range Error: {m}"),
            // DuckDB's words (an `Invalid Input Error` there too), not a conversion's.
            arrow::error::ArrowError::DivideByZero => {
                "Invalid Input Error: Division by zero".into()
            }
            err => format!("Conversion Error: {err}"),
        },
        other => other.to_string(),
    };
    ApiError::from_failure(&e, msg, ApiError::BadRequest)
}

/// A parser failure as DuckDB words it (`syntax error at or near "limit"`, which
/// clients and dbt's conformance suite look for), with sqlparser's own account after it.
pub(crate) fn parser_message(e: &ParserError) -> String {
    let text = match e {
        ParserError::ParserError(m) | ParserError::TokenizerError(m) => m,
        ParserError::RecursionLimitExceeded => return format!("Parser Error: {e}"),
    };
    let Some((_, found)) = text.split_once("found: ") else {
        return format!("Parser Error: {text}");
    };
    let token = found.split_once(" at Line: ").map_or(found, |(t, _)| t);
    if token == "EOF" {
        format!("Parser Error: syntax error at end of input ({text})")
    } else {
        format!("Parser Error: syntax error at or near \"{token}\" ({text})")
    }
}

/// A parser failure as the client sees it.
pub(crate) fn parse_error(e: &ParserError) -> ApiError {
    sql_err(parser_message(e))
}

/// Whether a statement failed because the query memory pool refused a reservation.
/// By its text: the engine carries a source stream's failure as a message, so DataFusion's
/// `ResourcesExhausted` variant does not survive to here, its `Display` prefix does.
fn is_resources_exhausted(e: &ApiError) -> bool {
    e.to_string().contains("Resources exhausted")
}

/// An engine or delta-rs failure inside a statement: transient → `503`, else `400`.
pub(crate) fn delta_err(e: impl std::error::Error + 'static) -> ApiError {
    let msg = format!("Invalid Input Error: {e}");
    ApiError::from_failure(&e, msg, ApiError::BadRequest)
}

/// Whether a table name is a `Catalog Error` for the given name.
pub fn table_missing(table: &str) -> ApiError {
    sql_err(format!(
        "Catalog Error: Table with name {table} does not exist!"
    ))
}

/// Identifier parts of an object name; unquoted parts are folded to lower case, the way
/// DataFusion (and DuckDB's case-insensitive lookup) treats them.
/// A name as DataFusion reads it: an unquoted one folded to lower case.
pub(crate) fn folded(id: &Ident) -> String {
    match id.quote_style {
        Some(_) => id.value.clone(),
        None => id.value.to_lowercase(),
    }
}

/// The SQL statement inside a parsed one (an `EXPLAIN`'s too).
fn sql_statement(statement: &mut DFStatement) -> Option<&mut Statement> {
    match statement {
        DFStatement::Statement(s) => Some(s.as_mut()),
        DFStatement::Explain(e) => match e.statement.as_mut() {
            DFStatement::Statement(s) => Some(s.as_mut()),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn name_parts(name: &ObjectName) -> Result<Vec<String>, ApiError> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(id) => Ok(folded(id)),
            other => Err(sql_err(format!(
                "Parser Error: unsupported name part {other}"
            ))),
        })
        .collect()
}

/// Resolve a column name the DuckDB way: exact, else the one case-insensitive match.
pub(crate) fn column_named(columns: &[String], name: &str) -> Option<String> {
    if let Some(c) = columns.iter().find(|c| c.as_str() == name) {
        return Some(c.clone());
    }
    let mut found = columns.iter().filter(|c| c.eq_ignore_ascii_case(name));
    match (found.next(), found.next()) {
        (Some(c), None) => Some(c.clone()),
        _ => None,
    }
}

/// One request's SQL session.
pub struct SqlSession {
    ctx: SessionContext,
    /// The granted tables' folders, the only storage the session's queries can read.
    stores: Arc<stores::GrantedStores>,
    storage: Arc<Storage>,
    user: User,
    catalog: String,
    schema: String,
    /// Where `ATTACH ':memory:'` records its catalogs; `None` refuses `ATTACH`.
    attached: Option<Arc<Attached>>,
    /// Views being expanded inside one another now (`sql/views.rs`).
    view_depth: usize,
    /// In a transaction: where `DROP TABLE` and `DROP SCHEMA` note the folders they move
    /// aside instead of deleting them (`targets::Dropped`); `None` deletes.
    set_aside: Option<Arc<Mutex<Vec<targets::Dropped>>>>,
}

impl SqlSession {
    /// A session with the user's catalogs and the request's defaults.
    pub fn new(
        storage: Arc<Storage>,
        runtime: Arc<RuntimeEnv>,
        user: User,
        catalog: Option<&str>,
        schema: Option<&str>,
    ) -> Result<Self, ApiError> {
        let catalog = match catalog {
            Some(c) if !c.is_empty() => c.to_string(),
            _ => user
                .catalogs
                .first()
                .cloned()
                .ok_or_else(|| ApiError::NotFound("no catalog granted".into()))?,
        };
        if !user.can_see(&catalog) {
            return Err(sql_err(format!(
                "Catalog Error: SET schema: No catalog + schema named \"{catalog}\" found."
            )));
        }
        let schema = schema
            .filter(|s| !s.is_empty())
            .unwrap_or(DEFAULT_SCHEMA)
            .to_string();
        validate_name("schema", &schema)?;
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(&catalog, &schema)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(false);
        // Plain Utf8/Binary in results: clients and the Parquet output expect them.
        config
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = false;
        // `TIMESTAMP WITH TIME ZONE` literals and casts are UTC, as the tables store them.
        config.options_mut().execution.time_zone = Some(SESSION_TIME_ZONE.to_string());
        // DuckDB sorts NULLs last whichever the direction (DataFusion, as Postgres: first
        // when descending), so `ORDER BY v DESC LIMIT 1` is the largest value.
        config.options_mut().sql_parser.default_null_ordering = "nulls_last".to_string();
        // DuckDB reads `123.45` as the DECIMAL it spells (DataFusion: a DOUBLE, which
        // cannot hold `123456789012345.678`: written into a DECIMAL column it came out
        // `…345.664`).
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        // DuckDB keeps a subquery's ORDER BY, so `SELECT * FROM (… ORDER BY x) LIMIT 1` is
        // the smallest; DataFusion dropped it when no LIMIT sat beside it.
        config
            .options_mut()
            .sql_parser
            .enable_subquery_sort_elimination = false;
        // The shared runtime's memory pool, disk manager and caches, with a registry of
        // this session's own that knows no storage until names resolve to granted tables.
        let stores = Arc::new(stores::GrantedStores::default());
        let runtime = RuntimeEnvBuilder::from_runtime_env(&runtime)
            .with_object_store_registry(Arc::clone(&stores) as _)
            .build_arc()
            .map_err(sql_error)?;
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            // Ahead of DataFusion's planners, which `with_default_features` appends.
            .with_expr_planners(vec![Arc::new(strings::DuckdbStrings)])
            .with_default_features()
            .with_analyzer_rules(analyzer_rules())
            .with_optimizer_rules(optimizer_rules())
            .with_type_planner(Arc::new(type_planner::DuckdbTypes))
            .with_physical_optimizer_rules(physical::rules(Arc::clone(&stores) as _))
            .build();
        let ctx = SessionContext::new_with_state(state);
        ctx.register_udf(udf::from_base64_udf());
        ctx.register_udf(udf::typeof_udf());
        for f in lambdas::functions() {
            ctx.register_higher_order_function(f);
        }
        for f in udf::digest_udfs() {
            ctx.register_udf(f);
        }
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            udf::now::NowMicros::new(),
        ));
        ctx.register_udf(udf::error_udf());
        ctx.register_udf(time_zones::timezone_udf());
        ctx.register_udf(udf::row_key_udf());
        ctx.register_udf(arithmetic::integer_divide_udf());
        ctx.register_udf(cast_names::named_cast_udf());
        aggregates::register(&ctx);
        for f in format::udfs() {
            ctx.register_udf(f);
        }
        for f in strptime::udfs() {
            ctx.register_udf(f);
        }
        for f in type_dispatch::udfs() {
            ctx.register_udf(f);
        }
        for f in temporal::udfs() {
            ctx.register_udf(f);
        }
        for f in udf::make_timestamp_udfs() {
            ctx.register_udf(f);
        }
        ctx.register_udf(udf::constant_udf(
            "version",
            udf::DUCKDB_VERSION.to_string(),
        ));
        udf::capped::register(&ctx);
        strings::register(&ctx);
        regexps::register(&ctx);
        for f in json::udfs().into_iter().chain(json_build::udfs()) {
            ctx.register_udf(f);
        }
        let session = Self {
            ctx,
            stores,
            storage,
            user,
            catalog,
            schema,
            attached: None,
            view_depth: 0,
            set_aside: None,
        };
        session.forget_tables();
        session.register_session_functions();
        Ok(session)
    }

    /// Drop tables and schemas by moving them aside and noting them in `sink`, so that a
    /// transaction can delete them at `COMMIT` or put them back at `ROLLBACK`.
    pub fn setting_drops_aside(mut self, sink: Arc<Mutex<Vec<targets::Dropped>>>) -> Self {
        self.set_aside = Some(sink);
        self
    }

    /// Let `ATTACH ':memory:' AS name` / `DETACH name` add and remove scratch catalogs
    /// in `attached`, the connection's list. The session's user should already see the
    /// catalogs the list holds.
    pub fn with_attached(mut self, attached: Arc<Attached>) -> Self {
        self.attached = Some(attached);
        self
    }

    /// The session's current catalog and schema: where unqualified names resolve, as
    /// `USE` and `SET schema` left them.
    pub fn defaults(&self) -> (&str, &str) {
        (&self.catalog, &self.schema)
    }

    /// `current_database()`/`current_catalog()` and `current_schema()`: the session's
    /// defaults, registered again whenever they change.
    fn register_session_functions(&self) {
        for name in ["current_database", "current_catalog"] {
            self.ctx
                .register_udf(udf::constant_udf(name, self.catalog.clone()));
        }
        self.ctx
            .register_udf(udf::constant_udf("current_schema", self.schema.clone()));
    }

    /// Empty catalogs, so the next statement resolves every name afresh: a table is read
    /// as of the statement that reads it, after what earlier statements of the same
    /// script wrote.
    fn forget_tables(&self) {
        for c in self.user.catalogs.iter() {
            self.ctx
                .register_catalog(c.as_str(), Arc::new(MemoryCatalogProvider::new()));
        }
    }

    /// Parse SQL the server writes itself: statements DataFusion's parser reads, none of
    /// Delta's table statements.
    pub(crate) fn parse(sql: &str) -> Result<Vec<DFStatement>, ApiError> {
        Self::parse_script(sql)?
            .into_iter()
            .map(|p| match p {
                Parsed::Sql(s) => Ok(s),
                Parsed::Delta(d) => Err(sql_err(format!("Parser Error: {d} cannot be used here"))),
            })
            .collect()
    }

    /// Parse a request's statements (one or more, `;`-separated). Delta's table
    /// statements (`sql/maintenance.rs`) are parsed on their own; a script without one
    /// goes to DataFusion's parser whole.
    pub fn parse_script(sql: &str) -> Result<Vec<Parsed>, ApiError> {
        let sql = dialect::to_generic(sql);
        let tokens = dialect::significant_tokens(&sql).unwrap_or_default();
        let pieces: Vec<&[dialect::Tok]> = tokens
            .split(|t| t.token == datafusion::sql::sqlparser::tokenizer::Token::SemiColon)
            .filter(|p| !p.is_empty())
            .collect();
        let mut parsed = Vec::new();
        if !pieces.iter().any(|p| maintenance::starts_one(p)) {
            parsed.extend(Self::parse_sql(&sql)?.into_iter().map(Parsed::Sql));
        } else {
            for piece in pieces {
                let (Some(first), Some(last)) = (piece.first(), piece.last()) else {
                    continue;
                };
                let text = &sql[first.start..last.end];
                if maintenance::starts_one(piece) {
                    parsed.push(Parsed::Delta(maintenance::parse_one(text)?));
                } else {
                    parsed.extend(Self::parse_sql(text)?.into_iter().map(Parsed::Sql));
                }
            }
        }
        if parsed.is_empty() {
            return Err(sql_err("Parser Error: no statement to execute"));
        }
        Ok(parsed)
    }

    /// DataFusion's parser, then the depth guard, DuckDB's output names, normalization and
    /// the statement guard.
    fn parse_sql(sql: &str) -> Result<Vec<DFStatement>, ApiError> {
        let statements =
            DFParser::parse_sql_with_dialect(sql, &GenericDialect {}).map_err(|e| {
                match e.find_root() {
                    datafusion::error::DataFusionError::SQL(err, _) => parse_error(err),
                    other => sql_err(format!("Parser Error: {other}")),
                }
            })?;
        let mut statements: Vec<DFStatement> = statements.into_iter().collect();
        for s in statements.iter_mut() {
            // Depth first: the other passes recurse.
            guard::check_depth(s)?;
            if let Some(inner) = sql_statement(s) {
                lambdas::restore(inner)?;
                // Names first: DuckDB names an item as written, before any rewrite
                // (with `^`, `->` and `->>` grouped as DuckDB groups them).
                power::precedence(inner);
                json::precedence(inner);
                names::name_items(inner);
                pivot::rewrite(inner).map_err(sql_err)?;
                sample::rewrite(inner).map_err(sql_err)?;
                collations::rewrite(inner)?;
                normalize::statement(inner);
            }
            guard::check_allowed(s)?;
        }
        Ok(statements)
    }

    /// Run every statement; the result is the last one's.
    pub async fn run(&mut self, sql: &str) -> Result<Output, ApiError> {
        let statements = Self::parse_script(sql)?;
        let count = statements.len();
        let mut last = None;
        for (i, statement) in statements.into_iter().enumerate() {
            self.forget_tables();
            // Scripts (dlt sends its merge as one) log each statement's time at debug
            // level: the query log times only the whole request.
            let started = std::time::Instant::now();
            let text = (count > 1 && tracing::enabled!(tracing::Level::DEBUG))
                .then(|| statement.to_string());
            let out = match statement {
                Parsed::Sql(statement) => self.execute(statement).await?,
                Parsed::Delta(statement) => self.delta_statement(&statement).await?,
            };
            if i + 1 == count {
                last = Some(out);
            } else if let Output::Stream(stream) = out {
                // Earlier statements run for their effects; drain without keeping rows.
                stream
                    .try_for_each(|_| async { Ok(()) })
                    .await
                    .map_err(sql_error)?;
            }
            if let Some(text) = text {
                let ms = started.elapsed().as_millis() as u64;
                let text = crate::registry::truncate_chars(&text, 300);
                tracing::debug!(index = i, ms, statement = %text, "script statement finished");
            }
        }
        last.ok_or_else(|| sql_err("Parser Error: no statement to execute"))
    }

    /// Plan (but do not run) every statement; used by `/validate`.
    pub async fn validate(&mut self, sql: &str) -> Result<(), ApiError> {
        for statement in Self::parse_script(sql)? {
            self.forget_tables();
            let Parsed::Sql(statement) = statement else {
                continue;
            };
            if let DFStatement::Statement(s) = &statement
                && matches!(s.as_ref(), Statement::Query(_))
            {
                self.plan_query(statement).await?;
            }
        }
        Ok(())
    }

    /// The schema [`Self::run`] would answer for `sql`, without running anything: a query
    /// is planned (names resolved, guards checked, physical plan built: its errors are
    /// the statement's); DML answers its row count, other statements their status.
    /// `None` when only running can tell (several statements, `DESCRIBE`).
    pub async fn result_schema(&mut self, sql: &str) -> Result<Option<SchemaRef>, ApiError> {
        let mut statements = Self::parse_script(sql)?;
        let (Some(statement), true) = (statements.pop(), statements.is_empty()) else {
            return Ok(None);
        };
        let statement = match statement {
            Parsed::Sql(s) => s,
            Parsed::Delta(d) => return Ok(Some(d.result_schema())),
        };
        self.forget_tables();
        match &statement {
            DFStatement::Explain(_) => {}
            DFStatement::Statement(s) => match s.as_ref() {
                Statement::Query(_) => {}
                Statement::Insert(_)
                | Statement::Update(_)
                | Statement::Delete(_)
                | Statement::Merge(_)
                | Statement::Truncate(_) => return Ok(Some(Self::count(0).schema())),
                Statement::Explain { .. } | Statement::ExplainTable { .. } => return Ok(None),
                s if show::is_show(s) => return Ok(None),
                _ => return Ok(Some(Self::ok_status().schema())),
            },
            _ => return Ok(None),
        }
        let plan = self.plan_query(statement).await?;
        let physical = self
            .ctx
            .execute_logical_plan(plan)
            .await
            .map_err(sql_error)?
            .create_physical_plan()
            .await
            .map_err(sql_error)?;
        Ok(Some(physical.schema()))
    }

    async fn execute(&mut self, statement: DFStatement) -> Result<Output, ApiError> {
        let DFStatement::Statement(stmt) = &statement else {
            return match statement {
                DFStatement::Explain(_) => self.query_stream(statement).await,
                _ => Err(sql_err("Permission Error: statement not allowed")),
            };
        };
        match stmt.as_ref() {
            Statement::Query(_) => self.query_stream(statement).await,
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => self.create_schema(schema_name, *if_not_exists).await,
            Statement::CreateTable(create) => self.create_table(create).await,
            Statement::CreateView(create) => self.create_view(create).await,
            Statement::AlterTable(alter) => {
                let parts = name_parts(&alter.name)?;
                if let [
                    AlterTableOperation::RenameTable {
                        table_name: RenameTableNameKind::To(to) | RenameTableNameKind::As(to),
                    },
                ] = alter.operations.as_slice()
                {
                    return self.rename_table(&parts, alter.if_exists, to).await;
                }
                self.alter_table(&parts, alter.if_exists, &alter.operations)
                    .await
            }
            Statement::Truncate(truncate) => self.truncate(truncate).await,
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                ..
            } => self.drop(*object_type, *if_exists, names, *cascade).await,
            // Every table a write names (subqueries and assignments included) is resolved
            // first, so a name outside the grants fails whatever rows there are.
            Statement::Insert(_)
            | Statement::Delete(_)
            | Statement::Update(_)
            | Statement::Merge(_) => {
                self.register_references(&statement).await?;
                match self.write(stmt).await {
                    // A hash join's build side must fit in the memory pool (DataFusion's
                    // do not spill): a write whose join did not fit runs again with
                    // sort-merge joins, whose sorts spill. A write commits only at its
                    // end, so the failed run left nothing behind.
                    Err(e) if is_resources_exhausted(&e) && self.prefers_hash_join() => {
                        tracing::info!(
                            error = %e,
                            "write ran out of query memory; running it again with spilling joins"
                        );
                        let _spilling = overrides::OptionsOverride::spilling_joins(&self.ctx);
                        self.write(stmt).await
                    }
                    other => other,
                }
            }
            // Each statement commits on its own (Delta has no multi-table transactions);
            // a script's `BEGIN`/`COMMIT` are accepted so DuckDB scripts run unchanged.
            Statement::StartTransaction { .. } | Statement::Commit { .. } => Ok(Self::ok_status()),
            Statement::Use(u) => self.use_schema(u).await,
            Statement::AttachDatabase { schema_name, .. } if guard::is_memory_attach(stmt) => {
                let name = match schema_name.quote_style {
                    Some(_) => schema_name.value.clone(),
                    None => schema_name.value.to_lowercase(),
                };
                self.attach(stmt, &name).await
            }
            Statement::DetachDuckDBDatabase {
                if_exists,
                database_alias,
                ..
            } => {
                let name = match database_alias.quote_style {
                    Some(_) => database_alias.value.clone(),
                    None => database_alias.value.to_lowercase(),
                };
                self.detach(stmt, &name, *if_exists).await
            }
            Statement::Set(_) => self.set(stmt).await,
            Statement::Comment {
                object_type,
                object_name,
                comment,
                if_exists,
            } => {
                self.comment(object_type, object_name, comment, *if_exists)
                    .await
            }
            Statement::Explain {
                describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
                statement,
                ..
            } => self.describe(&statement.to_string()).await,
            Statement::ExplainTable { table_name, .. } => {
                self.describe(&format!("SELECT * FROM {table_name}")).await
            }
            s if show::is_show(s) => self.show(s).await,
            _ => Err(sql_err("Permission Error: statement not allowed")),
        }
    }

    /// An `INSERT`, `DELETE`, `UPDATE` or `MERGE`: one commit at its end.
    async fn write(&mut self, stmt: &Statement) -> Result<Output, ApiError> {
        match stmt {
            Statement::Insert(insert) => self.insert(insert).await,
            Statement::Delete(delete) => self.delete(delete).await,
            Statement::Update(update) => self.update(update).await,
            Statement::Merge(merge) => self.merge(merge).await,
            _ => Err(ApiError::Internal(format!("not a write: {stmt}"))),
        }
    }

    fn prefers_hash_join(&self) -> bool {
        self.ctx
            .state_ref()
            .read()
            .config()
            .options()
            .optimizer
            .prefer_hash_join
    }

    pub(crate) fn ok_status() -> Output {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "Success",
            DataType::Boolean,
            false,
        )]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(arrow::array::BooleanArray::from(vec![true])) as ArrayRef],
        );
        match batch {
            Ok(b) => Output::Batches(schema, vec![b]),
            Err(_) => Output::Batches(schema, vec![]),
        }
    }

    pub(crate) fn count(n: i64) -> Output {
        let schema = Arc::new(Schema::new(vec![Field::new(
            COUNT_COLUMN,
            DataType::Int64,
            false,
        )]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(arrow::array::Int64Array::from(vec![n])) as ArrayRef],
        );
        match batch {
            Ok(b) => Output::Batches(schema, vec![b]),
            Err(_) => Output::Batches(schema, vec![]),
        }
    }
}

impl SqlSession {
    /// `ATTACH ':memory:' AS name`: a new, empty scratch catalog (with its `main`
    /// schema) for this connection, as DuckDB attaches a fresh in-memory database.
    async fn attach(&mut self, stmt: &Statement, name: &str) -> Result<Output, ApiError> {
        let Some(attached) = self.attached.clone() else {
            return Err(guard::not_allowed(stmt));
        };
        validate_name("catalog", name)?;
        let exists = || {
            sql_err(format!(
                "Binder Error: Failed to attach database: database with name \"{name}\" already exists"
            ))
        };
        if self.user.can_see(name) {
            return Err(exists());
        }
        if attached.lock().len() >= Attached::MAX {
            return Err(sql_err(format!(
                "Invalid Input Error: a session may attach at most {} catalogs; DETACH one first",
                Attached::MAX
            )));
        }
        // Any other folder of that name (a catalog not granted to this user, another
        // session's scratch catalog) answers exactly like a granted one: nothing about
        // it is revealed, and nothing in it becomes reachable.
        if !self.storage.create_scratch_catalog(name).await? {
            return Err(exists());
        }
        attached.lock().push(name.to_string());
        let mut catalogs = self.user.catalogs.as_ref().clone();
        catalogs.push(name.to_string());
        self.user.catalogs = Arc::new(catalogs);
        Ok(Self::ok_status())
    }

    /// `DETACH [IF EXISTS] name`: remove a catalog this connection attached, with
    /// everything in it.
    async fn detach(
        &mut self,
        stmt: &Statement,
        name: &str,
        if_exists: bool,
    ) -> Result<Output, ApiError> {
        let Some(attached) = self.attached.clone() else {
            return Err(guard::not_allowed(stmt));
        };
        if !attached.lock().iter().any(|n| n == name) {
            if if_exists && !self.user.can_see(name) {
                return Ok(Self::ok_status());
            }
            return Err(sql_err(if self.user.can_see(name) {
                format!(
                    "Binder Error: Failed to detach database with name \"{name}\": only databases attached by this session can be detached"
                )
            } else {
                format!(
                    "Binder Error: Failed to detach database with name \"{name}\": database not found"
                )
            }));
        }
        if self.catalog == name {
            return Err(sql_err(format!(
                "Binder Error: Cannot detach database \"{name}\" because it is the default database. Select a different database using `USE` to allow detaching this database"
            )));
        }
        self.storage.drop_scratch_catalog(name).await?;
        attached.lock().retain(|n| n != name);
        let catalogs: Vec<String> = self
            .user
            .catalogs
            .iter()
            .filter(|c| c.as_str() != name)
            .cloned()
            .collect();
        self.user.catalogs = Arc::new(catalogs);
        Ok(Self::ok_status())
    }
}

/// A query's rows as the engine takes them. A DataFusion error on the way is kept in
/// `failure` (as the client should see it) and reaches the engine as an opaque error.
pub(crate) fn engine_rows(
    stream: datafusion::execution::SendableRecordBatchStream,
    failure: Arc<Mutex<Option<ApiError>>>,
) -> futures::stream::BoxStream<'static, deltalite::Result<arrow::record_batch::RecordBatch>> {
    use futures::{StreamExt, TryStreamExt};
    stream
        .map_err(move |e| {
            let msg = keep_failure(&failure, sql_error(e));
            deltalite::DeltaLiteError::Delta(deltalite::deltalake::DeltaTableError::Generic(msg))
        })
        .boxed()
}

/// A DML's rows as the engine takes them ([`engine_rows`]), each value first given its
/// target column's type as SQL assigns it: `UPDATE … SET d = now()` into a `DATE` column
/// keeps the day, as DuckDB does, where the engine (rightly, for loaded data) refuses any
/// cast that loses information. Casts that fail (an overflow, text that is no date) are
/// errors, not NULLs; nested types are left to the engine's own rules.
pub(crate) fn assigned_rows(
    stream: datafusion::execution::SendableRecordBatchStream,
    failure: Arc<Mutex<Option<ApiError>>>,
    target: SchemaRef,
) -> futures::stream::BoxStream<'static, deltalite::Result<arrow::record_batch::RecordBatch>> {
    use futures::{StreamExt, TryStreamExt};
    let on_error = Arc::clone(&failure);
    engine_rows(stream, failure)
        .and_then(move |batch| {
            let out = assign_types(&batch, &target).map_err(|e| {
                deltalite::DeltaLiteError::Other(keep_failure(&on_error, sql_error(e)))
            });
            futures::future::ready(out)
        })
        .boxed()
}

/// DataFusion's analyzer rules and ours: DuckDB's result types of date parts and
/// lengths, then DuckDB's arithmetic, before type coercion (coercion fits what meets
/// them to their types; the arithmetic needs the types as written); checked integer
/// arithmetic, DuckDB's text of timestamps and the text it reads as timestamps after it
/// (they need the types and casts coercion settles).
fn analyzer_rules() -> Vec<Arc<dyn datafusion::optimizer::AnalyzerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Analyzer::new().rules;
    rules.insert(0, Arc::new(result_types::DuckdbResultTypes));
    rules.insert(1, Arc::new(arithmetic::DuckdbArithmetic));
    rules.insert(2, Arc::new(set_operations::MultisetOperations));
    rules.insert(3, Arc::new(lambdas::ResolveLambdas { widen: true }));
    rules.push(Arc::new(arithmetic::CheckedIntegers));
    rules.push(Arc::new(text_casts::DuckdbText));
    rules.push(Arc::new(timestamp_text::TimestampText));
    rules.push(Arc::new(lambdas::ResolveLambdas { widen: false }));
    rules
}

/// DataFusion's optimizer rules and ours: correlated scalar aggregates it cannot
/// decorrelate first, while they are as planned; DATE bounds last, once constants are
/// folded.
fn optimizer_rules() -> Vec<Arc<dyn datafusion::optimizer::OptimizerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Optimizer::new().rules;
    rules.insert(0, Arc::new(scalar_subqueries::ScalarSubqueries));
    rules.push(Arc::new(date_bounds::DateBounds));
    rules
}

/// `batch` with each flat column cast to the type of `target`'s column of that name.
pub(crate) fn assign_types(
    batch: &RecordBatch,
    target: &Schema,
) -> Result<RecordBatch, datafusion::error::DataFusionError> {
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    let mut changed = false;
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let to = target
            .field_with_name(field.name())
            .ok()
            .filter(|to| !to.data_type().is_nested() && !field.data_type().is_nested());
        // A `TIME` column's text is checked and put in its one form, whatever it is.
        let value = match to {
            Some(to) if crate::types::is_time(to) => Some(arrow::compute::cast_with_options(
                column,
                &crate::types::TIME_VALUE_TYPE,
                &options,
            )?),
            // As a cast to an integer does (DuckDB): rounded, not truncated.
            Some(to) if to.data_type().is_integer() && arithmetic::rounds(field.data_type()) => {
                Some(arithmetic::round_to_integer(column)?)
            }
            // Text DuckDB reads as a timestamp that Arrow's parser wants completed.
            Some(to)
                if matches!(to.data_type(), DataType::Timestamp(..))
                    && matches!(
                        field.data_type(),
                        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
                    ) =>
            {
                Some(timestamp_text::complete_array(column)?)
            }
            Some(to) if to.data_type() != field.data_type() => Some(Arc::clone(column)),
            _ => None,
        };
        match (to, value) {
            (Some(to), Some(value)) => {
                columns.push(arrow::compute::cast_with_options(
                    &value,
                    to.data_type(),
                    &options,
                )?);
                fields.push(
                    field
                        .as_ref()
                        .clone()
                        .with_data_type(to.data_type().clone()),
                );
                changed = true;
            }
            _ => {
                columns.push(Arc::clone(column));
                fields.push(field.as_ref().clone());
            }
        }
    }
    if !changed {
        return Ok(batch.clone());
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// Record the SQL layer's own error for [`take_failure`]; its text, for the opaque error
/// the engine carries back.
pub(crate) fn keep_failure(failure: &Mutex<Option<ApiError>>, error: ApiError) -> String {
    let msg = error.to_string();
    match failure.lock() {
        Ok(mut f) => *f = Some(error),
        Err(p) => *p.into_inner() = Some(error),
    }
    msg
}

/// The SQL error an engine call failed on, if the SQL layer recorded one.
pub(crate) fn take_failure(failure: &Mutex<Option<ApiError>>) -> Option<ApiError> {
    match failure.lock() {
        Ok(mut f) => f.take(),
        Err(p) => p.into_inner().take(),
    }
}
