//! `DELETE` and `UPDATE` through the engine: DataFusion evaluates the predicate (any form
//! it can plan in a filter: subqueries, correlated `EXISTS`, row-value `IN` rewritten to
//! `EXISTS`), the engine replaces exactly the files holding a matching row, in one commit
//! (`DeltaLiteTable::replace`), and files without a match are not touched.
//!
//! A plan, against one snapshot of the target:
//! 1. `SELECT file, count(*) FROM target AS alias WHERE p GROUP BY file`: the files to
//!    replace and the rows the statement matches;
//! 2. over those files only, the rows that replace them: `WHERE (p) IS NOT TRUE` (kept
//!    rows), plus for `UPDATE` the matched rows with the assignments applied.
//!
//! On a table that writes deletion vectors, a file whose matched rows stay within
//! `deletion_vector_max_share` (`deltalite::MarkingPolicy`) is marked instead: its rows
//! are numbered over a scan of that one file in file order (`row_number() OVER ()`
//! below the filter, in one partition), the matching numbers go to the engine as
//! `deltalite::MarkedRows`, and only an `UPDATE`'s new row versions are written.
//!
//! Subqueries naming the target read the table as it was before the statement, as SQL
//! wants: the target is registered under a hidden name and only aliased as the target.

use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray};
use arrow::array::{ArrayRef, BooleanArray};
use arrow::compute::kernels::zip::zip;
use arrow::datatypes::Int64Type;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::error::DataFusionError;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Delete, Expr as SqlExpr, FromTable, Ident, TableFactor, TableWithJoins,
    Update, UpdateTableFromKind,
};
use deltalite::deltalake::DeltaTable;
use deltalite::{
    DeltaLiteError, Knobs, MarkedRows, MarkingPolicy, ReplaceKind, ReplaceOptions, ReplacePlanner,
    Replacement,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::overrides::OptionsOverride;
use super::{
    Output, SqlSession, assign_types, assigned_rows, delta_err, engine_rows, keep_failure,
    name_parts, sql_err, table_missing, take_failure,
};
use crate::error::ApiError;

/// Rows on their way to the engine.
type EngineRows = BoxStream<'static, deltalite::Result<RecordBatch>>;

/// The hidden name of the statement's target while it is planned.
pub(super) const TARGET: &str = "__deltalite_target";
/// The file column of the target's scan.
pub(super) const FILE: &str = "__deltalite_file";
/// The hidden name of the files a statement marks with deletion vectors.
pub(super) const MARKED: &str = "__deltalite_marked";
/// The row number of a marked file's rows.
pub(super) const ROW: &str = "__deltalite_row";
/// The prefix of the columns that carry an update's values beside the table's.
pub(super) const VALUE: &str = "__deltalite_value";
/// Whether a row of an update in place is updated.
const HIT: &str = "__deltalite_hit";

/// An identifier, quoted for the SQL this module writes.
pub(super) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl SqlSession {
    pub(super) async fn delete(&mut self, delete: &Delete) -> Result<Output, ApiError> {
        let tables = match &delete.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
        };
        let [twj] = tables.as_slice() else {
            return Err(sql_err("Not implemented Error: DELETE from several tables"));
        };
        if !twj.joins.is_empty() {
            return Err(sql_err("Not implemented Error: DELETE from a join"));
        }
        if let Some(using) = &delete.using {
            let source = single_source(using, "DELETE ... USING")?;
            let on = delete
                .selection
                .as_ref()
                .map_or("TRUE".to_string(), |p| p.to_string());
            return self
                .merge_sql(&format!(
                    "MERGE INTO {} USING {source} ON {on} WHEN MATCHED THEN DELETE",
                    twj.relation
                ))
                .await;
        }
        let TableFactor::Table { name, alias, .. } = &twj.relation else {
            return Err(sql_err("Not implemented Error: DELETE from a non-table"));
        };
        let target = Target::new(name, alias.as_ref().map(|a| &a.name))?;
        let predicate = delete.selection.as_ref().map(predicate_sql);
        let kind = ReplaceKind::Delete {
            predicate: delete.selection.as_ref().map(|p| p.to_string()),
        };
        self.rewrite_where(target, predicate, None, kind).await
    }

    pub(super) async fn update(&mut self, update: &Update) -> Result<Output, ApiError> {
        let TableFactor::Table { name, alias, .. } = &update.table.relation else {
            return Err(sql_err("Not implemented Error: UPDATE of a non-table"));
        };
        if !update.table.joins.is_empty() {
            return Err(sql_err("Not implemented Error: UPDATE of a join"));
        }
        if let Some(UpdateTableFromKind::BeforeSet(from) | UpdateTableFromKind::AfterSet(from)) =
            &update.from
        {
            let source = single_source(from, "UPDATE ... FROM")?;
            let on = update
                .selection
                .as_ref()
                .map_or("TRUE".to_string(), |p| p.to_string());
            let set: Vec<String> = update.assignments.iter().map(|a| a.to_string()).collect();
            return self
                .merge_sql(&format!(
                    "MERGE INTO {} USING {source} ON {on} WHEN MATCHED THEN UPDATE SET {}",
                    update.table.relation,
                    set.join(", ")
                ))
                .await;
        }
        let target = Target::new(name, alias.as_ref().map(|a| &a.name))?;
        let mut assignments = Vec::new();
        let mut spelled = Vec::new();
        for assignment in &update.assignments {
            let AssignmentTarget::ColumnName(column) = &assignment.target else {
                return Err(sql_err("Not implemented Error: tuple assignments"));
            };
            let parts = name_parts(column)?;
            let col = parts.last().cloned().unwrap_or_default();
            let spelling = column.0.last().and_then(|part| part.as_ident());
            spelled.push(spelling.map_or_else(|| col.clone(), |ident| ident.value.clone()));
            // `SET c = DEFAULT`: filled in once the column is known
            // (`WrittenAssignments::resolve`).
            let value = match super::defaults::is_default(&assignment.value) {
                true => None,
                false => Some(predicate_sql(&assignment.value)),
            };
            assignments.push((col, value));
        }
        let predicate = update.selection.as_ref().map(predicate_sql);
        let kind = ReplaceKind::Update {
            predicate: update.selection.as_ref().map(|p| p.to_string()),
        };
        let in_place = !update.selection.iter().any(has_subquery)
            && !update.assignments.iter().any(|a| has_subquery(&a.value));
        let set = WrittenAssignments {
            set: assignments,
            spelled,
            in_place,
        };
        self.rewrite_where(target, predicate, Some(set), kind).await
    }

    /// `UPDATE … FROM` and `DELETE … USING` are `MERGE`s with one `WHEN MATCHED` clause;
    /// a target row that two source rows would update is refused, as `MERGE` does.
    pub(super) async fn merge_sql(&mut self, sql: &str) -> Result<Output, ApiError> {
        let mut statements = Self::parse(sql)?;
        match statements.pop() {
            Some(datafusion::sql::parser::Statement::Statement(s)) => match *s {
                datafusion::sql::sqlparser::ast::Statement::Merge(merge) => {
                    self.merge(&merge).await
                }
                _ => Err(sql_err("Parser Error: expected a MERGE")),
            },
            _ => Err(sql_err("Parser Error: expected a MERGE")),
        }
    }

    /// Replace the target's files holding rows that match `predicate` (all rows without
    /// one): without them (`assignments` is `None`), or with them updated.
    async fn rewrite_where(
        &mut self,
        target: Target,
        predicate: Option<String>,
        assignments: Option<WrittenAssignments>,
        kind: ReplaceKind,
    ) -> Result<Output, ApiError> {
        let name = self.resolve(&target.parts)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = self.open_for_write(&name).await?;
        let target_schema = table.schema().map_err(delta_err)?;
        let columns: Vec<String> = target_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let assignments = assignments
            .map(|set| set.resolve(&target_schema))
            .transpose()?;
        // Plan (not run) the statement's expressions against the table itself first, so
        // a wrong column or type is reported as the client wrote it.
        let exprs = match &assignments {
            // Aliased: two assignments of the same value would otherwise be two
            // projections of one name, which DataFusion refuses.
            Some(Assignments { set, .. }) => set
                .iter()
                .enumerate()
                .map(|(i, (_, value))| format!("({value}) AS __e{i}"))
                .collect::<Vec<_>>()
                .join(", "),
            None => "1".to_string(),
        };
        let filter = predicate
            .as_ref()
            .map(|p| format!(" WHERE {p}"))
            .unwrap_or_default();
        let real = [&name.catalog, &name.schema, &name.table]
            .map(|p| quote(p))
            .join(".");
        self.plan_sql(&format!(
            "SELECT {exprs} FROM {real} AS {}{filter}",
            quote(&target.alias)
        ))
        .await?;
        // No row, nothing to match: the predicate is not run (its subqueries may be large:
        // dlt's first load deletes the nested rows of 10M staged keys from an empty table).
        if table.num_files().map_err(delta_err)? == 0 {
            return Ok(Self::count(0));
        }
        let failure = Arc::new(Mutex::new(None));
        let mut planner = WherePlanner {
            session: self,
            alias: target.alias,
            predicate,
            assignments,
            columns,
            target: target_schema,
            matched: 0,
            failure: Arc::clone(&failure),
        };
        let result = table
            .replace(&mut planner, &ReplaceOptions::new(kind))
            .await;
        let matched = planner.matched;
        match (result, take_failure(&failure)) {
            (Ok(_), _) => Ok(Self::count(matched as i64)),
            // The SQL layer's own error (planning or execution), as the client should see it.
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Err(delta_err(e)),
        }
    }

    /// Register a scan of only the files `paths` of `table` under `name` (see
    /// [`Self::register_hidden`]).
    pub(super) async fn register_files(
        &self,
        name: &str,
        table: &DeltaTable,
        paths: Vec<String>,
    ) -> Result<(), ApiError> {
        let scan = table
            .table_provider()
            .with_file_paths(paths)
            .await
            .map_err(delta_err)?;
        self.register_hidden(name, scan)
    }

    /// Register `sql` as a view under one of the names the write plans use: a name the
    /// statement's own columns resolve against as they do against a table's.
    pub(super) async fn register_view(&mut self, name: &str, sql: &str) -> Result<(), ApiError> {
        let plan = self.plan_sql(sql).await?;
        let view = datafusion::catalog::view::ViewTable::new(plan, None);
        self.register_as(name, Arc::new(view))
    }

    /// Register a Delta table's `provider` under one of the names the write plans use.
    pub(super) fn register_hidden(
        &self,
        name: &str,
        provider: Arc<dyn TableProvider>,
    ) -> Result<(), ApiError> {
        self.register_as(name, super::scan::DeltaScan::wrap(provider))
    }

    /// `provider` under `name` in the session's schema, in place of what was there.
    fn register_as(&self, name: &str, provider: Arc<dyn TableProvider>) -> Result<(), ApiError> {
        let schema = self.schema_provider(&self.catalog, &self.schema)?;
        schema.deregister_table(name).map_err(super::sql_error)?;
        schema
            .register_table(name.to_string(), provider)
            .map_err(super::sql_error)?;
        Ok(())
    }
}

