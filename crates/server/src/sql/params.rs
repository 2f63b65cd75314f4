//! Statement parameters: the placeholders a statement has (`?`, `?N`, `$N` by position,
//! `$name` by name) and the statement with bound values written in as typed SQL literals.
//!
//! Binding rewrites the text on sqlparser's own tokens (placeholders inside strings, quoted
//! names and comments are not tokens, so they are never touched), and the bound statement
//! then takes the one path every statement takes: parse, guard, plan. A value can only
//! ever become one literal: strings are quoted with their quotes doubled, and every other
//! type is rendered from its Arrow value, never from client text. The literal carries its
//! own type, so the statement casts it to what it needs exactly as it would a literal
//! written in the SQL (a string bound to a `TIMESTAMP` column, an `INT64` compared with an
//! `INT32` column).

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::sql_err;
use crate::error::ApiError;

/// How a statement's placeholders are addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parameter {
    /// `?` (the n-th, counting from 1), `?N` or `$N`: the value in column `N - 1`.
    Position(usize),
    /// `$name`: the value in the column called `name`.
    Name(String),
}

impl Parameter {
    /// The field name a parameter schema gives this parameter: `name` for `$name` (what
    /// clients that bind by name send), the position for the others.
    pub fn field_name(&self) -> String {
        match self {
            Parameter::Position(n) => n.to_string(),
            Parameter::Name(name) => name.clone(),
        }
    }
}

/// One placeholder token and its byte range in the text.
struct Slot {
    parameter: Parameter,
    start: usize,
    end: usize,
}

/// The statement's parameters, each once, in the order they first appear (positions
/// ascending). Text the tokenizer cannot read has none (the parser reports it later).
pub fn parameters(sql: &str) -> Result<Vec<Parameter>, ApiError> {
    let mut out: Vec<Parameter> = Vec::new();
    for slot in slots(sql)? {
        if !out.contains(&slot.parameter) {
            out.push(slot.parameter);
        }
    }
    out.sort_by_key(|p| match p {
        Parameter::Position(n) => (0, *n),
        Parameter::Name(_) => (1, 0),
    });
    Ok(out)
}

fn slots(sql: &str) -> Result<Vec<Slot>, ApiError> {
    let Some(tokens) = super::dialect::significant_tokens(sql) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let (mut anonymous, mut numbered) = (0usize, false);
    for t in tokens {
        let Token::Placeholder(text) = &t.token else {
            continue;
        };
        let parameter = if text == "?" {
            anonymous += 1;
            Parameter::Position(anonymous)
        } else {
            let rest = &text[1..];
            match rest.parse::<usize>() {
                Ok(0) => {
                    return Err(sql_err(format!(
                        "Parser Error: parameter {text}: positions start at 1"
                    )));
                }
                Ok(n) => {
                    numbered = true;
                    Parameter::Position(n)
                }
                Err(_) if text.starts_with('$') && !rest.is_empty() => {
                    Parameter::Name(rest.to_string())
                }
                Err(_) => {
                    return Err(sql_err(format!("Parser Error: unknown parameter {text}")));
                }
            }
        };
        if anonymous > 0 && numbered {
            // `?` counts positions itself: mixed with `$2` it would be ambiguous.
            return Err(sql_err(
                "Parser Error: a statement cannot mix ? with numbered parameters",
            ));
        }
        out.push(Slot {
            parameter,
            start: t.start,
            end: t.end,
        });
    }
    Ok(out)
}

