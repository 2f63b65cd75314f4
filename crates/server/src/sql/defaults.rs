//! Column `DEFAULT`s (`CREATE TABLE t (c T DEFAULT v)`, `ALTER TABLE … ADD COLUMN c T
//! DEFAULT v`): evaluated once, when the DDL runs, and kept as the column's value as text
//! in its field metadata (`deltalite::COLUMN_DEFAULT_KEY`). The engine fills it into
//! every written batch that leaves the column out (`INSERT` with a column list, ingest,
//! upserts); `MERGE`'s `INSERT` clauses, and a `DEFAULT` written as a value (`VALUES`,
//! `UPDATE … SET c = DEFAULT`, a `MERGE`'s `SET`), write it here ([`default_value_sql`]); the
//! listings show it as DuckDB's `column_default` ([`default_sql`]).
//!
//! Only constants: DuckDB evaluates a default such as `now()` or `nextval(…)` for each
//! row, which a stored value cannot do, so a default that calls a function or names a
//! column is refused.

use std::ops::ControlFlow;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::kernels::cast::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field};
use datafusion::sql::sqlparser::ast::{
    ColumnDef, ColumnOption, Expr, Query, SetExpr, Value, Visit, Visitor,
};
use deltalite::COLUMN_DEFAULT_KEY;

use super::{SqlSession, sql_err};
use crate::error::ApiError;
use crate::types::duckdb_field_type;