/// An `UPDATE`'s `SET` list as written: each column and its value as SQL (`None`: a
/// `DEFAULT`), before the table names them ([`Self::resolve`]).
struct WrittenAssignments {
    set: Vec<(String, Option<String>)>,
    /// Each assigned column as the statement spells it, for errors.
    spelled: Vec<String>,
    /// See [`Assignments::in_place`].
    in_place: bool,
}

/// An `UPDATE`'s `SET` list: each of the table's columns it assigns and the value, as SQL.
struct Assignments {
    set: Vec<(String, String)>,
    /// Neither the values nor the predicate run a subquery: the rewritten files' rows
    /// are read once, each row updated where it is ([`WherePlanner::updated_in_place`]).
    in_place: bool,
}

impl WrittenAssignments {
    /// Name each assigned column as the table `schema` names it, without regard to case
    /// when that names one (`sql/column_case.rs`: `SET name = …` assigns `Name`), and a
    /// `DEFAULT` as its column's default (NULL without one); refuse a column the table
    /// lacks or one assigned twice, in the order written, as DuckDB does (its message
    /// without its "Did you mean" line).
    fn resolve(self, schema: &Schema) -> Result<Assignments, ApiError> {
        let mut set: Vec<(String, String)> = Vec::with_capacity(self.set.len());
        for (i, (col, value)) in self.set.into_iter().enumerate() {
            let folded = col.to_lowercase();
            let mut alike = schema
                .fields()
                .iter()
                .filter(|f| f.name().to_lowercase() == folded);
            let field = match (schema.field_with_name(&col), alike.next(), alike.next()) {
                (Ok(exact), _, _) => exact,
                (_, Some(only), None) => only.as_ref(),
                _ => {
                    return Err(sql_err(format!(
                        "Binder Error: Referenced update column {col} not found in table!"
                    )));
                }
            };
            if set.iter().any(|(c, _)| c == field.name()) {
                return Err(sql_err(format!(
                    "Binder Error: Multiple assignments to same column \"{}\"",
                    self.spelled[i]
                )));
            }
            let value = value.unwrap_or_else(|| {
                super::defaults::default_value_sql(field).unwrap_or_else(|| "NULL".to_string())
            });
            set.push((field.name().clone(), value));
        }
        Ok(Assignments {
            set,
            in_place: self.in_place,
        })
    }
}

