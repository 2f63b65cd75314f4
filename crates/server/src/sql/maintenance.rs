//! Delta's table statements, which sqlparser's generic dialect does not parse:
//!
//! | statement | answers |
//! |---|---|
//! | `OPTIMIZE t [WHERE partition-predicate]` | one row: files removed and added, partitions compacted, rows rewritten, the version |
//! | `VACUUM t [RETAIN n HOURS] [DRY RUN]` | the paths deleted (or, `DRY RUN`, that would be) |
//! | `DESCRIBE HISTORY t [LIMIT n]` | the table's commits, newest first |
//! | `RESTORE [TABLE] t [TO] VERSION AS OF n` / `TIMESTAMP AS OF '…'` | one row: the version committed, files removed and restored |
//!
//! They are recognised at the start of a statement ([`parse`]) and parsed with
//! sqlparser's own parser for names and expressions. Each resolves its table through
//! [`SqlSession::resolve`], so the grants hold as for every other statement, and changes
//! the table through the engine's one transaction path.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::sql::sqlparser::ast::{Expr, ObjectName};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;
use deltalite::compact::CompactOptions;
use deltalite::options::DEFAULT_COMMIT_MAX_RETRIES;
use deltalite::{DeltaLiteError, VacuumOptions};

use super::dialect::Tok;
use super::guard;
use super::time_travel::{self, AsOf};
use super::{Output, SqlSession, delta_err, name_parts, sql_err, sql_error, table_missing};
use crate::catalog::TableName;
use crate::error::ApiError;

/// One of the statements above.
#[derive(Debug, Clone, PartialEq)]
pub enum DeltaStatement {
    Optimize {
        table: ObjectName,
        predicate: Option<Box<Expr>>,
    },
    Vacuum {
        table: ObjectName,
        retain_hours: Option<f64>,
        dry_run: bool,
    },
    History {
        table: ObjectName,
        limit: Option<u64>,
    },
    Restore {
        table: ObjectName,
        to: AsOf,
    },
}

impl DeltaStatement {
    /// The table the statement names.
    pub fn table(&self) -> &ObjectName {
        match self {
            DeltaStatement::Optimize { table, .. }
            | DeltaStatement::Vacuum { table, .. }
            | DeltaStatement::History { table, .. }
            | DeltaStatement::Restore { table, .. } => table,
        }
    }

    /// Whether the statement changes the table (a transaction records it).
    pub fn writes(&self) -> bool {
        !matches!(self, DeltaStatement::History { .. })
    }

    /// The schema of the statement's answer.
    pub fn result_schema(&self) -> SchemaRef {
        match self {
            DeltaStatement::Optimize { .. } => counts_schema(&OPTIMIZE_COLUMNS),
            DeltaStatement::Restore { .. } => counts_schema(&RESTORE_COLUMNS),
            DeltaStatement::Vacuum { .. } => {
                Arc::new(Schema::new(vec![Field::new("path", DataType::Utf8, false)]))
            }
            DeltaStatement::History { .. } => history_schema(),
        }
    }
}

impl std::fmt::Display for DeltaStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeltaStatement::Optimize { table, predicate } => {
                write!(f, "OPTIMIZE {table}")?;
                if let Some(p) = predicate {
                    write!(f, " WHERE {p}")?;
                }
                Ok(())
            }
            DeltaStatement::Vacuum {
                table,
                retain_hours,
                dry_run,
            } => {
                write!(f, "VACUUM {table}")?;
                if let Some(h) = retain_hours {
                    write!(f, " RETAIN {h} HOURS")?;
                }
                if *dry_run {
                    write!(f, " DRY RUN")?;
                }
                Ok(())
            }
            DeltaStatement::History { table, limit } => {
                write!(f, "DESCRIBE HISTORY {table}")?;
                if let Some(n) = limit {
                    write!(f, " LIMIT {n}")?;
                }
                Ok(())
            }
            DeltaStatement::Restore { table, to } => write!(f, "RESTORE TABLE {table} TO {to}"),
        }
    }
}

