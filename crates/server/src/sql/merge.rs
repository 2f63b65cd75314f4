//! `MERGE INTO target USING source ON … WHEN …`, executed by the engine in one commit.
//!
//! The statement is first bound ([`MergeSpec`]): DuckDB's `BY NAME` / `*` / `DO NOTHING`
//! / `ERROR` placeholders (see `dialect.rs`) become explicit column lists, every clause
//! an [`Action`]. Then one of two paths runs it:
//!
//! - **Upsert** ([`SqlSession::merge_as_upsert`]): when `ON` is equalities between target
//!   columns and source columns, the clauses are one unconditional `WHEN MATCHED THEN
//!   UPDATE` and one unconditional `WHEN NOT MATCHED THEN INSERT` of the same columns,
//!   keys are not floating point, the table's partition columns are among the keys, the
//!   source's keys are unique and the source fits `max_source_bytes` and the query pool
//!   (it is held there, plus its widest column while its batches become one, until the
//!   engine is done), the statement *is*
//!   an upsert: the engine's key index, pruning and probe apply, and only files holding a
//!   source key are read and rewritten. This is what dlt and dbt send.
//! - **General** ([`MergePlanner`]): any `ON` and clauses, through
//!   `DeltaLiteTable::replace`. Against one snapshot:
//!   1. `target JOIN source` grouped per target row finds the files holding a row some
//!      clause changes, and refuses a row that more than one source row would change
//!      (the SQL standard's cardinality violation);
//!   2. over those files only: the changed rows (`JOIN`, the first clause whose
//!      condition holds), the rows no clause changes (`LEFT ANTI JOIN`), and the rows
//!      no source row matches with `WHEN NOT MATCHED BY SOURCE` applied; or, without
//!      `WHEN NOT MATCHED BY SOURCE` and when the files are read as one stream, all
//!      their rows in one `LEFT JOIN` in file order (`row_number()` over the files,
//!      `ORDER BY` it), each update's values put in place by `rewrite.rs::in_place`;
//!   3. the inserted rows: `source LEFT ANTI JOIN target` with the insert clauses.
//!
//!   Each query carries the clause a row took (`__deltalite_clause`); a stream adapter
//!   drops deleted rows, raises `ERROR` clauses and counts. Memory: the joins build on
//!   the source side; target files stream. On a table that writes deletion vectors, a
//!   file whose changed rows are few enough (`deltalite::MarkingPolicy`) is not
//!   rewritten: its changed rows are marked (found by the same joins over the file
//!   numbered in its order) and only the new versions of updated rows are written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatchOptions};
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Expr as SqlExpr, Merge, MergeAction, MergeClauseKind,
    MergeInsertKind, TableFactor,
};
use deltalite::deltalake::DeltaTable;
use deltalite::deltalake::protocol::MergePredicate;
use deltalite::{
    DeltaLiteError, Knobs, MarkedRows, MarkingPolicy, OmittedColumns, OnDuplicate, ReplaceKind,
    ReplaceOptions, ReplacePlanner, ReplaceReads, Replacement, UpsertOptions,
};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};

use super::dialect::{BY_NAME, BY_POSITION, DO_NOTHING, RAISE};
use super::overrides::OptionsOverride;
use super::rewrite::{
    FILE, MARKED, ROW, TARGET, Target, VALUE, in_place, predicate_sql, quote, row_numbers,
};
use super::{
    Output, SqlSession, column_named, delta_err, engine_rows, keep_failure, name_parts, sql_err,
    sql_error, take_failure,
};
use crate::catalog::TableName;
use crate::error::ApiError;

/// The whole target, for the insert anti join and the first phase.
const TARGET_ALL: &str = "__deltalite_merge_target";
/// Marks a joined source row (NULL: no source row matched).
const PRESENT: &str = "__deltalite_present";
/// A target row's number in the files a one-pass query rewrites: their order.
const ORDINAL: &str = "__deltalite_ord";
/// The rewritten files' rows, numbered ([`ORDINAL`]).
const NUMBERED: &str = "__deltalite_numbered";
/// A source row's number, to count the source rows matching one target row.
const SOURCE_ROW: &str = "__deltalite_sid";
/// The clause a row took.
const CLAUSE: &str = "__deltalite_clause";
/// The message of the `ERROR` clause a row took, when that clause has one.
const MESSAGE: &str = "__deltalite_message";

/// Which rows a clause applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Matched,
    NotMatchedByTarget,
    NotMatchedBySource,
}

impl When {
    fn sql(self) -> &'static str {
        match self {
            When::Matched => "WHEN MATCHED",
            When::NotMatchedByTarget => "WHEN NOT MATCHED",
            When::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
        }
    }
}

/// A value a clause writes into a target column.
#[derive(Debug, Clone)]
struct Value {
    /// The target column.
    column: String,
    /// The value, as SQL over the target and source aliases.
    sql: String,
    /// The source column it is, when it is a plain one.
    source_column: Option<String>,
}

#[derive(Debug, Clone)]
enum Action {
    Update(Vec<Value>),
    Delete,
    Insert(Vec<Value>),
    Nothing,
    /// `ERROR [message]`: the message as SQL over the target and source aliases.
    Raise(Option<String>),
}

impl Action {
    /// Whether a row taking this clause changes (or fails the statement).
    fn acts(&self) -> bool {
        !matches!(self, Action::Nothing)
    }

    fn name(&self) -> &'static str {
        match self {
            Action::Update(_) => "update",
            Action::Delete => "delete",
            Action::Insert(_) => "insert",
            Action::Nothing => "nothing",
            Action::Raise(_) => "error",
        }
    }
}

#[derive(Debug, Clone)]
struct Clause {
    /// 1-based, in statement order: the value of the clause column.
    id: i64,
    when: When,
    condition: Option<String>,
    action: Action,
}

/// A bound `MERGE`.
struct MergeSpec {
    name: TableName,
    target: Target,
    /// The source as a query.
    source_sql: String,
    source_alias: String,
    /// The source's columns and types.
    source_schema: SchemaRef,
    on: String,
    on_expr: SqlExpr,
    clauses: Vec<Clause>,
    /// The target's columns, in table order.
    columns: Vec<String>,
    /// What an `INSERT` clause writes into a target column it does not name: the
    /// column's `DEFAULT` (`defaults.rs`), else `NULL`.
    defaults: HashMap<String, String>,
    /// The commit's record of the statement.
    kind: ReplaceKind,
}

impl MergeSpec {
    fn of(&self, when: When) -> Vec<&Clause> {
        self.clauses.iter().filter(|c| c.when == when).collect()
    }

    fn has(&self, when: When) -> bool {
        self.clauses
            .iter()
            .any(|c| c.when == when && c.action.acts())
    }