/// `sql` with every placeholder replaced by the literal of row `row` of `values`: a named
/// parameter takes the column of its name, else (like positional ones) the column at its
/// position among the statement's parameters. Clients differ: some name the columns after
/// the parameter schema, some `0`, `1`, ….
pub fn bind(sql: &str, values: &RecordBatch, row: usize) -> Result<String, ApiError> {
    let slots = slots(sql)?;
    let params = parameters(sql)?;
    if params.is_empty() {
        return Ok(sql.to_string());
    }
    if row >= values.num_rows() {
        return Err(sql_err(format!(
            "Invalid Input Error: no values bound for the statement's {} parameter(s)",
            params.len()
        )));
    }
    let schema = values.schema();
    let column_of = |p: &Parameter| -> Result<usize, ApiError> {
        if let Parameter::Name(name) = p
            && let Ok(i) = schema.index_of(name)
        {
            return Ok(i);
        }
        let index = match p {
            Parameter::Position(n) => n - 1,
            Parameter::Name(_) => params.iter().position(|q| q == p).unwrap_or(usize::MAX),
        };
        if index < values.num_columns() && values.num_columns() == params.len() {
            return Ok(index);
        }
        Err(sql_err(format!(
            "Invalid Input Error: no value bound for parameter {} (bound columns: {})",
            match p {
                Parameter::Position(n) => format!("${n}"),
                Parameter::Name(n) => format!("${n}"),
            },
            schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    };
    let mut out = sql.to_string();
    for slot in slots.iter().rev() {
        let column = values.column(column_of(&slot.parameter)?);
        let literal = literal(column.as_ref(), row)?;
        out.replace_range(slot.start..slot.end, &literal);
    }
    Ok(out)
}

/// A value as a SQL literal of its own type.
fn literal(array: &dyn Array, row: usize) -> Result<String, ApiError> {
    let dt = array.data_type();
    let value = ScalarValue::try_from_array(array, row)
        .map_err(|e| sql_err(format!("Invalid Input Error: bound value: {e}")))?;
    if value.is_null() {
        return Ok(match sql_type(dt) {
            Some(t) => format!("CAST(NULL AS {t})"),
            None => "NULL".to_string(),
        });
    }
    let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let cast = |s: &str, t: &str| format!("CAST({} AS {t})", quoted(s));
    Ok(match value {
        ScalarValue::Boolean(Some(b)) => if b { "TRUE" } else { "FALSE" }.to_string(),
        ScalarValue::Int8(Some(v)) => cast(&v.to_string(), "TINYINT"),
        ScalarValue::Int16(Some(v)) => cast(&v.to_string(), "SMALLINT"),
        ScalarValue::Int32(Some(v)) => cast(&v.to_string(), "INT"),
        // Parenthesised: `x-?` bound to -1 must not become the comment `x--1`.
        ScalarValue::Int64(Some(v)) => format!("({v})"),
        ScalarValue::UInt8(Some(v)) => cast(&v.to_string(), "TINYINT UNSIGNED"),
        ScalarValue::UInt16(Some(v)) => cast(&v.to_string(), "SMALLINT UNSIGNED"),
        ScalarValue::UInt32(Some(v)) => cast(&v.to_string(), "INT UNSIGNED"),
        ScalarValue::UInt64(Some(v)) => cast(&v.to_string(), "BIGINT UNSIGNED"),
        ScalarValue::Float32(Some(v)) => cast(&float_text(f64::from(v)), "REAL"),
        ScalarValue::Float64(Some(v)) => cast(&float_text(v), "DOUBLE"),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => quoted(&s),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => format!("X'{}'", hex::encode(b)),
        _ => {
            // Decimals and temporal values: their canonical text, cast back to the type.
            let Some(t) = sql_type(dt) else {
                return Err(sql_err(format!(
                    "Not implemented Error: parameters of type {dt} are not supported"
                )));
            };
            let text = arrow::compute::cast(&array.slice(row, 1), &DataType::Utf8)
                .ok()
                .and_then(|a| {
                    a.as_any()
                        .downcast_ref::<arrow::array::StringArray>()
                        .map(|s| s.value(0).to_string())
                })
                .ok_or_else(|| {
                    sql_err(format!(
                        "Not implemented Error: parameters of type {dt} are not supported"
                    ))
                })?;
            cast(&text, &t)
        }
    })
}

/// Shortest text that reads back as the same float (`NaN`, `inf` included).
fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// The SQL type a literal of `dt` is cast to; `None` for types a parameter cannot have.
fn sql_type(dt: &DataType) -> Option<String> {
    Some(match dt {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "TINYINT UNSIGNED".into(),
        DataType::UInt16 => "SMALLINT UNSIGNED".into(),
        DataType::UInt32 => "INT UNSIGNED".into(),
        DataType::UInt64 => "BIGINT UNSIGNED".into(),
        DataType::Float16 | DataType::Float32 => "REAL".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "BYTEA".into(),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => format!("DECIMAL({p}, {s})"),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE".into(),
        _ => return None,
    })
}

/// Rows bound to one INSERT at most: its statement text stays a few MB.
pub const ROWS_PER_INSERT: usize = 1000;

/// `INSERT INTO t [(cols)] VALUES (one row of parameters)` bound to `rows` of `values` as
/// one statement with a row per bound row, so that `executemany` is one commit per
/// [`ROWS_PER_INSERT`] rows, not one per row. `None` for any other statement (those run
/// once per row): one that is not a single-row `VALUES` insert, or has `ON CONFLICT`,
/// `RETURNING`, a `WITH` or an `ORDER BY`/`LIMIT` on its rows.
pub fn bind_insert_rows(
    sql: &str,
    values: &RecordBatch,
    rows: std::ops::Range<usize>,
) -> Result<Option<String>, ApiError> {
    use datafusion::sql::sqlparser::ast::{Expr, Parens, SetExpr, Statement};
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    /// The one row of a plain single-row `VALUES` insert.
    fn single_row(statement: &mut Statement) -> Option<&mut Vec<Parens<Vec<Expr>>>> {
        let Statement::Insert(insert) = statement else {
            return None;
        };
        if insert.on.is_some() || insert.returning.is_some() {
            return None;
        }
        let query = insert.source.as_mut()?;
        if query.with.is_some()
            || query.order_by.is_some()
            || query.limit_clause.is_some()
            || query.fetch.is_some()
        {
            return None;
        }
        let SetExpr::Values(v) = query.body.as_mut() else {
            return None;
        };
        (v.rows.len() == 1).then_some(&mut v.rows)
    }
    let parse = |text: &str| -> Option<Statement> {
        let mut statements = Parser::parse_sql(&GenericDialect {}, text).ok()?;
        (statements.len() == 1).then(|| statements.remove(0))
    };
    let Some(mut combined) = parse(sql) else {
        return Ok(None);
    };
    if single_row(&mut combined).is_none() || rows.is_empty() {
        return Ok(None);
    }
    let mut all = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(mut bound) = parse(&bind(sql, values, row)?) else {
            return Ok(None);
        };
        match single_row(&mut bound) {
            Some(r) => all.append(r),
            None => return Ok(None),
        }
    }
    if let Some(r) = single_row(&mut combined) {
        *r = all;
    }
    Ok(Some(combined.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, NullArray, StringArray, TimestampMicrosecondArray};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).expect("batch")
    }

    #[test]
    fn placeholders_in_order_and_not_inside_strings_or_names() {
        let sql = "SELECT '?', \"$x\", ? /* ? */ FROM t WHERE a = ? -- ?";
        assert_eq!(
            parameters(sql).expect("params"),
            vec![Parameter::Position(1), Parameter::Position(2)]
        );
        assert_eq!(
            parameters("SELECT $min, $id, $min").expect("named"),
            vec![Parameter::Name("min".into()), Parameter::Name("id".into())]
        );
        assert_eq!(
            parameters("SELECT $2, $1").expect("numbered"),
            vec![Parameter::Position(1), Parameter::Position(2)]
        );
        assert!(parameters("SELECT ?, $2").is_err());
        assert!(parameters("SELECT $0").is_err());
        // dbt's dollar-quoted comments are strings, not parameters.
        assert!(
            parameters("COMMENT ON TABLE t IS $tag$a ? b$tag$")
                .expect("none")
                .is_empty()
        );
    }

    #[test]
    fn values_become_literals_of_their_type() {
        let values = batch(vec![
            ("0", Arc::new(Int64Array::from(vec![-1])) as ArrayRef),
            (
                "1",
                Arc::new(StringArray::from(vec!["it's; DROP TABLE t"])) as ArrayRef,
            ),
        ]);
        assert_eq!(
            bind("SELECT x-?, ?", &values, 0).expect("bind"),
            "SELECT x-(-1), 'it''s; DROP TABLE t'"
        );
        let named = batch(vec![
            (
                "min_value",
                Arc::new(Int64Array::from(vec![100])) as ArrayRef,
            ),
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ]);
        assert_eq!(
            bind(
                "SELECT * FROM t WHERE id = $id AND v >= $min_value",
                &named,
                0
            )
            .expect("by name"),
            "SELECT * FROM t WHERE id = (1) AND v >= (100)"
        );
        let ts = batch(vec![(
            "t",
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(1_700_000_000_000_000),
                None,
            ])) as ArrayRef,
        )]);
        assert_eq!(
            bind("SELECT ?", &ts, 0).expect("timestamp"),
            "SELECT CAST('2023-11-14T22:13:20' AS TIMESTAMP)"
        );
        assert_eq!(
            bind("SELECT ?", &ts, 1).expect("null"),
            "SELECT CAST(NULL AS TIMESTAMP)"
        );
        let null = batch(vec![("n", Arc::new(NullArray::new(1)) as ArrayRef)]);
        assert_eq!(bind("SELECT ?", &null, 0).expect("null"), "SELECT NULL");
        // Missing values are an error, not a NULL.
        assert!(bind("SELECT ?, ?", &null, 0).is_err());
        assert!(bind("SELECT ?", &null, 1).is_err());
    }

    #[test]
    fn an_insert_of_one_values_row_binds_many_rows_as_one_statement() {
        let values = batch(vec![
            ("1", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "2",
                Arc::new(StringArray::from(vec![Some("it's"), None, Some("?")])) as ArrayRef,
            ),
        ]);
        let sql = "INSERT INTO t (a, b) VALUES (?, ?)";
        assert_eq!(
            bind_insert_rows(sql, &values, 0..3)
                .expect("bind")
                .as_deref(),
            Some(
                "INSERT INTO t (a, b) VALUES ((1), 'it''s'), ((2), CAST(NULL AS VARCHAR)), ((3), '?')"
            )
        );
        assert_eq!(
            bind_insert_rows(sql, &values, 1..2)
                .expect("bind")
                .as_deref(),
            Some("INSERT INTO t (a, b) VALUES ((2), CAST(NULL AS VARCHAR))")
        );
        // Any other statement runs once per row.
        for other in [
            "INSERT INTO t VALUES (?, ?), (0, 'x')",
            "INSERT INTO t SELECT ?, ?",
            "INSERT INTO t VALUES (?, ?) ON CONFLICT DO NOTHING",
            "INSERT INTO t VALUES (?, ?) RETURNING a",
            "UPDATE t SET b = ? WHERE a = ?",
            "SELECT ?, ?",
        ] {
            assert_eq!(
                bind_insert_rows(other, &values, 0..3).expect(other),
                None,
                "{other}"
            );
        }
    }
}