/// Whether a statement (its significant tokens) is one of these.
pub(super) fn starts_one(tokens: &[Tok]) -> bool {
    let unquoted = |i: usize, keyword: Keyword| {
        tokens.get(i).is_some_and(|t| {
            matches!(&t.token, Token::Word(w) if w.keyword == keyword && w.quote_style.is_none())
        })
    };
    unquoted(0, Keyword::OPTIMIZE)
        || unquoted(0, Keyword::VACUUM)
        || tokens.first().is_some_and(|t| {
            matches!(&t.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("restore"))
        })
        || ((unquoted(0, Keyword::DESCRIBE) || unquoted(0, Keyword::DESC))
            && unquoted(1, Keyword::HISTORY)
            && tokens.get(2).is_some_and(|t| matches!(t.token, Token::Word(_))))
}

/// Parse one statement's text, which [`starts_one`] recognised.
pub(super) fn parse_one(text: &str) -> Result<DeltaStatement, ApiError> {
    let err = |e: ParserError| super::parse_error(&e);
    let mut parser = Parser::new(&GenericDialect {})
        .try_with_sql(text)
        .map_err(err)?;
    let statement = parse(&mut parser).map_err(err)?.ok_or_else(|| {
        sql_err("Parser Error: expected OPTIMIZE, VACUUM, DESCRIBE HISTORY or RESTORE")
    })?;
    if parser.peek_token().token != Token::EOF {
        return Err(err(ParserError::ParserError(format!(
            "Expected: end of statement, found: {}",
            parser.peek_token()
        ))));
    }
    if let DeltaStatement::Optimize {
        predicate: Some(p), ..
    } = &statement
    {
        guard::check_expr_depth(p)?;
        let subquery = datafusion::sql::sqlparser::ast::visit_expressions(p, |e| {
            if matches!(
                e,
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
            ) {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        if subquery.is_break() {
            return Err(sql_err(
                "Binder Error: OPTIMIZE … WHERE takes a predicate on the partition column, without subqueries",
            ));
        }
    }
    Ok(statement)
}

/// The statement starting at the parser's position, if it is one of these (the parser is
/// left after it); `None` leaves the parser where it was.
fn parse(parser: &mut Parser<'_>) -> Result<Option<DeltaStatement>, ParserError> {
    let word = |t: &Token, keyword: Keyword| matches!(t, Token::Word(w) if w.keyword == keyword && w.quote_style.is_none());
    let first = parser.peek_token().token;
    let Token::Word(w) = &first else {
        return Ok(None);
    };
    if w.quote_style.is_some() {
        return Ok(None);
    }
    if word(&first, Keyword::OPTIMIZE) {
        parser.next_token();
        let _ = parser.parse_keyword(Keyword::TABLE);
        let table = parser.parse_object_name(false)?;
        let predicate = if parser.parse_keyword(Keyword::WHERE) {
            Some(Box::new(parser.parse_expr()?))
        } else {
            None
        };
        if parser.parse_keywords(&[Keyword::ZORDER, Keyword::BY]) {
            return Err(ParserError::ParserError(
                "OPTIMIZE … ZORDER BY is not supported: compaction keeps each file's row order"
                    .into(),
            ));
        }
        return Ok(Some(DeltaStatement::Optimize { table, predicate }));
    }
    if word(&first, Keyword::VACUUM) {
        parser.next_token();
        let _ = parser.parse_keyword(Keyword::TABLE);
        let table = parser.parse_object_name(false)?;
        let retain_hours = if parser.parse_keyword(Keyword::RETAIN) {
            let value = parser.parse_number_value()?;
            let hours: f64 = value.to_string().parse().map_err(|_| {
                ParserError::ParserError(format!("RETAIN expects a number of hours, found {value}"))
            })?;
            parser.expect_keyword(Keyword::HOURS)?;
            Some(hours)
        } else {
            None
        };
        let dry_run = if parser.parse_keyword(Keyword::DRY) {
            parser.expect_keyword(Keyword::RUN)?;
            true
        } else {
            false
        };
        return Ok(Some(DeltaStatement::Vacuum {
            table,
            retain_hours,
            dry_run,
        }));
    }
    // `DESCRIBE HISTORY t`; `DESCRIBE history` alone describes a table named history.
    if (word(&first, Keyword::DESCRIBE) || word(&first, Keyword::DESC))
        && word(&parser.peek_nth_token(1).token, Keyword::HISTORY)
        && matches!(parser.peek_nth_token(2).token, Token::Word(_))
    {
        parser.next_token();
        parser.next_token();
        let table = parser.parse_object_name(false)?;
        let limit = if parser.parse_keyword(Keyword::LIMIT) {
            Some(parser.parse_literal_uint()?)
        } else {
            None
        };
        return Ok(Some(DeltaStatement::History { table, limit }));
    }
    if w.value.eq_ignore_ascii_case("restore") {
        parser.next_token();
        let _ = parser.parse_keyword(Keyword::TABLE);
        let table = parser.parse_object_name(false)?;
        let _ = parser.parse_keyword(Keyword::TO);
        let to = if parser.parse_keywords(&[Keyword::VERSION, Keyword::AS, Keyword::OF]) {
            AsOf::Version(parser.parse_literal_uint()?)
        } else if parser.parse_keywords(&[Keyword::TIMESTAMP, Keyword::AS, Keyword::OF]) {
            AsOf::Timestamp(parser.parse_literal_string()?)
        } else {
            return parser.expected(
                "VERSION AS OF n or TIMESTAMP AS OF '…'",
                parser.peek_token(),
            );
        };
        return Ok(Some(DeltaStatement::Restore { table, to }));
    }
    Ok(None)
}

/// Table property that turns the background maintainer off for one table (`off`).
pub const MAINTENANCE_PROPERTY: &str = "deltalite.maintenance";

/// Properties `ALTER TABLE … SET TBLPROPERTIES` accepts besides the layout ones: how the
/// table is looked after. None switches on a table feature.
const MAINTENANCE_PROPERTIES: [&str; 5] = [
    MAINTENANCE_PROPERTY,
    "delta.deletedFileRetentionDuration",
    "delta.logRetentionDuration",
    "delta.setTransactionRetentionDuration",
    "delta.checkpointInterval",
];

/// A maintenance property's own spelling, its value checked; `None` when `key` is not
/// one.
pub(super) fn maintenance_property(
    key: &str,
    value: &str,
) -> Option<Result<&'static str, ApiError>> {
    let key = MAINTENANCE_PROPERTIES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(key))?;
    let bad = |expected: &str| {
        Err(sql_err(format!(
            "Invalid Input Error: table property {key} = '{value}': expected {expected}"
        )))
    };
    Some(match *key {
        MAINTENANCE_PROPERTY => match value {
            "on" | "off" => Ok(*key),
            _ => bad("'on' or 'off'"),
        },
        "delta.checkpointInterval" => match value.parse::<u64>() {
            Ok(n) if n > 0 => Ok(*key),
            _ => bad("a positive number of commits"),
        },
        _ => {
            let mut words = value.split_whitespace();
            let ok = words.next() == Some("interval")
                && words.next().is_some_and(|n| n.parse::<u64>().is_ok())
                && words.next().is_some_and(|u| {
                    [
                        "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days",
                        "week", "weeks",
                    ]
                    .contains(&u)
                })
                && words.next().is_none();
            if ok {
                Ok(*key)
            } else {
                bad("an interval such as 'interval 7 days'")
            }
        }
    })
}

const OPTIMIZE_COLUMNS: [&str; 5] = [
    "files_removed",
    "files_added",
    "partitions_compacted",
    "rows_rewritten",
    "version",
];
const RESTORE_COLUMNS: [&str; 3] = ["version", "files_removed", "files_restored"];

fn counts_schema(columns: &[&str]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Int64, false))
            .collect::<Vec<_>>(),
    ))
}