    /// `(SELECT *, TRUE AS present[, row_number() …]) AS alias`.
    fn source(&self, numbered: bool) -> String {
        let number = if numbered {
            format!(", row_number() OVER () AS {}", quote(SOURCE_ROW))
        } else {
            String::new()
        };
        format!(
            "(SELECT *, TRUE AS {}{number} FROM ({}) AS \"__deltalite_src\") AS {}",
            quote(PRESENT),
            self.source_sql,
            quote(&self.source_alias)
        )
    }

    fn ta(&self) -> String {
        quote(&self.target.alias)
    }

    fn sa(&self) -> String {
        quote(&self.source_alias)
    }

    /// `CASE WHEN … THEN id … END`: the first of `clauses` whose condition holds, each
    /// guarded by `guard(when)` when given.
    fn selector(&self, clauses: &[&Clause], guard: impl Fn(When) -> Option<String>) -> String {
        if clauses.is_empty() {
            return "CAST(NULL AS BIGINT)".to_string();
        }
        let mut sql = String::from("CASE");
        for c in clauses {
            let test = match (guard(c.when), &c.condition) {
                (Some(g), Some(cond)) => format!("{g} AND ({cond})"),
                (Some(g), None) => g,
                (None, Some(cond)) => format!("({cond})"),
                (None, None) => "TRUE".to_string(),
            };
            sql.push_str(&format!(" WHEN {test} THEN {}", c.id));
        }
        sql.push_str(" END");
        sql
    }

