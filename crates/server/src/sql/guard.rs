//! What SQL may do, checked twice: the parsed statement against an allow-list (plus the
//! nesting limits), and every logical plan handed to DataFusion, recursively, against an
//! allow-list of plan nodes and table providers. The first layer gives precise messages;
//! the second closes the class: whatever wrapper a statement arrives in (any `EXPLAIN`,
//! a CTE, a subquery, a later statement of a stack), no plan that writes, defines objects,
//! changes settings or scans anything but a granted Delta table, an `information_schema`
//! table or a built-in generator reaches execution. The third layer, below DataFusion, is
//! the session's object-store registry (`stores.rs`).

use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::cte_worktable::CteWorkTable;
use datafusion::datasource::{MemTable, source_as_provider};
use datafusion::functions_table::generate_series::GenerateSeriesTable;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{DescribeAlias, Statement};

use super::{sql_err, sql_error};
use crate::error::ApiError;

/// Deepest expression nesting a statement may have. The parser builds chains of infix
/// operators (`1 + 1 + ...`, `x::INT::INT...`) without a recursion limit, and DataFusion
/// clones and plans expressions recursively on the worker's stack: a few thousand levels
/// overflowed it and aborted the whole server. Parenthesised nesting is already capped at
/// 50 by the parser.
pub const MAX_EXPR_DEPTH: usize = 256;
/// Longest chain of set operations (`SELECT .. UNION ALL SELECT .. UNION ALL ..`).
pub const MAX_SET_OPERATIONS: usize = 1000;

/// Refuse statements nested deeper than [`MAX_EXPR_DEPTH`] / [`MAX_SET_OPERATIONS`]. The walk
/// stops at the limit, so it never recurses deeper than that itself.
pub(super) fn check_depth(statement: &DFStatement) -> Result<(), ApiError> {
    check_nesting(Node::Statement(statement))
}

/// [`check_depth`] for an expression standing alone (`OPTIMIZE … WHERE`'s).
pub(super) fn check_expr_depth(
    expr: &datafusion::sql::sqlparser::ast::Expr,
) -> Result<(), ApiError> {
    check_nesting(Node::Expr(expr))
}

