//! DuckDB's SQL-standard `PIVOT` and `UNPIVOT` table factors, which sqlparser parses and
//! DataFusion does not plan ("Unsupported ast node Pivot"). Each becomes a derived table
//! of forms DataFusion plans, with DuckDB's columns, names and rows:
//!
//! - `t PIVOT (sum(v) [AS a], … FOR k IN (1 [AS one], …))`: the columns of `t` that
//!   neither the aggregates nor `k` name, grouped (`* EXCLUDE (…) … GROUP BY ALL`), then
//!   per value and per aggregate the aggregate filtered to `k IS NOT DISTINCT FROM 1` (so
//!   `IN (NULL)` picks the NULLs, as in DuckDB). A column is named after its value (a
//!   string's text, a number as written, or the value's alias), suffixed `_aggregate`
//!   (its alias, or its DuckDB name) when there are several aggregates or it has an
//!   alias: `1`, `1_total`, `1_sum(v)`. `FOR (k, s) IN ((1, 'a'), …)` pivots on pairs,
//!   named `1_a`.
//! - `t UNPIVOT [INCLUDE NULLS] (val FOR name IN (k [AS kk], v))`: the other columns of
//!   `t`, then `name` (the column's alias or name) and `val`, one row per source row and
//!   column, in that order (`unnest` of two lists side by side); rows with a NULL value
//!   are left out unless `INCLUDE NULLS`. `((a, b) FOR name IN ((k, v), …))` unpivots
//!   several columns at once, named `k_v`.
//!
//! `FOR k IN (ANY [ORDER BY …])` and `FOR k IN (subquery)` take their values from a
//! query of their own, run before the statement is planned
//! ([`SqlSession::list_pivot_values`]): the distinct non-NULL values of `k` in the
//! source, in ascending order (as DuckDB's `PIVOT t ON k` lists them), or the
//! subquery's distinct rows, in its order. Each value becomes a literal of its type, and
//! its column is named by its text. At most [`MAX_PIVOT_VALUES`].
//!
//! DuckDB's statement forms (`PIVOT t ON k USING sum(v) GROUP BY g`, `UNPIVOT t ON a, b
//! INTO NAME n VALUE v`) arrive as these factors (`sql/dialect.rs`); a `GROUP BY` list
//! comes as the placeholder alias `__deltalite_pivot_group_by (g)`, and only those
//! columns are kept beside the values.

use std::ops::ControlFlow;

use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, ExprWithAlias, Ident, NullInclusion, PivotValueSource, Query, SetExpr, Statement,
    TableAlias, TableFactor, Value, Visit, VisitMut, Visitor, VisitorMut, With, visit_expressions,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::unparser::Unparser;

use super::dialect::PIVOT_GROUP_BY;
use super::{SqlSession, sql_err, sql_statement};
use crate::error::ApiError;

/// The most values one `PIVOT … IN ANY` or `IN (subquery)` may list: each is a column per
/// aggregate. (DuckDB's `pivot_limit` is 100000.)
pub(super) const MAX_PIVOT_VALUES: usize = 10_000;

impl SqlSession {
    /// `statement` with the values of each `PIVOT … IN ANY` and `IN (subquery)` read and
    /// listed, innermost first, and every pivot rewritten (the tables must be registered:
    /// `register_references`).
    pub(super) async fn list_pivot_values(
        &mut self,
        mut statement: DFStatement,
    ) -> Result<DFStatement, ApiError> {
        let Some(sql) = sql_statement(&mut statement) else {
            return Ok(statement);
        };
        // Every planned statement comes here: most hold no pivot to list, and need not
        // have their CTEs copied by the search below.
        if !holds_dynamic_pivot(&*sql) {
            return Ok(statement);
        }
        loop {
            let mut find = Dynamic::default();
            let query = match sql.visit(&mut find) {
                ControlFlow::Break(query) => query,
                ControlFlow::Continue(()) => break,
            };
            // The values query plans through `plan_query`, which lists its own pivots.
            let batches = Box::pin(self.collect_sql(&query)).await?;
            let mut values = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for batch in &batches {
                for row in 0..batch.num_rows() {
                    let value = pivot_value(batch.columns(), row)?;
                    // A subquery's rows may repeat a value; its first place counts.
                    if seen.insert(value.expr.clone()) {
                        values.push(value);
                    }
                    if values.len() > MAX_PIVOT_VALUES {
                        return Err(sql_err(format!(
                            "Binder Error: Pivot column limit of {MAX_PIVOT_VALUES} \
                             exceeded: list the values, as in FOR k IN (1, 2)"
                        )));
                    }
                }
            }
            let _ = sql.visit(&mut Fill(Some(values)));
        }
        rewrite(sql).map_err(sql_err)?;
        Ok(statement)
    }
}

