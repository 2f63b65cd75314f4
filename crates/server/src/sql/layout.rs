//! Table layout DDL: `PARTITIONED BY` / `SORTED BY` keys (DuckLake's syntax, which dlt and
//! dbt send) and what a Delta table makes of them.
//!
//! - An identity key (`region`) becomes a Delta partition column. Setting a different set
//!   of them rewrites the table into the new layout in one overwrite commit
//!   (`WriteOptions::partition_by`), rows streamed from a scan of the table.
//! - A transform key (`year(ts)`, `month(ts)`, `day(ts)`, `hour(ts)`, `bucket(n, id)`) is
//!   recorded, not materialised: Delta has no hidden partitioning, and a derived partition
//!   column would show up as a column of the table in every other reader. The key list is
//!   kept as written in the table property `deltalite.partitioned_by`, which
//!   `information_schema`-style readers and the next `SET` compare against.
//! - `SORTED BY` keys are recorded the same way (`deltalite.sorted_by`).
//!
//! Keys naming no column of the table are an error, as in DuckDB; anything valid is
//! accepted whatever the table holds, so a load never fails on a layout hint.

use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments, SelectItem, SetExpr, Value,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::{column_named, sql_err};
use crate::error::ApiError;

/// One `PARTITIONED BY` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LayoutKey {
    /// The column itself: a Delta partition column.
    Identity(String),
    /// `year|month|day|hour(column)` or `bucket(n, column)`: recorded only.
    Transform { function: String, column: String },
}

/// Parse a key list as written (`"region", month("ts"), bucket(8, "id")`) against the
/// table's columns.
pub(super) fn parse_keys(text: &str, columns: &[String]) -> Result<Vec<LayoutKey>, ApiError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let invalid = |what: &str| sql_err(format!("Parser Error: invalid partition key {what}"));
    let query = Parser::new(&GenericDialect {})
        .try_with_sql(&format!("SELECT {text}"))
        .and_then(|mut p| p.parse_query())
        .map_err(|e| super::parse_error(&e))?;
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Err(invalid(text));
    };
    let column = |e: &SqlExpr| -> Result<String, ApiError> {
        let name = match e {
            SqlExpr::Identifier(i) => i.value.clone(),
            SqlExpr::CompoundIdentifier(parts) => {
                parts.last().map(|i| i.value.clone()).unwrap_or_default()
            }
            other => return Err(invalid(&other.to_string())),
        };
        column_named(columns, &name).ok_or_else(|| {
            sql_err(format!(
                "Binder Error: partition key column \"{name}\" is not a column of the table"
            ))
        })
    };
    let mut keys = Vec::new();
    for item in &select.projection {
        let SelectItem::UnnamedExpr(expr) = item else {
            return Err(invalid(&item.to_string()));
        };
        let key = match expr {
            SqlExpr::Function(f) => {
                let function = f.name.to_string().to_lowercase();
                let FunctionArguments::List(list) = &f.args else {
                    return Err(invalid(&expr.to_string()));
                };
                let args: Vec<&SqlExpr> = list
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                        _ => None,
                    })
                    .collect();
                match (function.as_str(), args.as_slice()) {
                    ("year" | "month" | "day" | "hour", [c]) => LayoutKey::Transform {
                        function: function.clone(),
                        column: column(c)?,
                    },
                    // `month(ts)` as the statement's normalization spells it
                    // (`sql/normalize.rs`: DuckDB's date part functions).
                    ("date_part", [SqlExpr::Value(part), c])
                        if matches!(&part.value, Value::SingleQuotedString(p)
                            if matches!(p.as_str(), "year" | "month" | "day" | "hour")) =>
                    {
                        let Value::SingleQuotedString(part) = &part.value else {
                            return Err(invalid(&expr.to_string()));
                        };
                        LayoutKey::Transform {
                            function: part.clone(),
                            column: column(c)?,
                        }
                    }
                    ("bucket", [SqlExpr::Value(_), c]) => LayoutKey::Transform {
                        function: format!("bucket({})", args[0]),
                        column: column(c)?,
                    },
                    ("identity", [c]) => LayoutKey::Identity(column(c)?),
                    _ => return Err(invalid(&expr.to_string())),
                }
            }
            other => LayoutKey::Identity(column(other)?),
        };
        keys.push(key);
    }
    Ok(keys)
}

/// A key list in one canonical spelling (`region, month(ts), bucket(8, id)`), as the
/// layout property stores it: the same keys sent quoted or not compare equal.
pub(super) fn render(keys: &[LayoutKey]) -> String {
    keys.iter()
        .map(|k| match k {
            LayoutKey::Identity(c) => quoted(c),
            LayoutKey::Transform { function, column } => match function.strip_suffix(')') {
                // `bucket(8)` → `bucket(8, id)`
                Some(open) => format!("{open}, {})", quoted(column)),
                None => format!("{function}({})", quoted(column)),
            },
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A column name as SQL: bare when it reads back the same, quoted otherwise.
fn quoted(column: &str) -> String {
    let bare = column
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && column
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if bare {
        column.to_string()
    } else {
        format!("\"{}\"", column.replace('"', "\"\""))
    }
}

/// The Delta partition columns of a key list: its identity keys, in order.
pub(super) fn partition_columns(keys: &[LayoutKey]) -> Vec<String> {
    let mut columns = Vec::new();
    for key in keys {
        if let LayoutKey::Identity(c) = key
            && !columns.contains(c)
        {
            columns.push(c.clone());
        }
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::{LayoutKey, parse_keys, partition_columns, render};

    #[test]
    fn keys_as_dlt_and_dbt_send_them() {
        let columns: Vec<String> = ["region", "ts", "id"].map(String::from).to_vec();
        let keys = parse_keys(r#""region", month("ts"), bucket(8, "id")"#, &columns).unwrap();
        assert_eq!(
            keys,
            vec![
                LayoutKey::Identity("region".into()),
                LayoutKey::Transform {
                    function: "month".into(),
                    column: "ts".into()
                },
                LayoutKey::Transform {
                    function: "bucket(8)".into(),
                    column: "id".into()
                },
            ]
        );
        assert_eq!(partition_columns(&keys), vec!["region".to_string()]);
        assert_eq!(render(&keys), "region, month(ts), bucket(8, id)");
        // `month(ts)` as a statement reaches DDL after normalization: the same key.
        assert_eq!(
            parse_keys("region, date_part('month', ts), bucket(8, id)", &columns).unwrap(),
            keys
        );
        assert_eq!(
            parse_keys("ID", &columns).unwrap(),
            vec![LayoutKey::Identity("id".into())]
        );
        assert!(parse_keys("", &columns).unwrap().is_empty());
        let err = parse_keys("nope", &columns).unwrap_err().to_string();
        assert!(err.contains("\"nope\" is not a column"), "{err}");
        let err = parse_keys("sqrt(id)", &columns).unwrap_err().to_string();
        assert!(err.contains("invalid partition key sqrt(id)"), "{err}");
    }
}