fn counts(columns: &[&str], values: &[u64]) -> Result<Output, ApiError> {
    let schema = counts_schema(columns);
    let arrays: Vec<ArrayRef> = values
        .iter()
        .map(|v| {
            Arc::new(Int64Array::from(vec![
                i64::try_from(*v).unwrap_or(i64::MAX),
            ])) as ArrayRef
        })
        .collect();
    let batch =
        RecordBatch::try_new(Arc::clone(&schema), arrays).map_err(|e| sql_err(e.to_string()))?;
    Ok(Output::Batches(schema, vec![batch]))
}

/// `DESCRIBE HISTORY`'s columns, Databricks' names; parameters, metrics and the commit's
/// other keys as JSON text.
fn history_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("version", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
        Field::new("operation", DataType::Utf8, true),
        Field::new("operationParameters", DataType::Utf8, true),
        Field::new("operationMetrics", DataType::Utf8, true),
        Field::new("readVersion", DataType::Int64, true),
        Field::new("isolationLevel", DataType::Utf8, true),
        Field::new("isBlindAppend", DataType::Boolean, true),
        Field::new("engineInfo", DataType::Utf8, true),
        Field::new("userMetadata", DataType::Utf8, true),
    ]))
}

/// Commit-info keys with a column of their own in [`history_schema`].
const HISTORY_KEYS: [&str; 9] = [
    "version",
    "timestamp",
    "operation",
    "operationParameters",
    "readVersion",
    "isolationLevel",
    "isBlindAppend",
    "engineInfo",
    "info",
];

