//! DuckDB's `SUMMARIZE t` and `SUMMARIZE <query>`: one row per column of the table or
//! query, with DuckDB's columns: `column_name`, `column_type`, `min`, `max`,
//! `approx_unique`, `avg`, `std`, `q25`, `q50`, `q75`, `count`, `null_percentage`.
//!
//! `sql/dialect.rs` splices the statement into `SELECT * FROM (<query>) AS
//! "__deltalite_summarize"` ([`SUMMARIZE`]). Before planning, that derived table's query
//! is planned on its own (through `plan_query`, so under the same grants and rewrites) to
//! learn its columns, and the statement becomes the summary: per column, one select of
//! aggregates over the query, in a `UNION ALL`, ordered as the columns are.
//!
//! `avg`, `std` and the quartiles are given for numbers only (DuckDB gives an average of
//! dates too); the quartiles are DataFusion's `approx_percentile_cont` (DuckDB's are a
//! reservoir sample's), so on small inputs they may interpolate where DuckDB picks a
//! value. Every aggregate is bounded in memory.

use std::fmt::Write;
use std::ops::ControlFlow;

use arrow::datatypes::DataType;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    Ident, Query, SetExpr, Statement, TableAlias, TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::{SqlSession, sql_statement};
use crate::error::ApiError;

/// The alias that marks the query a `SUMMARIZE` summarizes.
pub(crate) const SUMMARIZE: &str = "__deltalite_summarize";

impl SqlSession {
    /// `statement` with a spliced `SUMMARIZE` written out as its summary query.
    pub(super) async fn summarize(
        &mut self,
        mut statement: DFStatement,
    ) -> Result<DFStatement, ApiError> {
        let Some(Statement::Query(query)) = sql_statement(&mut statement) else {
            return Ok(statement);
        };
        let Some(summarized) = summarized(query) else {
            return Ok(statement);
        };
        let probe = DFStatement::Statement(Box::new(Statement::Query(summarized.clone())));
        let plan = Box::pin(self.plan_query(probe)).await?;
        let mut columns = Vec::new();
        for field in plan.schema().fields() {
            columns.push((field.name().clone(), field.data_type().clone()));
        }
        let mut built = Parser::new(&GenericDialect {})
            .try_with_sql(&summary_sql(&columns))
            .and_then(|mut p| p.parse_query())
            .map_err(|e| super::parse_error(&e))?;
        let source = TableFactor::Derived {
            lateral: false,
            subquery: summarized,
            alias: Some(TableAlias {
                explicit: true,
                at: None,
                name: Ident::new("__source"),
                columns: vec![],
            }),
            sample: None,
        };
        let _ = VisitMut::visit(&mut built, &mut PlaceSource(source));
        // The statement is the summary (its order is the columns', which a derived table
        // would not keep).
        **query = *built;
        Ok(statement)
    }
}

/// The summarized query in place of each [`SOURCE`] of the summary (a name the summary
/// alone uses, so a table of the summarized query is never taken for it).
struct PlaceSource(TableFactor);

impl VisitorMut for PlaceSource {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if matches!(factor, TableFactor::Table { name, .. } if name.to_string() == SOURCE) {
            *factor = self.0.clone();
        }
        ControlFlow::Continue(())
    }
}

/// The placeholder of the summarized query in [`summary_sql`].
const SOURCE: &str = "__deltalite_summarize_source";

/// The query a spliced `SUMMARIZE` summarizes: `SELECT * FROM (q) AS "__deltalite_summarize"`.
fn summarized(query: &Query) -> Option<Box<Query>> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    match &from.relation {
        TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        } if from.joins.is_empty() && alias.name.value == SUMMARIZE => Some(subquery.clone()),
        _ => None,
    }
}

/// The summary of `columns` (name and type) over [`SOURCE`].
fn summary_sql(columns: &[(String, DataType)]) -> String {
    let text = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let mut selects = Vec::with_capacity(columns.len());
    for (i, (name, dt)) in columns.iter().enumerate() {
        let c = format!("\"{}\"", name.replace('"', "\"\""));
        let nested = matches!(
            dt,
            DataType::List(_)
                | DataType::LargeList(_)
                | DataType::FixedSizeList(..)
                | DataType::Struct(_)
                | DataType::Map(..)
        );
        let numeric = dt.is_numeric();
        let as_text = |e: String| format!("CAST({e} AS VARCHAR)");
        let null_text = "CAST(NULL AS VARCHAR)".to_string();
        let (min, max, unique) = if nested {
            (
                null_text.clone(),
                null_text.clone(),
                "CAST(NULL AS BIGINT)".to_string(),
            )
        } else {
            (
                as_text(format!("min({c})")),
                as_text(format!("max({c})")),
                // DataFusion counts no floats: their text is as distinct as they are.
                if matches!(
                    dt,
                    DataType::Float16 | DataType::Float32 | DataType::Float64
                ) {
                    format!("CAST(approx_distinct(CAST({c} AS VARCHAR)) AS BIGINT)")
                } else {
                    format!("CAST(approx_distinct({c}) AS BIGINT)")
                },
            )
        };
        let (avg, std) = if numeric {
            (
                as_text(format!("avg({c})")),
                as_text(format!("stddev_samp({c})")),
            )
        } else {
            (null_text.clone(), null_text.clone())
        };
        let quartile = |q: &str| {
            if numeric {
                as_text(format!("approx_percentile_cont({c}, {q})"))
            } else {
                null_text.clone()
            }
        };
        let mut select = String::new();
        let _ = write!(
            select,
            "SELECT {i} AS __position, {name} AS \"column_name\", {ty} AS \"column_type\", \
             {min} AS \"min\", {max} AS \"max\", {unique} AS \"approx_unique\", \
             {avg} AS \"avg\", {std} AS \"std\", {q25} AS \"q25\", {q50} AS \"q50\", \
             {q75} AS \"q75\", count(*) AS \"count\", CASE WHEN count(*) = 0 THEN NULL \
             ELSE CAST(100.0 * (count(*) - count({c})) / count(*) AS DECIMAL(9,2)) END AS \
             \"null_percentage\" FROM {SOURCE}",
            name = text(name),
            ty = text(&crate::types::duckdb_type(dt)),
            q25 = quartile("0.25"),
            q50 = quartile("0.5"),
            q75 = quartile("0.75"),
        );
        selects.push(select);
    }
    format!(
        "SELECT \"column_name\", \"column_type\", \"min\", \"max\", \"approx_unique\", \
         \"avg\", \"std\", \"q25\", \"q50\", \"q75\", \"count\", \"null_percentage\" \
         FROM ({}) AS __summary ORDER BY __position",
        selects.join(" UNION ALL ")
    )
}