enum Node<'a> {
    Statement(&'a DFStatement),
    Expr(&'a datafusion::sql::sqlparser::ast::Expr),
}

fn check_nesting(node: Node<'_>) -> Result<(), ApiError> {
    use datafusion::sql::sqlparser::ast::{self as sql, Visit};
    use std::ops::ControlFlow;

    struct Depth {
        current: usize,
        too_deep: Option<String>,
    }
    impl sql::Visitor for Depth {
        type Break = ();
        fn pre_visit_query(&mut self, query: &sql::Query) -> ControlFlow<()> {
            // Set operations nest through `left`/`right` without a visitor hook: count the
            // chain without recursion before the visitor descends into it.
            let mut longest = 0;
            let mut todo = vec![(query.body.as_ref(), 0usize)];
            while let Some((body, n)) = todo.pop() {
                longest = longest.max(n);
                if let sql::SetExpr::SetOperation { left, right, .. } = body {
                    todo.push((left.as_ref(), n + 1));
                    todo.push((right.as_ref(), n + 1));
                }
            }
            if longest > MAX_SET_OPERATIONS {
                self.too_deep = Some(format!(
                    "more than {MAX_SET_OPERATIONS} chained set operations (UNION/INTERSECT/EXCEPT)"
                ));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, _: &sql::Expr) -> ControlFlow<()> {
            self.current += 1;
            if self.current > MAX_EXPR_DEPTH {
                self.too_deep = Some(format!(
                    "expressions nested more than {MAX_EXPR_DEPTH} levels deep"
                ));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, _: &sql::Expr) -> ControlFlow<()> {
            self.current -= 1;
            ControlFlow::Continue(())
        }
    }

    let mut depth = Depth {
        current: 0,
        too_deep: None,
    };
    match node {
        Node::Statement(DFStatement::Statement(s)) => {
            let _ = s.visit(&mut depth);
        }
        Node::Statement(DFStatement::Explain(e)) => return check_depth(&e.statement),
        Node::Statement(_) => {}
        Node::Expr(e) => {
            let _ = e.visit(&mut depth);
        }
    }
    match depth.too_deep {
        Some(what) => Err(sql_err(format!(
            "Parser Error: statement too complex: {what}"
        ))),
        None => Ok(()),
    }
}

/// Reject statements that could reach outside the granted catalogs.
pub(super) fn check_allowed(statement: &DFStatement) -> Result<(), ApiError> {
    match statement {
        DFStatement::Statement(s) if let Some(refusal) = refused_query_shape(s) => {
            Err(sql_err(refusal))
        }
        DFStatement::Statement(s) if let Some(clause) = unsupported_write_clause(s) => {
            Err(sql_err(format!(
                "Not implemented Error: {clause} is not supported here; nothing was changed"
            )))
        }
        DFStatement::Statement(s) => match s.as_ref() {
            Statement::Query(_)
            | Statement::CreateSchema { .. }
            | Statement::AlterTable(_)
            | Statement::Drop { .. }
            | Statement::Insert(_)
            | Statement::Delete(_)
            | Statement::Update(_)
            | Statement::Merge(_)
            | Statement::Truncate(_)
            | Statement::Comment { .. }
            | Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Use(_)
            | Statement::Set(_) => Ok(()),
            Statement::CreateTable(c) if !c.external && c.location.is_none() => Ok(()),
            Statement::CreateView(v) if !v.materialized => Ok(()),
            // DuckDB's `DESCRIBE query|table`: planned (through `check_plan`), never run.
            Statement::Explain {
                describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
                analyze: false,
                statement,
                ..
            } if matches!(statement.as_ref(), Statement::Query(_)) => Ok(()),
            Statement::ExplainTable {
                describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
                ..
            } => Ok(()),
            // `ATTACH ':memory:' AS name` makes a scratch catalog for a session that has
            // room for one (`SqlSession::execute` decides); no other file is attached.
            Statement::AttachDatabase { .. } if is_memory_attach(s) => Ok(()),
            // `SHOW TABLES` and its kin: queries over `information_schema` the server
            // writes (`sql/show.rs`), through this guard again.
            s if super::show::is_show(s) => Ok(()),
            Statement::DetachDuckDBDatabase { .. } => Ok(()),
            Statement::Copy { .. } | Statement::CopyIntoSnowflake { .. } => {
                Err(sql_err("Permission Error: COPY is not allowed"))
            }
            other => Err(not_allowed(other)),
        },
        // EXPLAIN is for queries: everything else is executed by the server itself, and
        // `EXPLAIN ANALYZE` would run the inner statement through DataFusion instead.
        DFStatement::Explain(e) => match e.statement.as_ref() {
            DFStatement::Statement(s) if matches!(s.as_ref(), Statement::Query(_)) => {
                check_allowed(&e.statement)
            }
            _ => Err(sql_err(
                "Permission Error: EXPLAIN is only allowed for queries",
            )),
        },
        DFStatement::CreateExternalTable(_) => {
            Err(sql_err("Permission Error: external tables are not allowed"))
        }
        DFStatement::CopyTo(_) => Err(sql_err("Permission Error: COPY is not allowed")),
        _ => Err(sql_err("Permission Error: statement not allowed")),
    }
}

/// The refusal of a statement kind that is not allowed, naming its first words.
pub(super) fn not_allowed(statement: &Statement) -> ApiError {
    sql_err(format!(
        "Permission Error: statement not allowed: {}",
        statement
            .to_string()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    ))
}

/// `ATTACH [DATABASE] ':memory:' AS name`: DuckDB's fresh in-memory database.
pub(super) fn is_memory_attach(statement: &Statement) -> bool {
    use datafusion::sql::sqlparser::ast::{Expr, Value};
    matches!(
        statement,
        Statement::AttachDatabase { database_file_name: Expr::Value(v), .. }
            if matches!(&v.value, Value::SingleQuotedString(p) if p == ":memory:")
    )
}

/// Query shapes refused before planning: a write as a query body anywhere (`WITH x AS
/// (…) INSERT …`, a nested `(INSERT …)`), which the SQL planner would hand to DataFusion's
/// own DML; an empty select list (`SELECT FROM t`), which DuckDB refuses and on which
/// DataFusion 55 panics inside a scalar subquery.
/// A clause of an `INSERT`, `UPDATE` or `DELETE` that the write paths would not carry
/// out: refused before anything runs, where it used to be ignored (`DELETE … LIMIT 1`
/// deleted every matching row; `INSERT OVERWRITE` appended; `RETURNING` answered a count).
fn unsupported_write_clause(statement: &Statement) -> Option<String> {
    let (verb, returning, output, order_by, limit) = match statement {
        Statement::Insert(i) => {
            if i.overwrite {
                return Some(
                    "INSERT OVERWRITE (use CREATE OR REPLACE TABLE … AS, or TRUNCATE then INSERT)"
                        .to_string(),
                );
            }
            if i.partitioned.is_some() || !i.after_columns.is_empty() {
                return Some("INSERT … PARTITION (…)".to_string());
            }
            ("INSERT", &i.returning, &i.output, &[][..], &None)
        }
        Statement::Delete(d) => ("DELETE", &d.returning, &d.output, &d.order_by[..], &d.limit),
        Statement::Update(u) => {
            if u.or.is_some() {
                return Some("UPDATE OR …".to_string());
            }
            ("UPDATE", &u.returning, &u.output, &u.order_by[..], &u.limit)
        }
        _ => return None,
    };
    if returning.is_some() {
        return Some(format!("{verb} … RETURNING (read the rows with a SELECT)"));
    }
    if output.is_some() {
        return Some(format!("{verb} … OUTPUT"));
    }
    if !order_by.is_empty() {
        return Some(format!("{verb} … ORDER BY"));
    }
    if limit.is_some() {
        return Some(format!("{verb} … LIMIT"));
    }
    None
}

fn refused_query_shape(statement: &Statement) -> Option<&'static str> {
    use datafusion::sql::sqlparser::ast::{SetExpr, Visit, Visitor};
    use std::ops::ControlFlow;

    struct Shape;
    impl Visitor for Shape {
        type Break = &'static str;
        fn pre_visit_query(
            &mut self,
            query: &datafusion::sql::sqlparser::ast::Query,
        ) -> ControlFlow<&'static str> {
            // Set operations and nested queries are walked by the visitor itself.
            let mut todo = vec![query.body.as_ref()];
            while let Some(body) = todo.pop() {
                match body {
                    SetExpr::Insert(_)
                    | SetExpr::Update(_)
                    | SetExpr::Delete(_)
                    | SetExpr::Merge(_) => {
                        return ControlFlow::Break(
                            "Permission Error: INSERT, UPDATE, DELETE and MERGE are not allowed inside a query",
                        );
                    }
                    SetExpr::Select(select) if select.projection.is_empty() => {
                        return ControlFlow::Break("Parser Error: SELECT list is empty");
                    }
                    SetExpr::SetOperation { left, right, .. } => {
                        todo.push(left.as_ref());
                        todo.push(right.as_ref());
                    }
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
    match statement.visit(&mut Shape) {
        ControlFlow::Break(refusal) => Some(refusal),
        ControlFlow::Continue(()) => None,
    }
}

/// Refuse a plan that does anything but read granted tables: checked on every plan the
/// server executes through DataFusion, subqueries included.
pub(super) fn check_plan(plan: &LogicalPlan) -> Result<(), ApiError> {
    let mut refused: Option<String> = None;
    plan.apply_with_subqueries(|node| {
        refused = refusal(node);
        Ok(if refused.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })
    .map_err(sql_error)?;
    match refused {
        Some(what) => Err(sql_err(format!("Permission Error: {what}"))),
        None => Ok(()),
    }
}

/// Why a plan node may not run, if it may not.
fn refusal(node: &LogicalPlan) -> Option<String> {
    match node {
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Window(_)
        | LogicalPlan::Aggregate(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Join(_)
        | LogicalPlan::Repartition(_)
        | LogicalPlan::Union(_)
        | LogicalPlan::EmptyRelation(_)
        | LogicalPlan::Subquery(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::Values(_)
        | LogicalPlan::Explain(_)
        | LogicalPlan::Analyze(_)
        | LogicalPlan::Distinct(_)
        | LogicalPlan::DescribeTable(_)
        | LogicalPlan::Unnest(_)
        | LogicalPlan::RecursiveQuery(_) => None,
        LogicalPlan::TableScan(scan) => {
            let allowed = source_as_provider(&scan.source)
                .map(|p| readable_provider(p.as_ref()))
                .unwrap_or(false);
            (!allowed).then(|| format!("reading {} is not allowed", scan.table_name))
        }
        LogicalPlan::Copy(_) => Some("COPY is not allowed".into()),
        LogicalPlan::Dml(dml) => Some(format!("{} is not allowed here", dml.op)),
        LogicalPlan::Ddl(ddl) => Some(format!("{} is not allowed here", ddl.name())),
        LogicalPlan::Statement(statement) => Some(format!("{} is not allowed", statement.name())),
        LogicalPlan::Extension(ext) => Some(format!("{} is not allowed", ext.node.name())),
    }
}

/// Table providers a query may scan: Delta tables and `information_schema` tables that
/// name resolution registered (only from granted catalogs), the built-in generators
/// (`generate_series`, `range`), and a recursive CTE's own rows (the work table DataFusion
/// plans its self-reference as), which read no storage.
fn readable_provider(provider: &dyn TableProvider) -> bool {
    super::scan::DeltaScan::is_delta(provider)
        || provider.is::<MemTable>()
        || provider.is::<super::catalog_view::CatalogView>()
        || provider.is::<GenerateSeriesTable>()
        || provider.is::<CteWorkTable>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{CsvReadOptions, SessionContext};

    /// The plan of `sql` in a plain DataFusion session (whose default registry reaches the
    /// local filesystem), for the plan check on its own: whatever the statement layer
    /// lets through, this layer must refuse.
    async fn plan(ctx: &SessionContext, sql: &str) -> LogicalPlan {
        ctx.state()
            .create_logical_plan(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    #[tokio::test]
    async fn plans_that_write_define_or_read_files_are_refused_under_every_wrapper() {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv = dir.path().join("secret.csv");
        std::fs::write(&csv, "a\n1\n").expect("write");
        let ctx = SessionContext::new();
        ctx.register_csv("files", csv.to_str().expect("path"), CsvReadOptions::new())
            .await
            .expect("listing table");
        ctx.sql("CREATE TABLE mem (a BIGINT)")
            .await
            .expect("memory table");
        let out = dir.path().join("out.csv");
        let out = out.to_str().expect("path");
        let cases = [
            (format!("COPY (SELECT 1) TO '{out}'"), "COPY is not allowed"),
            (
                format!("EXPLAIN COPY (SELECT 1) TO '{out}'"),
                "COPY is not allowed",
            ),
            (
                format!("EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'"),
                "COPY is not allowed",
            ),
            (
                "EXPLAIN ANALYZE INSERT INTO mem VALUES (1)".to_string(),
                "Insert Into is not allowed here",
            ),
            (
                "EXPLAIN VERBOSE CREATE VIEW v AS SELECT 1".to_string(),
                "CreateView is not allowed here",
            ),
            (
                "SELECT * FROM files".to_string(),
                "reading files is not allowed",
            ),
            (
                "WITH c AS (SELECT * FROM files) SELECT * FROM c".to_string(),
                "reading files is not allowed",
            ),
            (
                "SELECT 1 WHERE EXISTS (SELECT * FROM files)".to_string(),
                "reading files is not allowed",
            ),
            (
                "EXPLAIN ANALYZE SELECT * FROM (SELECT a FROM files) s".to_string(),
                "reading files is not allowed",
            ),
            (
                "SET datafusion.catalog.location = '/'".to_string(),
                "SetVariable is not allowed",
            ),
        ];
        for (sql, expected) in cases {
            let plan = plan(&ctx, &sql).await;
            let err = check_plan(&plan).expect_err(&sql);
            assert_eq!(
                err.to_string(),
                format!("Permission Error: {expected}"),
                "{sql}"
            );
        }
        assert!(!std::path::Path::new(out).exists(), "nothing ran");
        // Reads of what the session registered itself pass: memory tables (the
        // information_schema tables are such) and the built-in generators.
        for sql in [
            "SELECT * FROM mem",
            "EXPLAIN ANALYZE SELECT * FROM generate_series(1, 3)",
            "SELECT * FROM range(3) WHERE value IN (SELECT a FROM mem)",
        ] {
            check_plan(&plan(&ctx, sql).await).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}