/// The `DEFAULT` of `column`, unless there is none or it is `NULL` (what every column
/// does): refused when it is not a constant.
fn default_expr(column: &ColumnDef) -> Result<Option<&Expr>, ApiError> {
    let Some(expr) = column.options.iter().find_map(|o| match &o.option {
        ColumnOption::Default(e) => Some(e),
        _ => None,
    }) else {
        return Ok(None);
    };
    let mut bare = expr;
    while let Expr::Nested(inner) = bare {
        bare = inner;
    }
    if matches!(bare, Expr::Value(v) if v.value == Value::Null) {
        return Ok(None);
    }
    struct NotConstant;
    impl Visitor for NotConstant {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match expr {
                Expr::Function(_)
                | Expr::Identifier(_)
                | Expr::CompoundIdentifier(_)
                | Expr::Subquery(_)
                | Expr::Exists { .. }
                | Expr::InSubquery { .. } => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    if expr.visit(&mut NotConstant).is_break() {
        return Err(sql_err(format!(
            "Not implemented Error: the DEFAULT of column {} is not a constant (it calls a \
             function, names a column or runs a query): a default is stored once, not \
             computed for each row",
            column.name
        )));
    }
    Ok(Some(expr))
}

impl SqlSession {
    /// `field` (made from `column`) with its `DEFAULT` evaluated and kept in its metadata.
    pub(super) async fn with_default(
        &mut self,
        field: Field,
        column: &ColumnDef,
    ) -> Result<Field, ApiError> {
        let Some(expr) = default_expr(column)? else {
            return Ok(field);
        };
        let refuse = |why: String| {
            sql_err(format!(
                "Conversion Error: DEFAULT {expr} (column {}): {why}",
                column.name
            ))
        };
        if field.data_type().is_nested() {
            return Err(refuse(format!(
                "defaults of {} columns are not supported",
                duckdb_field_type(&field)
            )));
        }
        let batches = self
            .collect_sql(&format!("SELECT CAST(({expr}) AS {})", column.data_type))
            .await
            .map_err(|e| match e {
                ApiError::BadRequest(m) => {
                    refuse(m.trim_start_matches("Conversion Error: ").to_string())
                }
                other => other,
            })?;
        let Some(value) = batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .map(|b| b.column(0))
        else {
            return Err(ApiError::Internal(format!("DEFAULT {expr} gave no value")));
        };
        let strict = CastOptions {
            safe: false,
            ..Default::default()
        };
        let typed = cast_with_options(&value.slice(0, 1), field.data_type(), &strict)
            .map_err(|e| refuse(e.to_string()))?;
        if typed.is_null(0) {
            return Ok(field);
        }
        let text: ArrayRef = cast_with_options(&typed, &DataType::Utf8, &strict)
            .map_err(|e| refuse(e.to_string()))?;
        let text = text.as_string::<i32>().value(0).to_string();
        // Kept as text and cast back by the engine for every write: the value must
        // survive that, exactly.
        let back =
            deltalite::default_column(&field, &text, 1).map_err(|e| refuse(e.to_string()))?;
        if back.to_data() != typed.to_data() {
            return Err(refuse(format!(
                "its value cannot be kept exactly as text ({text:?})"
            )));
        }
        let mut metadata = field.metadata().clone();
        metadata.insert(COLUMN_DEFAULT_KEY.to_string(), text);
        Ok(field.with_metadata(metadata))
    }
}

/// The default of `field` as DuckDB's `column_default` spells it: `'text'` for text, a
/// number or boolean as it is, else a cast of the text (DuckDB shows the expression as
/// written; a timestamp written as `'…'` reads `CAST('…' AS TIMESTAMP)` here).
pub(super) fn default_sql(field: &Field) -> Option<String> {
    let text = field.metadata().get(COLUMN_DEFAULT_KEY)?;
    Some(match field.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => quote(text),
        t if t.is_numeric() || *t == DataType::Boolean => text.clone(),
        _ => cast_of(field, text),
    })
}

/// The default of `field` as an expression of exactly its type, for SQL the server
/// writes (a `MERGE`'s `INSERT`).
pub(super) fn default_value_sql(field: &Field) -> Option<String> {
    Some(cast_of(field, field.metadata().get(COLUMN_DEFAULT_KEY)?))
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn cast_of(field: &Field, text: &str) -> String {
    format!("CAST({} AS {})", quote(text), duckdb_field_type(field))
}

/// Whether `e` is a bare `DEFAULT`: a `VALUES` item, an `UPDATE`'s or a `MERGE`'s value,
/// standing for its column's default.
pub(super) fn is_default(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// An `INSERT`'s rows with DuckDB's `DEFAULT` forms spelled out: `DEFAULT VALUES` (no
/// source: one row of every column's default) and a bare `DEFAULT` in a `VALUES` row
/// (the default of the column it stands for). `fields` are the columns the rows fill,
/// in order; a column without a default takes NULL. `None`: nothing to spell out.
pub(super) fn spell_out_defaults(
    source: Option<&Query>,
    fields: &[&Field],
) -> Result<Option<Query>, ApiError> {
    let sql_of = |field: &Field| default_value_sql(field).unwrap_or_else(|| "NULL".to_string());
    // Text this module wrote; a failure to parse it is ours.
    let unparsed = |sql: &str| ApiError::Internal(format!("a default this server wrote: {sql}"));
    let Some(source) = source else {
        let row: Vec<String> = fields.iter().map(|f| sql_of(f)).collect();
        let sql = format!("VALUES ({})", row.join(", "));
        return super::rewrite::parse_query(&sql)
            .map(Some)
            .ok_or_else(|| unparsed(&sql));
    };
    let SetExpr::Values(values) = source.body.as_ref() else {
        return Ok(None);
    };
    if !values.rows.iter().flat_map(|r| &r.content).any(is_default) {
        return Ok(None);
    }
    let mut spelled = source.clone();
    let SetExpr::Values(values) = spelled.body.as_mut() else {
        return Ok(None);
    };
    for row in &mut values.rows {
        for (value, field) in row.content.iter_mut().zip(fields) {
            if is_default(value) {
                let sql = sql_of(field);
                *value = super::rewrite::parse_expr(&sql).ok_or_else(|| unparsed(&sql))?;
            }
        }
    }
    Ok(Some(spelled))
}