fn json_text(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

impl SqlSession {
    pub(super) async fn delta_statement(
        &mut self,
        statement: &DeltaStatement,
    ) -> Result<Output, ApiError> {
        let name = self.resolve(&name_parts(statement.table())?)?;
        match statement {
            DeltaStatement::Optimize { predicate, .. } => {
                self.optimize(&name, predicate.as_deref()).await
            }
            DeltaStatement::Vacuum {
                retain_hours,
                dry_run,
                ..
            } => self.vacuum(&name, *retain_hours, *dry_run).await,
            DeltaStatement::History { limit, .. } => self.history(&name, *limit).await,
            DeltaStatement::Restore { to, .. } => self.restore(&name, to).await,
        }
    }

    async fn open_named(&self, name: &TableName) -> Result<deltalite::DeltaLiteTable, ApiError> {
        self.storage
            .open_table(name)
            .await?
            .ok_or_else(|| table_missing(&name.table))
    }

    /// Bin-pack the table's small files, per partition (the engine's compaction: one
    /// `OPTIMIZE` commit, no data change; a concurrent write to the same files wins and
    /// the compaction conflicts instead of resurrecting rows).
    async fn optimize(
        &mut self,
        name: &TableName,
        predicate: Option<&Expr>,
    ) -> Result<Output, ApiError> {
        let mut table = self.open_named(name).await?;
        let mut options = CompactOptions {
            commit_metadata: HashMap::from([(
                "deltalite.source".to_string(),
                serde_json::Value::from("OPTIMIZE"),
            )]),
            ..CompactOptions::default()
        };
        if let Some(predicate) = predicate {
            options.partitions = Some(matching_partitions(&table, &name.table, predicate).await?);
        }
        let stats = table.compact(&options).await.map_err(delta_err)?;
        counts(
            &OPTIMIZE_COLUMNS,
            &[
                stats.files_removed as u64,
                stats.files_added as u64,
                stats.partitions_compacted as u64,
                stats.rows_rewritten,
                stats.version,
            ],
        )
    }

    /// Delete the files no version within the retention reads: orphans of failed writes
    /// and files removed longer ago than the retention. A retention below the table's
    /// `delta.deletedFileRetentionDuration` (7 days unless set) is refused: time travel
    /// within it, and writes still in flight, may need those files.
    async fn vacuum(
        &mut self,
        name: &TableName,
        retain_hours: Option<f64>,
        dry_run: bool,
    ) -> Result<Output, ApiError> {
        let mut table = self.open_named(name).await?;
        let retention = retain_hours
            .map(VacuumOptions::hours)
            .transpose()
            .map_err(|_| {
                sql_err(format!(
                    "Invalid Input Error: RETAIN {} HOURS is not a number of hours",
                    retain_hours.unwrap_or_default()
                ))
            })?;
        let options = VacuumOptions {
            retention,
            dry_run,
            ..VacuumOptions::default()
        };
        let deleted = match table.vacuum(&options).await {
            Ok(done) => done.files,
            Err(e @ DeltaLiteError::RetentionTooShort { .. }) => {
                return Err(sql_err(format!(
                    "Invalid Input Error: VACUUM {} RETAIN {} HOURS: {e}. Lower the property first (ALTER TABLE … SET TBLPROPERTIES) if you mean it",
                    name.table,
                    retain_hours.unwrap_or_default(),
                )));
            }
            Err(e) => return Err(delta_err(e)),
        };
        let schema = Arc::new(Schema::new(vec![Field::new("path", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(StringArray::from(deleted)) as ArrayRef],
        )
        .map_err(|e| sql_err(e.to_string()))?;
        Ok(Output::Batches(schema, vec![batch]))
    }

    async fn history(&mut self, name: &TableName, limit: Option<u64>) -> Result<Output, ApiError> {
        let table = self.open_named(name).await?;
        let limit = limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let entries = table.history(limit).await.map_err(delta_err)?;
        let get = |e: &serde_json::Value, k: &str| e.get(k).cloned();
        let int = |e: &serde_json::Value, k: &str| e.get(k).and_then(serde_json::Value::as_i64);
        let mut version = Vec::new();
        let mut timestamp = Vec::new();
        let mut operation = Vec::new();
        let mut parameters = Vec::new();
        let mut metrics = Vec::new();
        let mut read_version = Vec::new();
        let mut isolation = Vec::new();
        let mut blind = Vec::new();
        let mut engine = Vec::new();
        let mut user = Vec::new();
        for e in &entries {
            version.push(int(e, "version").unwrap_or_default());
            timestamp.push(int(e, "timestamp"));
            operation.push(json_text(get(e, "operation").as_ref()));
            parameters.push(json_text(get(e, "operationParameters").as_ref()));
            metrics.push(json_text(get(e, "operationMetrics").as_ref()));
            read_version.push(int(e, "readVersion"));
            isolation.push(json_text(get(e, "isolationLevel").as_ref()));
            blind.push(e.get("isBlindAppend").and_then(serde_json::Value::as_bool));
            engine.push(json_text(get(e, "engineInfo").as_ref()));
            // The commit's own keys (custom metadata: a dlt load id, who compacted).
            let rest: serde_json::Map<String, serde_json::Value> = e
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| {
                            !HISTORY_KEYS.contains(&k.as_str()) && k.as_str() != "operationMetrics"
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            user.push((!rest.is_empty()).then(|| serde_json::Value::Object(rest).to_string()));
        }
        let schema = history_schema();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(version)),
            Arc::new(TimestampMillisecondArray::from(timestamp)),
            Arc::new(StringArray::from(operation)),
            Arc::new(StringArray::from(parameters)),
            Arc::new(StringArray::from(metrics)),
            Arc::new(Int64Array::from(read_version)),
            Arc::new(StringArray::from(isolation)),
            Arc::new(BooleanArray::from(blind)),
            Arc::new(StringArray::from(engine)),
            Arc::new(StringArray::from(user)),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
            .map_err(|e| sql_err(e.to_string()))?;
        Ok(Output::Batches(schema, vec![batch]))
    }

    /// Make the table what it was at a version (or a time): one `RESTORE` commit through
    /// the engine; the table's writer lock keeps this server's own writes out meanwhile.
    async fn restore(&mut self, name: &TableName, to: &AsOf) -> Result<Output, ApiError> {
        let lock = self.storage.table_lock(name);
        let _guard = lock.lock().await;
        let mut table = self.open_named(name).await?;
        let version = match to {
            AsOf::Version(v) => {
                // Checked here for the same message a read of that version gets.
                time_travel::load(table.delta_table(), &name.table, to).await?;
                *v
            }
            AsOf::Timestamp(_) => time_travel::load(table.delta_table(), &name.table, to)
                .await?
                .version()
                .unwrap_or_default(),
        };
        let stats = table
            .restore(version, &HashMap::new(), DEFAULT_COMMIT_MAX_RETRIES)
            .await
            .map_err(delta_err)?;
        counts(
            &RESTORE_COLUMNS,
            &[
                stats.version,
                stats.files_removed as u64,
                stats.files_restored as u64,
            ],
        )
    }
}

/// The values of the table's (single) partition column that `predicate` keeps, evaluated
/// by DataFusion over those values alone (typed as the column is): the predicate can name
/// nothing else, and reads no table.
async fn matching_partitions(
    table: &deltalite::DeltaLiteTable,
    table_name: &str,
    predicate: &Expr,
) -> Result<Vec<Option<String>>, ApiError> {
    let columns = table.partition_columns().map_err(delta_err)?;
    let [column] = columns.as_slice() else {
        return Err(sql_err(format!(
            "Not implemented Error: OPTIMIZE … WHERE needs a table partitioned by one column; {table_name} has {}",
            if columns.is_empty() {
                "none".to_string()
            } else {
                columns.join(", ")
            }
        )));
    };
    let mut values: Vec<Option<String>> = table
        .files()
        .map_err(delta_err)?
        .into_iter()
        .filter_map(|f| {
            f.partition_values
                .into_iter()
                .find(|(c, _)| c == column)
                .map(|(_, v)| v)
        })
        .collect();
    values.sort();
    values.dedup();
    let field = table
        .schema()
        .map_err(delta_err)?
        .field_with_name(column)
        .map_err(|e| sql_err(e.to_string()))?
        .clone();
    let raw = StringArray::from(values.clone());
    let typed =
        arrow::compute::cast(&raw, field.data_type()).map_err(|e| sql_err(e.to_string()))?;
    let ordinal: Vec<i64> = (0..values.len() as i64).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new(field.name(), field.data_type().clone(), true),
        Field::new("__deltalite_ordinal", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![typed, Arc::new(Int64Array::from(ordinal)) as ArrayRef],
    )
    .map_err(|e| sql_err(e.to_string()))?;
    let ctx = datafusion::prelude::SessionContext::new();
    let partitions =
        datafusion::datasource::MemTable::try_new(schema, vec![vec![batch]]).map_err(sql_error)?;
    ctx.register_table("partitions", Arc::new(partitions))
        .map_err(sql_error)?;
    let only_partition_column = |e: ApiError| {
        let e = e.to_string();
        let why = if e.contains("No field named") {
            String::new()
        } else {
            format!(" ({e})")
        };
        sql_err(format!(
            "Binder Error: OPTIMIZE {table_name} WHERE {predicate}: the predicate may name only the partition column {column}{why}"
        ))
    };
    let kept = ctx
        .sql(&format!(
            "SELECT __deltalite_ordinal FROM partitions WHERE {predicate}"
        ))
        .await
        .map_err(|e| only_partition_column(sql_error(e)))?
        .collect()
        .await
        .map_err(|e| only_partition_column(sql_error(e)))?;
    let mut out = Vec::new();
    for b in kept {
        let ordinals = b
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| sql_err("Internal Error: partition ordinals"))?;
        for i in ordinals.iter().flatten() {
            if let Some(v) = usize::try_from(i).ok().and_then(|i| values.get(i)) {
                out.push(v.clone());
            }
        }
    }
    Ok(out)
}