/// Whether `expr` runs a subquery (`EXISTS`, `IN (SELECT …)`, a scalar subquery).
/// DataFusion plans those in a projection as joins, which do not keep the rows' order.
fn has_subquery(expr: &SqlExpr) -> bool {
    use datafusion::sql::sqlparser::ast::visit_expressions;
    use std::ops::ControlFlow;
    visit_expressions(expr, |e| match e {
        SqlExpr::Subquery(_) | SqlExpr::Exists { .. } | SqlExpr::InSubquery { .. } => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The one source table of `UPDATE … FROM` / `DELETE … USING`, as SQL.
fn single_source(tables: &[TableWithJoins], what: &str) -> Result<String, ApiError> {
    match tables {
        [one] if one.joins.is_empty() => Ok(one.relation.to_string()),
        _ => Err(sql_err(format!(
            "Not implemented Error: {what} with more than one table"
        ))),
    }
}

/// The statement's target: its name parts and the name its rows go by in the predicate.
pub(super) struct Target {
    pub(super) parts: Vec<String>,
    pub(super) alias: String,
}

impl Target {
    pub(super) fn new(
        name: &datafusion::sql::sqlparser::ast::ObjectName,
        alias: Option<&Ident>,
    ) -> Result<Self, ApiError> {
        let parts = name_parts(name)?;
        let alias = match alias {
            Some(a) if a.quote_style.is_some() => a.value.clone(),
            Some(a) => a.value.to_lowercase(),
            None => parts.last().cloned().ok_or_else(|| table_missing(""))?,
        };
        Ok(Self { parts, alias })
    }
}

/// A predicate or expression as SQL text for the plan's queries, with row-value `IN`
/// subqueries, which DataFusion does not plan, rewritten to `EXISTS` where that means the
/// same in a filter (see [`row_in_to_exists`]).
pub(super) fn predicate_sql(expr: &SqlExpr) -> String {
    let mut expr = row_in_to_exists(expr.clone());
    name_in_subquery_columns(&mut expr);
    expr.to_string()
}

/// `x IN (SELECT max(a) FROM t)` → `x IN (SELECT __in1 FROM (SELECT max(a) FROM t) AS
/// __s1(__in1))`. DataFusion 55 cannot plan an `IN` subquery whose column is an unnamed
/// expression under `IS [NOT] TRUE` (two projections of the same name), which is how the
/// plan's queries wrap the predicate; a named column avoids it and means the same.
fn name_in_subquery_columns(expr: &mut SqlExpr) {
    use datafusion::sql::sqlparser::ast::visit_expressions_mut;
    use std::ops::ControlFlow;
    let mut n = 0usize;
    let _ = visit_expressions_mut(expr, |e| {
        // Row values keep their subquery: their rewrites name its columns themselves.
        if let SqlExpr::InSubquery { subquery, expr, .. } = e
            && !matches!(expr.as_ref(), SqlExpr::Tuple(_))
        {
            n += 1;
            let sql = format!("SELECT __in{n} FROM ({subquery}) AS __s{n}(__in{n})");
            if let Some(query) = parse_query(&sql) {
                **subquery = query;
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

pub(super) fn parse_query(sql: &str) -> Option<datafusion::sql::sqlparser::ast::Query> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .ok()?
        .parse_query()
        .ok()
        .map(|q| *q)
}

/// `IN` subqueries in the positions of a predicate where only its truth matters (the
/// operands of AND/OR chains and parentheses: a filter keeps neither NULL nor FALSE, and
/// `(p) IS NOT TRUE` keeps both), rewritten to the two-valued `EXISTS` forms that
/// DataFusion plans correctly there:
///
/// - `(a, b) IN (SELECT x, y …)` → `EXISTS (… WHERE x = a AND y = b)`: DataFusion does not
///   plan row values in `IN`.
/// - `a NOT IN (SELECT x …)` and `NOT (a IN …)` → `NOT EXISTS (… WHERE x = a) AND (no x
///   is NULL) AND (a IS NOT NULL OR the subquery is empty)`; their row forms → `NOT EXISTS
///   (… WHERE (x = a OR x IS NULL OR a IS NULL) AND …)`. Each is TRUE exactly when the
///   `NOT IN` is: DataFusion evaluates `(a NOT IN (…)) IS NOT TRUE` as FALSE for a NULL
///   `a`, which dropped rows a `DELETE` had to keep.
fn row_in_to_exists(expr: SqlExpr) -> SqlExpr {
    use datafusion::sql::sqlparser::ast::{BinaryOperator, UnaryOperator};
    match expr {
        SqlExpr::BinaryOp { left, op, right }
            if matches!(op, BinaryOperator::And | BinaryOperator::Or) =>
        {
            SqlExpr::BinaryOp {
                left: Box::new(row_in_to_exists(*left)),
                op,
                right: Box::new(row_in_to_exists(*right)),
            }
        }
        SqlExpr::Nested(inner) => SqlExpr::Nested(Box::new(row_in_to_exists(*inner))),
        SqlExpr::UnaryOp {
            op: UnaryOperator::Not,
            expr: inner,
        } => {
            let mut core = inner.as_ref();
            while let SqlExpr::Nested(e) = core {
                core = e;
            }
            match core {
                SqlExpr::InSubquery {
                    expr,
                    subquery,
                    negated: false,
                } => in_as_exists(expr, subquery, true).unwrap_or(SqlExpr::UnaryOp {
                    op: UnaryOperator::Not,
                    expr: inner,
                }),
                _ => SqlExpr::UnaryOp {
                    op: UnaryOperator::Not,
                    expr: inner,
                },
            }
        }
        SqlExpr::InSubquery {
            expr,
            subquery,
            negated,
        } if negated || matches!(expr.as_ref(), SqlExpr::Tuple(_)) => {
            in_as_exists(&expr, &subquery, negated).unwrap_or(SqlExpr::InSubquery {
                expr,
                subquery,
                negated,
            })
        }
        other => other,
    }
}

/// `items IN (subquery)` (`NOT IN` when `negated`) as its two-valued `[NOT] EXISTS`.
fn in_as_exists(
    expr: &SqlExpr,
    subquery: &datafusion::sql::sqlparser::ast::Query,
    negated: bool,
) -> Option<SqlExpr> {
    let items: Vec<&SqlExpr> = match expr {
        SqlExpr::Tuple(items) => items.iter().collect(),
        one => vec![one],
    };
    if let ([item], true) = (items.as_slice(), negated) {
        // One column: the three conditions under which `NOT IN` is TRUE, each a join on
        // equality or an uncorrelated count that DataFusion plans in linear time. The
        // disjunction below (`x = a OR x IS NULL OR a IS NULL`) can only be planned as a
        // nested loop: dlt's child-table `NOT IN` took minutes at 40,000 rows.
        return parse_expr(&format!(
            "(NOT EXISTS (SELECT 1 FROM ({subquery}) AS __in(c1) WHERE __in.c1 = ({item})) \
             AND (SELECT count(*) FROM (SELECT 1 FROM ({subquery}) AS __in(c1) \
             WHERE __in.c1 IS NULL LIMIT 1) AS __in_null) = 0 \
             AND (({item}) IS NOT NULL \
             OR (SELECT count(*) FROM (SELECT 1 FROM ({subquery}) AS __in(c1) LIMIT 1) \
             AS __in_any) = 0))"
        ));
    }
    let names: Vec<String> = (1..=items.len()).map(|i| format!("c{i}")).collect();
    let conditions: Vec<String> = items
        .iter()
        .zip(&names)
        .map(|(item, n)| {
            if negated {
                format!("(__in.{n} = ({item}) OR __in.{n} IS NULL OR ({item}) IS NULL)")
            } else {
                format!("__in.{n} = ({item})")
            }
        })
        .collect();
    parse_expr(&format!(
        "{}EXISTS (SELECT 1 FROM ({subquery}) AS __in({}) WHERE {})",
        if negated { "NOT " } else { "" },
        names.join(", "),
        conditions.join(" AND ")
    ))
}

pub(super) fn parse_expr(sql: &str) -> Option<SqlExpr> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .ok()?
        .parse_expr()
        .ok()
}

/// Plans a `DELETE` (no assignments) or an `UPDATE` for the engine.
struct WherePlanner<'s> {
    session: &'s mut SqlSession,
    alias: String,
    predicate: Option<String>,
    assignments: Option<Assignments>,
    columns: Vec<String>,
    /// The table's schema: the types the rows are assigned.
    target: arrow::datatypes::SchemaRef,
    /// Rows the latest plan matched.
    matched: u64,
    /// The SQL layer's error behind a failed plan or stream, for the client.
    failure: Arc<Mutex<Option<ApiError>>>,
}

impl WherePlanner<'_> {
    async fn plan_files(&mut self, table: &DeltaTable) -> Result<Replacement, ApiError> {
        let alias = quote(&self.alias);
        let target = quote(TARGET);
        let file = quote(FILE);
        let filter = self
            .predicate
            .as_ref()
            .map(|p| format!(" WHERE {p}"))
            .unwrap_or_default();
        let scan = table
            .table_provider()
            .with_file_column(FILE)
            .await
            .map_err(delta_err)?;
        self.session.grant_table(table);
        self.session.register_hidden(TARGET, scan)?;
        let found = self
            .session
            .collect_sql(&format!(
                "SELECT {file}, count(*) FROM {target} AS {alias}{filter} GROUP BY 1"
            ))
            .await?;
        // On a table that writes deletion vectors, a file with few matching rows is
        // marked (its matching rows deleted in place) instead of rewritten.
        let policy = MarkingPolicy::of(table, Knobs::default().deletion_vector_max_share)
            .map_err(delta_err)?;
        let mut files = Vec::new();
        let mut marked_files = Vec::new();
        let mut matched = 0u64;
        for batch in &found {
            let names = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Utf8)
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            let names = names.as_string::<i32>();
            let counts = batch.column(1).as_primitive::<Int64Type>();
            for row in 0..batch.num_rows() {
                let count = counts.value(row) as u64;
                if names.is_valid(row) {
                    let name = names.value(row).to_string();
                    if policy
                        .as_ref()
                        .is_some_and(|p| p.worth_marking(&name, count))
                    {
                        marked_files.push(name);
                    } else {
                        files.push(name);
                    }
                }
                matched += count;
            }
        }
        self.matched = matched;
        if files.is_empty() && marked_files.is_empty() {
            return Ok(Replacement {
                remove: Vec::new(),
                rows: futures::stream::empty().boxed(),
                mark: Vec::new(),
            });
        }
        let mut mark = Vec::with_capacity(marked_files.len());
        for path in &marked_files {
            mark.push(MarkedRows {
                path: path.clone(),
                live_rows: self.matching_rows(table, path).await?,
            });
        }
        self.session
            .register_files(TARGET, table, files.clone())
            .await?;
        let columns: Vec<String> = self.columns.iter().map(|c| quote(c)).collect();
        let predicate = self.predicate.clone();
        let assignments = self.assignments.as_ref().map(|a| a.set.clone());
        let is = |truth: &str| match &predicate {
            Some(p) => format!(" WHERE ({p}) IS {truth}"),
            None => match truth {
                "TRUE" => String::new(),
                _ => " WHERE FALSE".to_string(),
            },
        };
        let kept = format!(
            "SELECT {} FROM {target} AS {alias}{}",
            columns.join(", "),
            is("NOT TRUE")
        );
        let mut streams = Vec::new();
        match &assignments {
            None if files.is_empty() => {}
            None => streams.push(self.rows_of(&kept).await?),
            Some(set) => {
                let changed: Vec<String> = self
                    .columns
                    .iter()
                    .map(|c| match set.iter().find(|(col, _)| col == c) {
                        Some((_, value)) => format!("({value}) AS {}", quote(c)),
                        None => quote(c),
                    })
                    .collect();
                let changed = changed.join(", ");
                if !files.is_empty() {
                    let in_place = self.assignments.as_ref().is_some_and(|a| a.in_place)
                        && set.iter().all(|(col, _)| {
                            self.target
                                .field_with_name(col)
                                .is_ok_and(|f| !f.data_type().is_nested())
                        });
                    let rows = match &predicate {
                        Some(p) if in_place => self.updated_in_place(set, p).await?,
                        Some(_) => {
                            self.rows_of(&format!(
                                "SELECT {changed} FROM {target} AS {alias}{} UNION ALL {kept}",
                                is("TRUE")
                            ))
                            .await?
                        }
                        None => {
                            self.rows_of(&format!("SELECT {changed} FROM {target} AS {alias}"))
                                .await?
                        }
                    };
                    streams.push(rows);
                }
                // A marked file's updated rows are new rows; the old ones are in its vector.
                if !marked_files.is_empty() {
                    self.session
                        .register_files(MARKED, table, marked_files.clone())
                        .await?;
                    streams.push(
                        self.rows_of(&format!(
                            "SELECT {changed} FROM {} AS {alias}{}",
                            quote(MARKED),
                            is("TRUE")
                        ))
                        .await?,
                    );
                }
            }
        }
        Ok(Replacement {
            remove: files,
            rows: futures::stream::iter(streams).flatten().boxed(),
            mark,
        })
    }

    /// The rows `sql` gives, in the target's types.
    async fn rows_of(&mut self, sql: &str) -> Result<EngineRows, ApiError> {
        let stream = self.session.stream_sql(sql).await?;
        Ok(assigned_rows(
            stream,
            Arc::clone(&self.failure),
            Arc::clone(&self.target),
        ))
    }

    /// The rewritten files' rows in one pass, in their order: each row with `set`'s
    /// values where `predicate` holds. The values are computed only for those rows
    /// (`CASE WHEN p THEN v END`, a column of the value's own type) and put in place in
    /// the target's type here, so a kept row's value is never coerced to a value's type
    /// (a `BIGINT` through a `DOUBLE`).
    async fn updated_in_place(
        &mut self,
        set: &[(String, String)],
        predicate: &str,
    ) -> Result<EngineRows, ApiError> {
        let mut select: Vec<String> = self.columns.iter().map(|c| quote(c)).collect();
        let mut positions = Vec::with_capacity(set.len());
        for (i, (col, value)) in set.iter().enumerate() {
            select.push(format!(
                "CASE WHEN ({predicate}) THEN ({value}) END AS {}",
                quote(&format!("{VALUE}{i}"))
            ));
            positions.push(self.columns.iter().position(|c| c == col).ok_or_else(|| {
                ApiError::Internal(format!("assigned column {col} is not the table's"))
            })?);
        }
        select.push(format!("({predicate}) IS TRUE AS {}", quote(HIT)));
        let sql = format!(
            "SELECT {} FROM {} AS {}",
            select.join(", "),
            quote(TARGET),
            quote(&self.alias)
        );
        let stream = self.session.stream_sql(&sql).await?;
        let target = Arc::clone(&self.target);
        let failure = Arc::clone(&self.failure);
        Ok(engine_rows(stream, Arc::clone(&self.failure))
            .and_then(move |batch| {
                let out = put_in_place(&batch, &target, &positions).map_err(|e| {
                    DeltaLiteError::Other(keep_failure(&failure, super::sql_error(e)))
                });
                futures::future::ready(out)
            })
            .boxed())
    }

    /// The rows of `path` the predicate matches, as ordinals of the rows the file holds
    /// (what [`MarkedRows::live_rows`] wants): a scan of that one file numbered in file
    /// order, filtered above the numbering so that no pushed filter skips rows.
    async fn matching_rows(
        &mut self,
        table: &DeltaTable,
        path: &str,
    ) -> Result<Vec<u64>, ApiError> {
        self.session
            .register_files(MARKED, table, vec![path.to_string()])
            .await?;
        let filter = self
            .predicate
            .as_ref()
            .map(|p| format!(" WHERE {p}"))
            .unwrap_or_default();
        let sql = format!(
            "SELECT {row} FROM (SELECT row_number() OVER () - 1 AS {row}, * FROM {}) AS {}{filter}",
            quote(MARKED),
            quote(&self.alias),
            row = quote(ROW),
        );
        // One file read as one stream, in its order: one partition, so that neither a
        // split into byte ranges nor a round-robin repartition (which the window's
        // coalescing would interleave) reorders its rows.
        let found = {
            let _one = OptionsOverride::one_partition(&self.session.ctx);
            self.session.collect_sql(&sql).await
        };
        row_numbers(&found?)
    }
}

/// The first column of `found`, row numbers, as `u64`s.
pub(super) fn row_numbers(
    found: &[arrow::record_batch::RecordBatch],
) -> Result<Vec<u64>, ApiError> {
    let mut rows = Vec::new();
    for batch in found {
        let column = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::UInt64)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        rows.extend(
            column
                .as_primitive::<arrow::datatypes::UInt64Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    Ok(rows)
}

/// A batch of [`WherePlanner::updated_in_place`]: the table's columns, then each
/// assigned value (NULL where the row is kept), then whether the row is updated; as
/// the table's columns, the values in place where it is.
fn put_in_place(
    batch: &RecordBatch,
    target: &Schema,
    positions: &[usize],
) -> Result<RecordBatch, DataFusionError> {
    let width = target.fields().len();
    let hit = batch.column(width + positions.len()).as_boolean().clone();
    let assigned: Vec<(usize, BooleanArray)> =
        positions.iter().map(|&at| (at, hit.clone())).collect();
    let (schema, columns) = in_place(batch, target, &assigned)?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// The first `target`'s width columns of `batch`, in the target's types, with the value
/// columns after them (one per `assigned`, in its order) put in place of the column at
/// each one's position where its mask is true. Nothing is coerced between a value and
/// the column it replaces: each is given the column's type on its own, as an
/// assignment gives it ([`assign_types`]).
pub(super) fn in_place(
    batch: &RecordBatch,
    target: &Schema,
    assigned: &[(usize, BooleanArray)],
) -> Result<(SchemaRef, Vec<ArrayRef>), DataFusionError> {
    let width = target.fields().len();
    let old = assign_types(&batch.project(&(0..width).collect::<Vec<_>>())?, target)?;
    let mut columns = old.columns().to_vec();
    for (i, (at, hit)) in assigned.iter().enumerate() {
        let field = Field::new(
            target.field(*at).name(),
            batch.column(width + i).data_type().clone(),
            true,
        );
        let value = RecordBatch::try_new(
            Arc::new(Schema::new(vec![field])),
            vec![Arc::clone(batch.column(width + i))],
        )?;
        let value = assign_types(&value, target)?;
        columns[*at] = zip(hit, value.column(0), &columns[*at])?;
    }
    Ok((old.schema(), columns))
}

impl ReplacePlanner for WherePlanner<'_> {
    fn plan<'a>(
        &'a mut self,
        table: &'a DeltaTable,
    ) -> BoxFuture<'a, deltalite::Result<Replacement>> {
        Box::pin(async move {
            self.plan_files(table)
                .await
                .map_err(|e| DeltaLiteError::Other(keep_failure(&self.failure, e)))
        })
    }
}