    /// The target columns, each `CASE selector WHEN id THEN value … ELSE otherwise END`.
    fn assigned(
        &self,
        clauses: &[&Clause],
        selector: &str,
        otherwise: impl Fn(&str) -> String,
    ) -> String {
        self.columns
            .iter()
            .map(|col| {
                let arms: Vec<String> = clauses
                    .iter()
                    .filter_map(|c| {
                        let values = match &c.action {
                            Action::Update(v) | Action::Insert(v) => v,
                            _ => return None,
                        };
                        values
                            .iter()
                            .find(|v| &v.column == col)
                            .map(|v| format!(" WHEN {} THEN ({})", c.id, v.sql))
                    })
                    .collect();
                let fallback = otherwise(col);
                if arms.is_empty() {
                    format!("{fallback} AS {}", quote(col))
                } else {
                    format!(
                        "CASE ({selector}){} ELSE {fallback} END AS {}",
                        arms.concat(),
                        quote(col)
                    )
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `, CASE selector WHEN id THEN message … END AS "__deltalite_message"` when one of
    /// `clauses` is an `ERROR` with a message (DuckDB prints a NULL message as `NULL`).
    fn message(clauses: &[&Clause], selector: &str) -> String {
        let arms: Vec<String> = clauses
            .iter()
            .filter_map(|c| match &c.action {
                Action::Raise(Some(message)) => Some(format!(
                    " WHEN {} THEN coalesce(CAST(({message}) AS VARCHAR), 'NULL')",
                    c.id
                )),
                _ => None,
            })
            .collect();
        if arms.is_empty() {
            return String::new();
        }
        format!(
            ", CASE ({selector}){} END AS {}",
            arms.concat(),
            quote(MESSAGE)
        )
    }

    /// For a one-pass query: `, CASE (selector) WHEN id THEN value … END AS "__deltalite_valueN"` for
    /// each target column some of `clauses` updates (NULL for a row none of them updates
    /// it in), and, for each, its position and the clauses that update it.
    fn values_in_place(
        &self,
        clauses: &[&Clause],
        selector: &str,
    ) -> (String, Vec<(usize, Vec<i64>)>) {
        let mut sql = String::new();
        let mut assigned = Vec::new();
        for (at, col) in self.columns.iter().enumerate() {
            let mut arms = String::new();
            let mut ids = Vec::new();
            for c in clauses {
                if let Action::Update(values) = &c.action
                    && let Some(v) = values.iter().find(|v| &v.column == col)
                {
                    arms.push_str(&format!(" WHEN {} THEN ({})", c.id, v.sql));
                    ids.push(c.id);
                }
            }
            if !ids.is_empty() {
                sql.push_str(&format!(
                    ", CASE ({selector}){arms} END AS {}",
                    quote(&format!("{VALUE}{}", assigned.len()))
                ));
                assigned.push((at, ids));
            }
        }
        (sql, assigned)
    }

    fn ids(clauses: &[&Clause]) -> Option<String> {
        let ids: Vec<String> = clauses
            .iter()
            .filter(|c| c.action.acts())
            .map(|c| c.id.to_string())
            .collect();
        (!ids.is_empty()).then(|| ids.join(", "))
    }
}

/// An identifier as DataFusion resolves it: quoted as written, unquoted in lower case.
fn normalized(ident: &datafusion::sql::sqlparser::ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn not_implemented(what: &str) -> ApiError {
    sql_err(format!("Not implemented Error: MERGE {what}"))
}

impl SqlSession {
    pub(super) async fn merge(&mut self, merge: &Merge) -> Result<Output, ApiError> {
        if merge.output.is_some() {
            return Err(not_implemented("... RETURNING"));
        }
        let TableFactor::Table { name, alias, .. } = &merge.table else {
            return Err(not_implemented("into a non-table"));
        };
        let target = Target::new(name, alias.as_ref().map(|a| &a.name))?;
        let name = self.resolve(&target.parts)?;
        let (source_sql, source_alias) = match &merge.source {
            TableFactor::Table { name, alias, .. } => {
                let parts = name_parts(name)?;
                let alias = match alias {
                    Some(a) => normalized(&a.name),
                    None => parts.last().cloned().unwrap_or_default(),
                };
                (format!("SELECT * FROM {name}"), alias)
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                let alias = alias
                    .as_ref()
                    .map(|a| normalized(&a.name))
                    .unwrap_or_else(|| "__deltalite_source".to_string());
                (subquery.to_string(), alias)
            }
            _ => return Err(not_implemented("from a table function")),
        };
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = self.open_for_write(&name).await?;
        let table_schema = table.schema().map_err(delta_err)?;
        let columns: Vec<String> = table_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let defaults = table_schema
            .fields()
            .iter()
            .filter_map(|f| Some((f.name().clone(), super::defaults::default_value_sql(f)?)))
            .collect();
        let source_plan = self
            .plan_sql(&format!(
                "SELECT * FROM ({source_sql}) AS {}",
                quote(&source_alias)
            ))
            .await?;
        let source_schema: SchemaRef = Arc::new(source_plan.schema().as_arrow().clone());
        let mut spec = MergeSpec {
            name,
            target,
            source_sql,
            source_alias,
            source_schema,
            on: predicate_sql(&merge.on),
            on_expr: (*merge.on).clone(),
            clauses: Vec::new(),
            columns,
            defaults,
            kind: ReplaceKind::Delete { predicate: None },
        };
        spec.clauses = bind_clauses(&spec, merge)?;
        spec.kind = merge_kind(&spec);
        self.check_merge_plans(&spec).await?;

        if let Some(count) = self.merge_as_upsert(&spec, &mut table).await? {
            return Ok(Self::count(count as i64));
        }
        let reads = if spec.has(When::NotMatchedByTarget) || spec.has(When::NotMatchedBySource) {
            ReplaceReads::Table
        } else {
            ReplaceReads::OwnFiles
        };
        let mut options = ReplaceOptions::new(spec.kind.clone());
        options.reads = reads;
        let failure = Arc::new(Mutex::new(None));
        let counts = Arc::new(Counts::default());
        let mut planner = MergePlanner {
            session: self,
            spec: &spec,
            target: Arc::clone(&table_schema),
            failure: Arc::clone(&failure),
            counts: Arc::clone(&counts),
        };
        let result = table.replace(&mut planner, &options).await;
        match (result, take_failure(&failure)) {
            (Ok(_), _) => Ok(Self::count(counts.total() as i64)),
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Err(delta_err(e)),
        }
    }

    /// Plan (not run) every expression of the statement against the real tables, so a
    /// wrong column or type is reported as the client wrote it.
    async fn check_merge_plans(&mut self, spec: &MergeSpec) -> Result<(), ApiError> {
        let mut exprs = Vec::new();
        for c in &spec.clauses {
            if let Some(cond) = &c.condition {
                exprs.push(cond.clone());
            }
            if let Action::Update(values) | Action::Insert(values) = &c.action {
                exprs.extend(values.iter().map(|v| v.sql.clone()));
            }
        }
        if exprs.is_empty() {
            exprs.push("1".to_string());
        }
        let select: Vec<String> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| format!("({e}) AS __e{i}"))
            .collect();
        let real = [&spec.name.catalog, &spec.name.schema, &spec.name.table]
            .map(|p| quote(p))
            .join(".");
        self.plan_sql(&format!(
            "SELECT {} FROM {real} AS {} FULL JOIN ({}) AS {} ON {}",
            select.join(", "),
            spec.ta(),
            spec.source_sql,
            spec.sa(),
            spec.on
        ))
        .await?;
        Ok(())
    }

    /// Run the statement as the engine's upsert when it is one (see the module
    /// documentation); `None` when it is not, or when the source is too large to hold.
    async fn merge_as_upsert(
        &mut self,
        spec: &MergeSpec,
        table: &mut deltalite::DeltaLiteTable,
    ) -> Result<Option<u64>, ApiError> {
        let Some(shape) = upsert_shape(spec, table)? else {
            return Ok(None);
        };
        let select: Vec<String> = shape
            .columns
            .iter()
            .map(|(t, s)| format!("{}.{} AS {}", spec.sa(), quote(s), quote(t)))
            .collect();
        let sql = format!(
            "SELECT {} FROM ({}) AS {}",
            select.join(", "),
            spec.source_sql,
            spec.sa()
        );
        let limit = deltalite::Knobs::default().max_source_bytes;
        // The held source is the query pool's like any operator's memory: a source the
        // pool cannot hold (plus one column while its batches become one) takes the
        // general path, whose joins spill, instead of growing the server past the pool.
        let reservation = MemoryConsumer::new("MERGE source (upsert path)")
            .register(&self.ctx.runtime_env().memory_pool);
        let mut stream = self.stream_sql(&sql).await?;
        // The rows get the table's types as the general path assigns them (a DECIMAL
        // into an integer column rounded, as DuckDB does; the engine refuses rounding).
        let table_schema = table.schema().map_err(delta_err)?;
        let assign = |batch: &RecordBatch| {
            super::assign_types(&super::plain::plain_batch(batch), &table_schema).map_err(sql_error)
        };
        let schema = assign(&RecordBatch::new_empty(stream.schema()))?.schema();
        let mut batches = Vec::new();
        while let Some(batch) = stream.try_next().await.map_err(sql_error)? {
            // Plain strings hold their own values; views would hold whole decoded pages
            // (dlt's 4.08M-row nested source: 1.18 GB held as views for ~0.3 GB).
            let batch = assign(&batch)?;
            let size = batch.get_array_memory_size();
            if reservation.size().saturating_add(size) > limit
                || reservation.try_grow(size).is_err()
            {
                return Ok(None);
            }
            batches.push(batch);
        }
        drop(stream);
        let widest = (0..schema.fields().len())
            .map(|i| {
                batches
                    .iter()
                    .map(|b| b.column(i).get_array_memory_size())
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        if reservation.try_grow(widest).is_err() {
            return Ok(None);
        }
        // One batch: the engine works on one, and would copy the pieces into one while
        // they are still held here.
        let source =
            concat_by_column(&schema, batches).map_err(|e| ApiError::Internal(e.to_string()))?;
        reservation.resize(source.get_array_memory_size());
        let keys: Vec<String> = shape.keys.iter().map(|(t, _)| t.clone()).collect();
        let mut options = UpsertOptions::new(keys);
        options.on_duplicate = OnDuplicate::Error;
        options.omitted_columns = OmittedColumns::Keep;
        options.commit_metadata.insert(
            "deltalite.operation".to_string(),
            serde_json::Value::from("merge"),
        );
        // Two source rows with one key are no upsert (SQL inserts both when no target row
        // matches, and refuses them when one does): the engine finds them while it prepares
        // the source, before it reads or writes a file, and the general path takes over.
        let stats = match table
            .upsert(&schema, std::slice::from_ref(&source), &options)
            .await
        {
            Err(DeltaLiteError::DuplicateKeys { .. }) => return Ok(None),
            other => other.map_err(delta_err)?,
        };
        // SQL counts target rows: a key stored twice is two updated rows.
        Ok(Some((stats.rows_replaced + stats.rows_inserted) as u64))
    }
}

/// `pieces` as one batch, built a column at a time and each column's pieces freed once
/// copied: the peak is the pieces plus their widest column, not twice the pieces.
fn concat_by_column(
    schema: &SchemaRef,
    pieces: Vec<RecordBatch>,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    if pieces.is_empty() {
        return Ok(RecordBatch::new_empty(Arc::clone(schema)));
    }
    let rows = pieces.iter().map(RecordBatch::num_rows).sum();
    let mut columns: Vec<Vec<ArrayRef>> =
        vec![Vec::with_capacity(pieces.len()); schema.fields().len()];
    for piece in pieces {
        for (parts, column) in columns.iter_mut().zip(piece.columns()) {
            parts.push(Arc::clone(column));
        }
    }
    let mut whole = Vec::with_capacity(columns.len());
    for parts in columns {
        let arrays: Vec<&dyn Array> = parts.iter().map(AsRef::as_ref).collect();
        whole.push(arrow::compute::concat(&arrays)?);
    }
    RecordBatch::try_new_with_options(
        Arc::clone(schema),
        whole,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// The upsert a `MERGE` is: key pairs and the written columns, (target, source) each.
struct UpsertShape {
    keys: Vec<(String, String)>,
    columns: Vec<(String, String)>,
}

fn upsert_shape(
    spec: &MergeSpec,
    table: &deltalite::DeltaLiteTable,
) -> Result<Option<UpsertShape>, ApiError> {
    let [a, b] = spec.clauses.as_slice() else {
        return Ok(None);
    };
    let (update, insert) = match (&a.action, &b.action) {
        (Action::Update(u), Action::Insert(i)) | (Action::Insert(i), Action::Update(u)) => (u, i),
        _ => return Ok(None),
    };
    if a.condition.is_some()
        || b.condition.is_some()
        || a.when == When::NotMatchedBySource
        || b.when == When::NotMatchedBySource
    {
        return Ok(None);
    }
    let plain = |values: &[Value]| -> Option<Vec<(String, String)>> {
        values
            .iter()
            .map(|v| Some((v.column.clone(), v.source_column.clone()?)))
            .collect()
    };
    let (Some(mut update), Some(mut insert)) = (plain(update), plain(insert)) else {
        return Ok(None);
    };
    let Some(keys) = key_pairs(spec) else {
        return Ok(None);
    };
    // Keys are written by the insert as the source's key columns; the update may or may
    // not restate them (a matched row's key equals the source's).
    for key in &keys {
        if !insert.contains(key) {
            return Ok(None);
        }
        update.retain(|(t, s)| !(t == &key.0 && s == &key.1));
    }
    let insert_keys_removed: Vec<(String, String)> = insert
        .iter()
        .filter(|pair| !keys.contains(pair))
        .cloned()
        .collect();
    update.sort();
    let mut rest = insert_keys_removed;
    rest.sort();
    if update != rest {
        return Ok(None);
    }
    let schema = table.schema().map_err(delta_err)?;
    for (t, s) in &keys {
        let target_type = schema
            .field_with_name(t)
            .map_err(|e| sql_err(e.to_string()))?
            .data_type();
        let Ok(source_field) = spec.source_schema.field_with_name(s) else {
            return Ok(None);
        };
        let source_type = source_field.data_type();
        let stringy =
            |d: &DataType| matches!(d, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        // Integers of other widths compare by value in SQL and cast losslessly in the
        // engine; a source key the target type cannot hold matches nothing in SQL and
        // then fails the insert's cast, as the engine's cast fails: the same outcome.
        let same_kind = target_type == source_type
            || (stringy(target_type) && stringy(source_type))
            || (target_type.is_integer() && source_type.is_integer());
        if target_type.is_floating() || !same_kind {
            return Ok(None);
        }
    }
    // Identity is per partition in the engine: every partition column must be a key.
    let partitions = table
        .delta_table()
        .snapshot()
        .map_err(delta_err)?
        .metadata()
        .partition_columns()
        .to_vec();
    if partitions.iter().any(|p| !keys.iter().any(|(t, _)| t == p)) {
        return Ok(None);
    }
    insert.sort();
    insert.dedup();
    // Writing only key columns, a match changes nothing, so the engine leaves the stored
    // rows unread and cannot count them; SQL counts every matched target row.
    if insert.iter().all(|(t, _)| keys.iter().any(|(k, _)| k == t)) {
        return Ok(None);
    }
    Ok(Some(UpsertShape {
        keys,
        columns: insert,
    }))
}

/// `ON` as (target column, source column) equalities, when it is only those.
fn key_pairs(spec: &MergeSpec) -> Option<Vec<(String, String)>> {
    fn conjuncts<'e>(e: &'e SqlExpr, out: &mut Vec<&'e SqlExpr>) {
        match e {
            SqlExpr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                conjuncts(left, out);
                conjuncts(right, out);
            }
            SqlExpr::Nested(inner) => conjuncts(inner, out),
            other => out.push(other),
        }
    }
    let side = |e: &SqlExpr| -> Option<(bool, String)> {
        let SqlExpr::CompoundIdentifier(parts) = e else {
            return None;
        };
        let [qualifier, column] = parts.as_slice() else {
            return None;
        };
        let is = |alias: &str| {
            if qualifier.quote_style.is_some() {
                qualifier.value == alias
            } else {
                qualifier.value.eq_ignore_ascii_case(alias)
            }
        };
        if is(&spec.target.alias) && !is(&spec.source_alias) {
            Some((true, column_named(&spec.columns, &column.value)?))
        } else if is(&spec.source_alias) && !is(&spec.target.alias) {
            let names: Vec<String> = spec
                .source_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            Some((false, column_named(&names, &column.value)?))
        } else {
            None
        }
    };
    let mut parts = Vec::new();
    conjuncts(&spec.on_expr, &mut parts);
    let mut keys: Vec<(String, String)> = Vec::new();
    for part in parts {
        let SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = part
        else {
            return None;
        };
        let pair = match (side(left)?, side(right)?) {
            ((true, t), (false, s)) | ((false, s), (true, t)) => (t, s),
            _ => return None,
        };
        if keys.iter().any(|(t, _)| t == &pair.0) {
            return None;
        }
        keys.push(pair);
    }
    (!keys.is_empty()).then_some(keys)
}

/// Bind the clauses: placeholders expanded, columns resolved against the target.
fn bind_clauses(spec: &MergeSpec, merge: &Merge) -> Result<Vec<Clause>, ApiError> {
    let source_columns: Vec<String> = spec
        .source_schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let sa = quote(&spec.source_alias);
    let from_source = |target: &str, source: &str| Value {
        column: target.to_string(),
        sql: format!("{sa}.{}", quote(source)),
        source_column: Some(source.to_string()),
    };
    let by_name = |when: When| -> Result<Vec<Value>, ApiError> {
        if when == When::NotMatchedBySource {
            return Err(sql_err(
                "Binder Error: BY NAME needs a source row: not in WHEN NOT MATCHED BY SOURCE",
            ));
        }
        source_columns
            .iter()
            .map(|s| match column_named(&spec.columns, s) {
                Some(t) => Ok(from_source(&t, s)),
                None => Err(sql_err(format!(
                    "Binder Error: Column \"{s}\" of the source does not exist in table \"{}\"",
                    spec.name.table
                ))),
            })
            .collect()
    };
    let by_position = |when: When| -> Result<Vec<Value>, ApiError> {
        if when == When::NotMatchedBySource {
            return Err(sql_err(
                "Binder Error: SET * needs a source row: not in WHEN NOT MATCHED BY SOURCE",
            ));
        }
        if source_columns.len() != spec.columns.len() {
            return Err(sql_err(format!(
                "Binder Error: table \"{}\" has {} columns but the source has {}",
                spec.name.table,
                spec.columns.len(),
                source_columns.len()
            )));
        }
        Ok(spec
            .columns
            .iter()
            .zip(&source_columns)
            .map(|(t, s)| from_source(t, s))
            .collect())
    };
    let target_column = |name: &str| {
        column_named(&spec.columns, name).ok_or_else(|| {
            sql_err(format!(
                "Binder Error: Table \"{}\" does not have a column with name \"{name}\"",
                spec.name.table
            ))
        })
    };
    let value = |column: String, expr: &SqlExpr| {
        // `SET c = DEFAULT`, `VALUES (DEFAULT)`: the column's default, else NULL.
        if super::defaults::is_default(expr) {
            let sql = spec.defaults.get(&column).cloned();
            return Value {
                column,
                sql: sql.unwrap_or_else(|| "NULL".to_string()),
                source_column: None,
            };
        }
        let source_column = match expr {
            SqlExpr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let q = &parts[0];
                let same = if q.quote_style.is_some() {
                    q.value == spec.source_alias
                } else {
                    q.value.eq_ignore_ascii_case(&spec.source_alias)
                };
                same.then(|| column_named(&source_columns, &parts[1].value))
                    .flatten()
            }
            _ => None,
        };
        Value {
            column,
            sql: predicate_sql(expr),
            source_column,
        }
    };

    let mut clauses = Vec::new();
    for (i, clause) in merge.clauses.iter().enumerate() {
        let when = match clause.clause_kind {
            MergeClauseKind::Matched => When::Matched,
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                When::NotMatchedByTarget
            }
            MergeClauseKind::NotMatchedBySource => When::NotMatchedBySource,
        };
        let action = match &clause.action {
            MergeAction::Delete { .. } => Action::Delete,
            MergeAction::Update(update) => {
                if update.update_predicate.is_some() || update.delete_predicate.is_some() {
                    return Err(not_implemented("UPDATE ... WHERE / DELETE WHERE"));
                }
                let placeholder = match update.assignments.as_slice() {
                    [only] => match &only.target {
                        AssignmentTarget::ColumnName(c) => {
                            let parts = name_parts(c)?;
                            match parts.as_slice() {
                                [p] if [BY_NAME, BY_POSITION, DO_NOTHING, RAISE]
                                    .contains(&p.as_str()) =>
                                {
                                    Some(p.clone())
                                }
                                _ => None,
                            }
                        }
                        _ => None,
                    },
                    _ => None,
                };
                match placeholder.as_deref() {
                    Some(BY_NAME) => Action::Update(by_name(when)?),
                    Some(BY_POSITION) => Action::Update(by_position(when)?),
                    Some(DO_NOTHING) => Action::Nothing,
                    // `ERROR message` arrives parenthesised, a bare `ERROR` as NULL.
                    Some(_) => Action::Raise(match &update.assignments[0].value {
                        SqlExpr::Nested(message) => Some(predicate_sql(message)),
                        _ => None,
                    }),
                    None => {
                        let mut values: Vec<Value> = Vec::new();
                        for a in &update.assignments {
                            let AssignmentTarget::ColumnName(c) = &a.target else {
                                return Err(not_implemented("tuple assignments"));
                            };
                            let parts = name_parts(c)?;
                            let written = parts.last().map_or("", |s| s.as_str());
                            // DuckDB names the missing column of an update so.
                            let col = column_named(&spec.columns, written).ok_or_else(|| {
                                sql_err(format!(
                                    "Binder Error: Referenced update column {written} not found in table!"
                                ))
                            })?;
                            if values.iter().any(|v| v.column == col) {
                                return Err(sql_err(format!(
                                    "Binder Error: Multiple assignments to same column \"{col}\""
                                )));
                            }
                            values.push(value(col, &a.value));
                        }
                        Action::Update(values)
                    }
                }
            }
            MergeAction::Insert(insert) => {
                if insert.insert_predicate.is_some() {
                    return Err(not_implemented("INSERT ... WHERE"));
                }
                let listed: Vec<String> = insert
                    .columns
                    .iter()
                    .map(|c| name_parts(c).map(|p| p.last().cloned().unwrap_or_default()))
                    .collect::<Result<_, _>>()?;
                match (&insert.kind, listed.as_slice()) {
                    (MergeInsertKind::Row, []) => Action::Insert(by_position(when)?),
                    (MergeInsertKind::Row, [p]) if p == BY_NAME => Action::Insert(by_name(when)?),
                    (MergeInsertKind::Row, [p]) if p == DO_NOTHING => Action::Nothing,
                    (MergeInsertKind::Row, [p]) if p == RAISE => Action::Raise(None),
                    (MergeInsertKind::Values(values), [p]) if p == RAISE => {
                        match values.rows.as_slice() {
                            [row] if row.content.len() == 1 => {
                                Action::Raise(Some(predicate_sql(&row.content[0])))
                            }
                            _ => return Err(sql_err("Parser Error: ERROR takes one message")),
                        }
                    }
                    (MergeInsertKind::Row, _) => {
                        return Err(not_implemented("INSERT (columns) ROW"));
                    }
                    (MergeInsertKind::Values(values), _) => {
                        let [row] = values.rows.as_slice() else {
                            return Err(sql_err(
                                "Binder Error: MERGE INSERT takes exactly one VALUES row",
                            ));
                        };
                        let columns = if listed.is_empty() {
                            spec.columns.clone()
                        } else {
                            listed
                                .iter()
                                .map(|c| target_column(c))
                                .collect::<Result<Vec<_>, _>>()?
                        };
                        let row = &row.content;
                        if columns.len() != row.len() {
                            return Err(sql_err(format!(
                                "Binder Error: Column name/value mismatch for insert on {}: expected {} columns but {} values were supplied",
                                spec.name.table,
                                columns.len(),
                                row.len()
                            )));
                        }
                        Action::Insert(
                            columns
                                .into_iter()
                                .zip(row)
                                .map(|(c, e)| value(c, e))
                                .collect(),
                        )
                    }
                }
            }
        };
        // DuckDB refuses a clause no row can reach.
        if clauses
            .iter()
            .any(|c: &Clause| c.when == when && c.condition.is_none())
        {
            let kind = when.sql();
            return Err(sql_err(format!(
                "Parser Error: Unconditional {kind} clause was already defined - any following {kind} clause would be unreachable"
            )));
        }
        clauses.push(Clause {
            id: i as i64 + 1,
            when,
            condition: clause.predicate.as_ref().map(predicate_sql),
            action,
        });
    }
    if clauses.is_empty() {
        return Err(sql_err(
            "Parser Error: MERGE needs at least one WHEN clause",
        ));
    }
    Ok(clauses)
}

fn merge_kind(spec: &MergeSpec) -> ReplaceKind {
    let record = |when: When| -> Vec<MergePredicate> {
        spec.of(when)
            .into_iter()
            .map(|c| MergePredicate {
                action_type: c.action.name().to_string(),
                predicate: c.condition.clone(),
            })
            .collect()
    };
    ReplaceKind::Merge {
        on: spec.on.clone(),
        matched: record(When::Matched),
        not_matched: record(When::NotMatchedByTarget),
        not_matched_by_source: record(When::NotMatchedBySource),
    }
}

/// Rows each kind of clause took in the latest plan.
#[derive(Default)]
struct Counts {
    updated: AtomicU64,
    deleted: AtomicU64,
    inserted: AtomicU64,
}

impl Counts {
    fn reset(&self) {
        for c in [&self.updated, &self.deleted, &self.inserted] {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn total(&self) -> u64 {
        self.updated.load(Ordering::Relaxed)
            + self.deleted.load(Ordering::Relaxed)
            + self.inserted.load(Ordering::Relaxed)
    }
}

/// Plans the general path (see the module documentation).
struct MergePlanner<'s> {
    session: &'s mut SqlSession,
    spec: &'s MergeSpec,
    /// The table's schema: the types the rows are assigned (`super::assign_types`).
    target: arrow::datatypes::SchemaRef,
    failure: Arc<Mutex<Option<ApiError>>>,
    counts: Arc<Counts>,
}

impl MergePlanner<'_> {
    async fn plan_merge(&mut self, table: &DeltaTable) -> Result<Replacement, ApiError> {
        self.counts.reset();
        let spec = self.spec;
        let scan = table
            .table_provider()
            .with_file_column(FILE)
            .await
            .map_err(delta_err)?;
        self.session.grant_table(table);
        self.session.register_hidden(TARGET_ALL, scan)?;

        let matched = spec.of(When::Matched);
        let by_source = spec.of(When::NotMatchedBySource);
        let inserting = spec.of(When::NotMatchedByTarget);
        let changing: Vec<&Clause> = matched.iter().chain(&by_source).copied().collect();
        let candidates = if MergeSpec::ids(&changing).is_some() {
            self.candidate_files(&matched, &by_source).await?
        } else {
            Vec::new()
        };
        // On a table that writes deletion vectors, a file with few changed rows is
        // marked (its changed rows deleted in place, their new versions written) instead
        // of rewritten.
        let policy = MarkingPolicy::of(table, Knobs::default().deletion_vector_max_share)
            .map_err(delta_err)?;
        let (marked_files, files): (Vec<_>, Vec<_>) =
            candidates.into_iter().partition(|(name, changed)| {
                policy
                    .as_ref()
                    .is_some_and(|p| p.worth_marking(name, *changed))
            });
        let files: Vec<String> = files.into_iter().map(|(name, _)| name).collect();
        let marked_files: Vec<String> = marked_files.into_iter().map(|(name, _)| name).collect();
        let mut mark = Vec::with_capacity(marked_files.len());
        for path in &marked_files {
            mark.push(MarkedRows {
                path: path.clone(),
                live_rows: self.changed_rows(table, path, &matched, &by_source).await?,
            });
        }

        let (ta, sa, on) = (spec.ta(), spec.sa(), &spec.on);
        let mut queries = Vec::new();
        if !marked_files.is_empty() {
            // The new versions of a marked file's changed rows (deleted rows are dropped
            // by `take_clauses`); its other rows stay where they are.
            self.session
                .register_files(MARKED, table, marked_files.clone())
                .await?;
            let target = format!("{} AS {ta}", quote(MARKED));
            let keep = |c: &str| format!("{ta}.{}", quote(c));
            for (clauses, join) in [(&matched, "JOIN"), (&by_source, "LEFT ANTI JOIN")] {
                if let Some(ids) = MergeSpec::ids(clauses) {
                    let sel = spec.selector(clauses, |_| None);
                    queries.push(Query::plain(format!(
                        "SELECT {}{}, ({sel}) AS {clause} FROM {target} {join} {source} ON {on} WHERE ({sel}) IN ({ids})",
                        spec.assigned(clauses, &sel, keep),
                        MergeSpec::message(clauses, &sel),
                        clause = quote(CLAUSE),
                        source = spec.source(false),
                    )));
                }
            }
        }
        if !files.is_empty() {
            self.session
                .register_files(TARGET, table, files.clone())
                .await?;
            let target = format!("{} AS {ta}", quote(TARGET));
            let plain: Vec<String> = spec
                .columns
                .iter()
                .map(|c| format!("{ta}.{}", quote(c)))
                .collect();
            let plain = plain.join(", ");
            let keep = |c: &str| format!("{ta}.{}", quote(c));
            let acting = MergeSpec::ids(&matched);
            let sel = spec.selector(&matched, |_| None);
            // Files small enough to be read as one stream (DataFusion splits no scan
            // under `repartition_file_min_size`) are rewritten in one pass in their
            // rows' order: numbering them and sorting by the number costs little there.
            // A larger rewrite is read side by side anyway and keeps the two queries,
            // which stream (the number would gather it into one partition and a sort).
            let min_split = self
                .session
                .ctx
                .state()
                .config()
                .options()
                .optimizer
                .repartition_file_min_size as u64;
            let one_stream = deltalite::bytes_of(table, &files)
                .map_err(delta_err)?
                .is_some_and(|bytes| bytes < min_split);
            if let (true, Some(ids)) = (
                one_stream && by_source.is_empty() && self.flat_updates(&matched),
                &acting,
            ) {
                // One pass over the files, each row updated (or deleted) where it is.
                let present = format!("{sa}.{}", quote(PRESENT));
                let taken = spec.selector(&matched, |_| Some(format!("{present} IS NOT NULL")));
                let (values, assigned) = spec.values_in_place(&matched, &taken);
                self.session
                    .register_view(
                        NUMBERED,
                        &format!(
                            "SELECT row_number() OVER () AS {}, * FROM {}",
                            quote(ORDINAL),
                            quote(TARGET)
                        ),
                    )
                    .await?;
                queries.push(Query {
                    sql: format!(
                        "SELECT {plain}{values}{}, ({taken}) AS {clause} FROM {} AS {ta} \
                         LEFT JOIN {source} ON ({on}) AND ({sel}) IN ({ids}) ORDER BY {ta}.{ord}",
                        MergeSpec::message(&matched, &taken),
                        quote(NUMBERED),
                        clause = quote(CLAUSE),
                        ord = quote(ORDINAL),
                        source = spec.source(false),
                    ),
                    in_place: Some(assigned),
                });
            } else {
                if let Some(ids) = &acting {
                    queries.push(Query::plain(format!(
                    "SELECT {}{}, ({sel}) AS {clause} FROM {target} JOIN {source} ON {on} WHERE ({sel}) IN ({ids})",
                    spec.assigned(&matched, &sel, keep),
                    MergeSpec::message(&matched, &sel),
                    clause = quote(CLAUSE),
                    source = spec.source(false),
                )));
                }
                let untouched = match &acting {
                    Some(ids) => format!("({on}) AND ({sel}) IN ({ids})"),
                    None => "FALSE".to_string(),
                };
                let null_clause = format!("CAST(NULL AS BIGINT) AS {}", quote(CLAUSE));
                if by_source.is_empty() {
                    queries.push(Query::plain(format!(
                    "SELECT {plain}, {null_clause} FROM {target} LEFT ANTI JOIN {} ON {untouched}",
                    spec.source(false)
                )));
                } else {
                    // Matched rows no clause changes, then the rows no source row matches.
                    queries.push(Query::plain(format!(
                    "SELECT {plain}, {null_clause} FROM (SELECT {ta}.* FROM {target} LEFT SEMI JOIN {source} ON {on}) AS {ta} LEFT ANTI JOIN {source} ON {untouched}",
                    source = spec.source(false)
                )));
                    let sel = spec.selector(&by_source, |_| None);
                    queries.push(Query::plain(format!(
                        "SELECT {}{}, ({sel}) AS {} FROM {target} LEFT ANTI JOIN {} ON {on}",
                        spec.assigned(&by_source, &sel, keep),
                        MergeSpec::message(&by_source, &sel),
                        quote(CLAUSE),
                        spec.source(false)
                    )));
                }
            }
        }
        if let Some(ids) = MergeSpec::ids(&inserting) {
            let sel = spec.selector(&inserting, |_| None);
            let clause = quote(CLAUSE);
            queries.push(Query::plain(format!(
                "SELECT {}{}, {clause} FROM (SELECT {sa}.*, ({sel}) AS {clause} FROM {} LEFT ANTI JOIN {} AS {ta} ON {on}) AS {sa} WHERE {clause} IN ({ids})",
                spec.assigned(&inserting, &clause, |col| {
                    spec.defaults
                        .get(col)
                        .cloned()
                        .unwrap_or_else(|| "NULL".to_string())
                }),
                MergeSpec::message(&inserting, &clause),
                spec.source(false),
                quote(TARGET_ALL),
            )));
        }
        let mut streams = Vec::new();
        for Query { sql, in_place } in queries {
            let stream = self.session.stream_sql(&sql).await?;
            let rows = engine_rows(stream, Arc::clone(&self.failure));
            let clauses = Arc::new(self.spec.clauses.clone());
            let counts = Arc::clone(&self.counts);
            let failure = Arc::clone(&self.failure);
            let target = Arc::clone(&self.target);
            streams.push(rows.and_then(move |batch| {
                let out = match &in_place {
                    Some(assigned) => updates_in_place(&batch, &target, assigned),
                    None => Ok(batch),
                }
                .and_then(|batch| take_clauses(&batch, &clauses, &counts))
                .and_then(|b| super::assign_types(&b, &target).map_err(sql_error))
                .map_err(|e| DeltaLiteError::Other(keep_failure(&failure, e)));
                futures::future::ready(out)
            }));
        }
        Ok(Replacement {
            remove: files,
            rows: futures::stream::iter(streams).flatten().boxed(),
            mark,
        })
    }

    /// Whether every column `clauses` update is of a flat type: a nested one keeps the
    /// engine's own casting rules, which a value put in place would bypass.
    fn flat_updates(&self, clauses: &[&Clause]) -> bool {
        clauses.iter().all(|c| match &c.action {
            Action::Update(values) => values.iter().all(|v| {
                self.target
                    .field_with_name(&v.column)
                    .is_ok_and(|f| !f.data_type().is_nested())
            }),
            _ => true,
        })
    }

    /// The rows of `path` some clause changes, as ordinals of the rows the file holds
    /// (what [`MarkedRows::live_rows`] wants): the same joins and clause selectors as the
    /// queries that write their new versions, over a scan of that one file numbered in
    /// file order (one partition, as `rewrite.rs` numbers a file for `DELETE`).
    async fn changed_rows(
        &mut self,
        table: &DeltaTable,
        path: &str,
        matched: &[&Clause],
        by_source: &[&Clause],
    ) -> Result<Vec<u64>, ApiError> {
        let spec = self.spec;
        self.session
            .register_files(MARKED, table, vec![path.to_string()])
            .await?;
        let (ta, on, row) = (spec.ta(), &spec.on, quote(ROW));
        let numbered = format!(
            "(SELECT row_number() OVER () - 1 AS {row}, * FROM {}) AS {ta}",
            quote(MARKED)
        );
        let mut parts = Vec::new();
        for (clauses, join) in [(matched, "JOIN"), (by_source, "LEFT ANTI JOIN")] {
            if let Some(ids) = MergeSpec::ids(clauses) {
                let sel = spec.selector(clauses, |_| None);
                parts.push(format!(
                    "SELECT {ta}.{row} FROM {numbered} {join} {} ON {on} WHERE ({sel}) IN ({ids})",
                    spec.source(false)
                ));
            }
        }
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        let found = {
            let _one = OptionsOverride::one_partition(&self.session.ctx);
            self.session.collect_sql(&parts.join(" UNION ALL ")).await
        };
        let mut rows = row_numbers(&found?)?;
        rows.sort_unstable();
        rows.dedup();
        Ok(rows)
    }

    /// Phase 1: the files holding a row some clause changes; a row more than one source
    /// row would change fails the statement.
    async fn candidate_files(
        &mut self,
        matched: &[&Clause],
        by_source: &[&Clause],
    ) -> Result<Vec<(String, u64)>, ApiError> {
        let spec = self.spec;
        let (ta, sa) = (spec.ta(), spec.sa());
        let present = format!("{sa}.{}", quote(PRESENT));
        let changing: Vec<&Clause> = matched.iter().chain(by_source).copied().collect();
        let join = if by_source.is_empty() {
            "JOIN"
        } else {
            "LEFT JOIN"
        };
        let sel = spec.selector(&changing, |when| match (when, by_source.is_empty()) {
            (_, true) => None,
            (When::NotMatchedBySource, false) => Some(format!("{present} IS NULL")),
            (_, false) => Some(format!("{present} IS NOT NULL")),
        });
        let ids = MergeSpec::ids(&changing).unwrap_or_else(|| "NULL".to_string());
        let group: Vec<String> = std::iter::once(format!("{ta}.{}", quote(FILE)))
            .chain(spec.columns.iter().map(|c| format!("{ta}.{}", quote(c))))
            .collect();
        let sql = format!(
            "SELECT \"f\", max(\"act\") AS \"act\", max(CASE WHEN \"m\" > 1 AND \"act\" = 1 THEN 1 ELSE 0 END) AS \"bad\", sum(\"act\" * \"n\") AS \"changed\" \
             FROM (SELECT {ta}.{file} AS \"f\", count(DISTINCT {sa}.{sid}) AS \"m\", count(*) AS \"n\", \
                   max(CASE WHEN ({sel}) IN ({ids}) THEN 1 ELSE 0 END) AS \"act\" \
                   FROM {target} AS {ta} {join} {source} ON {on} GROUP BY {group}) AS \"__p\" \
             GROUP BY \"f\"",
            file = quote(FILE),
            sid = quote(SOURCE_ROW),
            target = quote(TARGET_ALL),
            source = spec.source(true),
            on = spec.on,
            group = group.join(", "),
        );
        let found = self.session.collect_sql(&sql).await?;
        let mut files = Vec::new();
        for batch in &found {
            let names = arrow::compute::cast(batch.column(0), &DataType::Utf8)
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            let names = names.as_string::<i32>();
            let int = |i: usize| {
                arrow::compute::cast(batch.column(i), &DataType::Int64)
                    .map_err(|e| ApiError::Internal(e.to_string()))
            };
            let (act, bad, changed) = (int(1)?, int(2)?, int(3)?);
            let (act, bad, changed) = (
                act.as_primitive::<Int64Type>(),
                bad.as_primitive::<Int64Type>(),
                changed.as_primitive::<Int64Type>(),
            );
            for row in 0..batch.num_rows() {
                if bad.value(row) == 1 {
                    return Err(sql_err(format!(
                        "Invalid Input Error: MERGE INTO \"{}\": a target row matches more than one source row that would change it",
                        spec.name.table
                    )));
                }
                if act.value(row) == 1 && names.is_valid(row) {
                    // Rows a clause changes, for the marking policy; identical rows of a
                    // file share a group (`n` joined pairs; at most one source row
                    // changes a row, or the statement failed above).
                    let changed = u64::try_from(changed.value(row)).unwrap_or(0);
                    files.push((names.value(row).to_string(), changed));
                }
            }
        }
        Ok(files)
    }
}

/// One of a plan's queries over the target; `in_place` when its rows carry the updates'
/// values beside the table's columns ([`MergeSpec::values_in_place`]).
struct Query {
    sql: String,
    in_place: Option<Vec<(usize, Vec<i64>)>>,
}

impl Query {
    fn plain(sql: String) -> Self {
        Self {
            sql,
            in_place: None,
        }
    }
}

/// A batch of a one-pass query ([`MergeSpec::values_in_place`]) as the table's columns
/// (each value put in place where the row took a clause assigning it), the message and
/// clause columns after them.
fn updates_in_place(
    batch: &RecordBatch,
    target: &arrow::datatypes::Schema,
    assigned: &[(usize, Vec<i64>)],
) -> Result<RecordBatch, ApiError> {
    let internal = |e: arrow::error::ArrowError| ApiError::Internal(e.to_string());
    let clause = arrow::compute::cast(batch.column(batch.num_columns() - 1), &DataType::Int64)
        .map_err(internal)?;
    let clause = clause.as_primitive::<Int64Type>();
    let masks: Vec<(usize, BooleanArray)> = assigned
        .iter()
        .map(|(at, ids)| {
            let hit = clause
                .iter()
                .map(|c| Some(c.is_some_and(|c| ids.contains(&c))))
                .collect();
            (*at, hit)
        })
        .collect();
    let (schema, mut columns) = in_place(batch, target, &masks).map_err(sql_error)?;
    let rest = target.fields().len() + assigned.len();
    let mut fields = schema.fields().to_vec();
    fields.extend(batch.schema().fields()[rest..].iter().cloned());
    columns.extend(batch.columns()[rest..].iter().cloned());
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).map_err(internal)
}

/// Apply the clause column of a plan's batch: count, drop deleted rows, raise `ERROR`
/// clauses, and return the target's columns.
fn take_clauses(
    batch: &RecordBatch,
    clauses: &[Clause],
    counts: &Counts,
) -> Result<RecordBatch, ApiError> {
    let internal = |e: arrow::error::ArrowError| ApiError::Internal(e.to_string());
    let last = batch.num_columns() - 1;
    let message = batch.schema().index_of(MESSAGE).ok();
    let ids = arrow::compute::cast(batch.column(last), &DataType::Int64).map_err(internal)?;
    let ids = ids.as_primitive::<Int64Type>();
    let mut keep = Vec::with_capacity(batch.num_rows());
    let (mut updated, mut deleted, mut inserted) = (0u64, 0u64, 0u64);
    for row in 0..batch.num_rows() {
        let clause = ids
            .is_valid(row)
            .then(|| clauses.iter().find(|c| c.id == ids.value(row)))
            .flatten();
        keep.push(match clause.map(|c| (&c.action, c.when)) {
            None | Some((Action::Nothing, _)) => true,
            Some((Action::Update(_), _)) => {
                updated += 1;
                true
            }
            Some((Action::Insert(_), _)) => {
                inserted += 1;
                true
            }
            Some((Action::Delete, _)) => {
                deleted += 1;
                false
            }
            Some((Action::Raise(_), when)) => {
                let text = message
                    .map(|m| arrow::compute::cast(batch.column(m), &DataType::Utf8))
                    .transpose()
                    .map_err(internal)?
                    .and_then(|m| {
                        let m = m.as_string::<i32>();
                        m.is_valid(row).then(|| format!(": {}", m.value(row)))
                    })
                    .unwrap_or_default();
                return Err(sql_err(format!(
                    "Constraint Error: Merge error condition {}{text}",
                    when.sql()
                )));
            }
        });
    }
    counts.updated.fetch_add(updated, Ordering::Relaxed);
    counts.deleted.fetch_add(deleted, Ordering::Relaxed);
    counts.inserted.fetch_add(inserted, Ordering::Relaxed);
    let columns: Vec<usize> = (0..message.unwrap_or(last)).collect();
    let projected = batch.project(&columns).map_err(internal)?;
    if deleted == 0 {
        return Ok(projected);
    }
    arrow::compute::filter_record_batch(&projected, &BooleanArray::from(keep)).map_err(internal)
}

impl ReplacePlanner for MergePlanner<'_> {
    fn plan<'a>(
        &'a mut self,
        table: &'a DeltaTable,
    ) -> BoxFuture<'a, deltalite::Result<Replacement>> {
        Box::pin(async move {
            self.plan_merge(table)
                .await
                .map_err(|e| DeltaLiteError::Other(keep_failure(&self.failure, e)))
        })
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn pieces_become_the_batch_concat_batches_gives() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let piece = |ids: Vec<i64>, names: Vec<Option<&str>>| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(ids)) as ArrayRef,
                    Arc::new(StringArray::from(names)) as ArrayRef,
                ],
            )
            .unwrap()
        };
        let pieces = vec![
            piece(vec![1, 2], vec![Some("a"), None]),
            piece(vec![], vec![]),
            piece(vec![3], vec![Some("c")]),
        ];
        let expected = arrow::compute::concat_batches(&schema, &pieces).unwrap();
        assert_eq!(concat_by_column(&schema, pieces).unwrap(), expected);
        assert_eq!(expected.num_rows(), 3);
        let empty = concat_by_column(&schema, Vec::new()).unwrap();
        assert_eq!((empty.num_rows(), empty.schema()), (0, Arc::clone(&schema)));
    }
}