/// The value a row of a values query stands for: a literal (a tuple of them for several
/// columns), named by the values' text joined by `_`.
fn pivot_value(
    columns: &[datafusion::arrow::array::ArrayRef],
    row: usize,
) -> Result<ExprWithAlias, ApiError> {
    let unparser = Unparser::default();
    let mut literals = Vec::new();
    let mut names = Vec::new();
    for column in columns {
        let scalar = ScalarValue::try_from_array(column, row).map_err(super::sql_error)?;
        names.push(scalar.to_string());
        let literal = datafusion::logical_expr::Expr::Literal(scalar, None);
        literals.push(unparser.expr_to_sql(&literal).map_err(super::sql_error)?);
    }
    let expr = match <[Expr; 1]>::try_from(literals) {
        Ok([one]) => one,
        Err(several) => Expr::Tuple(several),
    };
    Ok(ExprWithAlias {
        expr,
        alias: Some(Ident::with_quote('"', names.join("_"))),
    })
}

/// Finds the first dynamic pivot, innermost first, and breaks with the query that lists
/// its values (the statement's CTEs around it kept, since its source may name one).
#[derive(Default)]
struct Dynamic {
    withs: Vec<Option<With>>,
}

impl VisitorMut for Dynamic {
    type Break = String;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<Self::Break> {
        self.withs.push(query.with.clone());
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<Self::Break> {
        self.withs.pop();
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<Self::Break> {
        let TableFactor::Pivot {
            table,
            value_column,
            value_source,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let body = match value_source {
            PivotValueSource::List(_) => return ControlFlow::Continue(()),
            PivotValueSource::Subquery(query) => query.to_string(),
            // DuckDB's `PIVOT t ON k, s`: every pair of a value of `k` and one of `s`.
            PivotValueSource::Any(order_by) => {
                let distinct =
                    |c: &Expr| format!("SELECT DISTINCT {c} FROM {table} WHERE ({c}) IS NOT NULL");
                let order = match order_by.is_empty() {
                    true => (1..=value_column.len())
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    false => order_by
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                };
                match value_column.as_slice() {
                    [one] => format!("{} ORDER BY {order}", distinct(one)),
                    several => {
                        let product: Vec<String> = several
                            .iter()
                            .enumerate()
                            .map(|(i, c)| format!("({}) AS __pivot_values_{i}", distinct(c)))
                            .collect();
                        format!(
                            "SELECT * FROM {} ORDER BY {order}",
                            product.join(" CROSS JOIN ")
                        )
                    }
                }
            }
        };
        // A CTE holding a pivot still to list (this one's, or a later one's) is left
        // out: the values query would list it again, without end.
        let ctes: Vec<String> = self
            .withs
            .iter()
            .flatten()
            .flat_map(|w| &w.cte_tables)
            .filter(|cte| !holds_dynamic_pivot(*cte))
            .map(ToString::to_string)
            .collect();
        let recursive = self.withs.iter().flatten().any(|w| w.recursive);
        let sql = match ctes.is_empty() {
            true => body,
            false => format!(
                "WITH {}{} {body}",
                if recursive { "RECURSIVE " } else { "" },
                ctes.join(", ")
            ),
        };
        ControlFlow::Break(sql)
    }
}

fn holds_dynamic_pivot(node: &impl Visit) -> bool {
    struct Find;
    impl Visitor for Find {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            match factor {
                TableFactor::Pivot { value_source, .. }
                    if !matches!(value_source, PivotValueSource::List(_)) =>
                {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    node.visit(&mut Find).is_break()
}

/// Lists the values of the first dynamic pivot, innermost first (as [`Dynamic`] found it).
struct Fill(Option<Vec<ExprWithAlias>>);

impl VisitorMut for Fill {
    type Break = ();

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Pivot { value_source, .. } = factor
            && !matches!(value_source, PivotValueSource::List(_))
            && let Some(values) = self.0.take()
        {
            *value_source = PivotValueSource::List(values);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// Rewrite every `PIVOT` and `UNPIVOT` in `statement` whose values are listed (the
/// others wait for [`SqlSession::list_pivot_values`]); `Err` is the message of one that
/// cannot be.
pub(super) fn rewrite(statement: &mut Statement) -> Result<(), String> {
    match statement.visit(&mut Factors) {
        ControlFlow::Break(message) => Err(message),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Factors;

impl VisitorMut for Factors {
    type Break = String;

    // Before the children: the replacement holds the source factor, which is visited
    // next, so `t PIVOT (…) UNPIVOT (…)` is rewritten from the outside in.
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<String> {
        let rewritten = match factor {
            TableFactor::Pivot {
                table,
                aggregate_functions,
                value_column,
                value_source: PivotValueSource::List(values),
                default_on_null,
                alias,
            } => pivot(
                table,
                aggregate_functions,
                value_column,
                values,
                default_on_null.as_ref(),
                alias,
            ),
            TableFactor::Unpivot {
                table,
                value,
                name,
                columns,
                null_inclusion,
                alias,
            } => unpivot(table, value, name, columns, null_inclusion.as_ref(), alias),
            // A dynamic pivot waits for its values; its source is read as written.
            _ => return ControlFlow::Continue(()),
        };
        match rewritten {
            Ok(derived) => {
                *factor = derived;
                ControlFlow::Continue(())
            }
            Err(message) => ControlFlow::Break(message),
        }
    }
}

fn pivot(
    source: &TableFactor,
    aggregates: &[ExprWithAlias],
    on: &[Expr],
    values: &[ExprWithAlias],
    default_on_null: Option<&Expr>,
    alias: &Option<TableAlias>,
) -> Result<TableFactor, String> {
    let mut excluded = Vec::new();
    for e in on.iter().chain(aggregates.iter().map(|a| &a.expr)) {
        columns_of(e, &mut excluded);
    }
    let mut items = Vec::new();
    for value in values {
        let parts = split(&value.expr, on.len()).ok_or_else(|| {
            format!(
                "Binder Error: PIVOT value {} must be a tuple of {} values, one per pivoted \
                 column",
                value.expr,
                on.len()
            )
        })?;
        let condition = on
            .iter()
            .zip(&parts)
            // Each comparison parenthesised: sqlparser reads the operand after `IS NOT
            // DISTINCT FROM` up to an `AND` (see `normalize.rs`).
            .map(|(column, value)| format!("(({column}) IS NOT DISTINCT FROM ({value}))"))
            .collect::<Vec<_>>()
            .join(" AND ");
        let value_name = label(value, &parts);
        for aggregate in aggregates {
            let Expr::Function(function) = &aggregate.expr else {
                return Err(format!(
                    "Binder Error: PIVOT takes aggregate functions, not {}",
                    aggregate.expr
                ));
            };
            let mut function = function.clone();
            let filter = match function.filter.take() {
                Some(own) => format!("({own}) AND {condition}"),
                None => condition.clone(),
            };
            let mut item = format!("{function} FILTER (WHERE {filter})");
            if let Some(default) = default_on_null {
                item = format!("coalesce({item}, {default})");
            }
            let name = match (&aggregate.alias, aggregates.len()) {
                (None, 1) => value_name.clone(),
                (Some(alias), _) => format!("{value_name}_{}", alias.value),
                (None, _) => format!(
                    "{value_name}_{}",
                    super::names::duckdb_name(&aggregate.expr)
                ),
            };
            items.push(format!("{item} AS {}", quoted(&name)));
        }
    }
    // DuckDB's `PIVOT t ON k USING … GROUP BY g` keeps `g` alone (`sql/dialect.rs`).
    let (kept, alias) = match alias {
        Some(a) if a.name.value == PIVOT_GROUP_BY => {
            let groups: Vec<String> = a.columns.iter().map(|c| c.name.to_string()).collect();
            (groups.join(", "), &None)
        }
        _ => (format!("*{}", exclude(&excluded)), alias),
    };
    let sql = format!(
        "SELECT {kept} , {} FROM __source GROUP BY ALL",
        items.join(", ")
    );
    derived(&sql, source, alias)
}

fn unpivot(
    source: &TableFactor,
    value: &Expr,
    name: &Ident,
    columns: &[ExprWithAlias],
    nulls: Option<&NullInclusion>,
    alias: &Option<TableAlias>,
) -> Result<TableFactor, String> {
    let outputs: Vec<&Expr> = match value {
        Expr::Tuple(outputs) => outputs.iter().collect(),
        e => vec![e],
    };
    let mut names = Vec::new();
    // Per output column, the source column each unpivoted row takes it from.
    let mut lists: Vec<Vec<String>> = vec![Vec::new(); outputs.len()];
    let mut excluded = Vec::new();
    for column in columns {
        let parts = split(&column.expr, outputs.len()).ok_or_else(|| {
            format!(
                "Binder Error: UNPIVOT column {} must be a tuple of {} columns, one per value \
                 column",
                column.expr,
                outputs.len()
            )
        })?;
        columns_of(&column.expr, &mut excluded);
        let column_name = label(column, &parts);
        names.push(format!("'{}'", column_name.replace('\'', "''")));
        for (list, part) in lists.iter_mut().zip(parts) {
            list.push(part.to_string());
        }
    }
    let outputs: Vec<String> = outputs.iter().map(|o| o.to_string()).collect();
    let mut items = vec![format!("unnest([{}]) AS {name}", names.join(", "))];
    for (output, list) in outputs.iter().zip(&lists) {
        items.push(format!("unnest([{}]) AS {output}", list.join(", ")));
    }
    let unpivoted = format!(
        "SELECT *{} , {} FROM __source",
        exclude(&excluded),
        items.join(", ")
    );
    let sql = match nulls {
        Some(NullInclusion::IncludeNulls) => unpivoted,
        // A row is left out when any of its values is NULL, as in DuckDB.
        _ => format!(
            "SELECT * FROM ({unpivoted}) WHERE {}",
            outputs
                .iter()
                .map(|o| format!("{o} IS NOT NULL"))
                .collect::<Vec<_>>()
                .join(" AND ")
        ),
    };
    derived(&sql, source, alias)
}

/// The parts of a value or column list entry: `e` itself for one column, a tuple's
/// items for `n`; `None` when they do not match.
fn split(e: &Expr, n: usize) -> Option<Vec<&Expr>> {
    match (e, n) {
        (e, 1) => Some(vec![e]),
        (Expr::Tuple(parts), n) if parts.len() == n => Some(parts.iter().collect()),
        _ => None,
    }
}

/// An entry's column name: its alias, or its parts' names joined by `_`.
fn label(entry: &ExprWithAlias, parts: &[&Expr]) -> String {
    match &entry.alias {
        Some(alias) => alias.value.clone(),
        None => parts
            .iter()
            .map(|p| value_name(p))
            .collect::<Vec<_>>()
            .join("_"),
    }
}

/// `sql` parsed, its table `__source` replaced by `source`, as a derived table. Without
/// an alias it is DuckDB's `__unnamed_pivot`: the source's name no longer reaches its
/// columns, and the derived table must not repeat the source's qualified names (a join
/// with the source would hold `t.s` twice).
fn derived(
    sql: &str,
    source: &TableFactor,
    alias: &Option<TableAlias>,
) -> Result<TableFactor, String> {
    Ok(TableFactor::Derived {
        lateral: false,
        subquery: template(sql, source)?,
        alias: Some(alias.clone().unwrap_or_else(|| TableAlias {
            explicit: true,
            name: Ident::new("__unnamed_pivot"),
            columns: vec![],
            at: None,
        })),
        sample: None,
    })
}

/// The query `sql`, its table `__source` replaced by `source` (also `sql/sample.rs`).
pub(super) fn template(sql: &str, source: &TableFactor) -> Result<Box<Query>, String> {
    let mut query = Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| super::parser_message(&e))?;
    let _ = VisitMut::visit(&mut query, &mut PlaceSource(Some(source.clone())));
    Ok(query)
}

/// Puts the source factor in place of the template's `__source` (once: the source may
/// itself name a table `__source`).
struct PlaceSource(Option<TableFactor>);

impl VisitorMut for PlaceSource {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut body = query.body.as_mut();
        if let SetExpr::Select(select) = &mut body
            && let Some(from) = select.from.first_mut()
            && matches!(&from.relation, TableFactor::Table { name, .. } if name.to_string() == "__source")
            && let Some(source) = self.0.take()
        {
            from.relation = source;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// ` EXCLUDE (a, b)`, or nothing.
fn exclude(columns: &[Ident]) -> String {
    if columns.is_empty() {
        return String::new();
    }
    let names: Vec<String> = columns.iter().map(ToString::to_string).collect();
    format!(" EXCLUDE ({})", names.join(", "))
}

/// The columns `e` names (their last part), each once, as the session spells them:
/// unquoted names in lower case.
fn columns_of(e: &Expr, out: &mut Vec<Ident>) {
    let _ = visit_expressions(e, |e| {
        let ident = match e {
            Expr::Identifier(ident) => Some(ident),
            Expr::CompoundIdentifier(parts) => parts.last(),
            _ => None,
        };
        if let Some(ident) = ident {
            let ident = match ident.quote_style {
                Some(_) => ident.clone(),
                None => Ident::new(ident.value.to_lowercase()),
            };
            if !out.contains(&ident) {
                out.push(ident);
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// How DuckDB names a pivot value's column: a string's text, a column's name, anything
/// else as written.
fn value_name(e: &Expr) -> String {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        Expr::Identifier(ident) => ident.value.clone(),
        Expr::CompoundIdentifier(parts) => parts.last().map_or(String::new(), |p| p.value.clone()),
        other => other.to_string(),
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Result<String, String> {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        rewrite(&mut statements[0])?;
        Ok(statements[0].to_string())
    }

    #[test]
    fn pivot_becomes_filtered_aggregates_grouped_by_the_other_columns() {
        assert_eq!(
            rewritten("SELECT * FROM t PIVOT (sum(v) FOR k IN (1, 'a' AS x, NULL)) AS p").unwrap(),
            "SELECT * FROM (SELECT * EXCLUDE (k, v), \
             sum(v) FILTER (WHERE ((k) IS NOT DISTINCT FROM (1))) AS \"1\", \
             sum(v) FILTER (WHERE ((k) IS NOT DISTINCT FROM ('a'))) AS \"x\", \
             sum(v) FILTER (WHERE ((k) IS NOT DISTINCT FROM (NULL))) AS \"NULL\" \
             FROM t GROUP BY ALL) AS p"
        );
        assert_eq!(
            rewritten("SELECT * FROM t PIVOT (sum(V) AS n, count(*) FOR (k, \"S\") IN ((1, 'a')))")
                .unwrap(),
            "SELECT * FROM (SELECT * EXCLUDE (k, \"S\", v), \
             sum(V) FILTER (WHERE ((k) IS NOT DISTINCT FROM (1)) AND ((\"S\") IS NOT DISTINCT FROM ('a'))) AS \"1_a_n\", \
             count(*) FILTER (WHERE ((k) IS NOT DISTINCT FROM (1)) AND ((\"S\") IS NOT DISTINCT FROM ('a'))) AS \"1_a_count_star()\" \
             FROM t GROUP BY ALL) AS __unnamed_pivot"
        );
    }

    #[test]
    fn unpivot_becomes_side_by_side_unnests() {
        assert_eq!(
            rewritten("SELECT * FROM t UNPIVOT (val FOR name IN (k AS kk, v))").unwrap(),
            "SELECT * FROM (SELECT * FROM (SELECT * EXCLUDE (k, v), \
             unnest(['kk', 'v']) AS name, unnest([k, v]) AS val FROM t) \
             WHERE val IS NOT NULL) AS __unnamed_pivot"
        );
        assert_eq!(
            rewritten("SELECT * FROM t UNPIVOT INCLUDE NULLS ((a, b) FOR n IN ((k, v), (v, k)))")
                .unwrap(),
            "SELECT * FROM (SELECT * EXCLUDE (k, v), unnest(['k_v', 'v_k']) AS n, \
             unnest([k, v]) AS a, unnest([v, k]) AS b FROM t) AS __unnamed_pivot"
        );
    }

    #[test]
    fn dynamic_pivots_wait_for_their_values() {
        let sql = "SELECT * FROM t PIVOT(sum(v) FOR k IN (SELECT k FROM u)) AS p";
        assert_eq!(rewritten(sql).unwrap(), sql);
    }

    #[test]
    fn refusals() {
        assert_eq!(
            rewritten("SELECT * FROM t PIVOT (sum(v) FOR (k, s) IN (1, 2))").unwrap_err(),
            "Binder Error: PIVOT value 1 must be a tuple of 2 values, one per pivoted column"
        );
    }
}
