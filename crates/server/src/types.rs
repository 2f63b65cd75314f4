//! DuckDB type names for Arrow types (result columns, information_schema) and the
//! reverse mapping for DDL.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use crate::error::ApiError;

/// Field metadata key carrying a SQL type Delta cannot store natively (e.g. `TIME`,
/// stored as a string).
pub const SQL_TYPE_KEY: &str = "deltalite.sql_type";

/// Whether a column holds `TIME` values (as their text, `HH:MM:SS[.fff]`).
pub fn is_time(field: &Field) -> bool {
    field
        .metadata()
        .get(SQL_TYPE_KEY)
        .is_some_and(|t| t == "TIME")
}

/// The type a `TIME` column's values are checked and formatted through on their way
/// in: text that is no time of day is refused, and every value is stored in one form
/// (`7:00` as `07:00:00`), whose text order is the times' order.
pub const TIME_VALUE_TYPE: DataType = DataType::Time64(TimeUnit::Microsecond);

/// DuckDB's canonical name of a column's type.
pub fn duckdb_field_type(field: &Field) -> String {
    if let Some(t) = field.metadata().get(SQL_TYPE_KEY) {
        return t.clone();
    }
    duckdb_type(field.data_type())
}

/// DuckDB's canonical name of an Arrow type.
pub fn duckdb_type(dt: &DataType) -> String {
    match dt {
        DataType::Null => "\"NULL\"".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INTEGER".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "UTINYINT".into(),
        DataType::UInt16 => "USMALLINT".into(),
        DataType::UInt32 => "UINTEGER".into(),
        DataType::UInt64 => "UBIGINT".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) => {
            format!("DECIMAL({p},{s})")
        }
        DataType::Decimal256(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "BLOB".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Interval(_) | DataType::Duration(_) => "INTERVAL".into(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _) => format!("{}[]", duckdb_field_type(f)),
        DataType::Struct(fields) => {
            let inner: Vec<String> = fields
                .iter()
                .map(|f| format!("\"{}\" {}", f.name(), duckdb_field_type(f)))
                .collect();
            format!("STRUCT({})", inner.join(", "))
        }
        DataType::Map(f, _) => match f.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "MAP({}, {})",
                duckdb_field_type(&kv[0]),
                duckdb_field_type(&kv[1])
            ),
            _ => "MAP".into(),
        },
        DataType::Dictionary(_, v) => duckdb_type(v),
        other => other.to_string().to_uppercase(),
    }
}

/// Numeric precision/scale as DuckDB's information_schema reports them.
pub fn numeric_precision_scale(dt: &DataType) -> (Option<i32>, Option<i32>) {
    match dt {
        DataType::Int8 => (Some(8), Some(0)),
        DataType::Int16 => (Some(16), Some(0)),
        DataType::Int32 => (Some(32), Some(0)),
        DataType::Int64 => (Some(64), Some(0)),
        DataType::Float32 => (Some(24), Some(0)),
        DataType::Float64 => (Some(53), Some(0)),
        DataType::Decimal128(p, s) => (Some(*p as i32), Some(*s as i32)),
        _ => (None, None),
    }
}

/// Arrow field for a column declared in DDL with `sql_type` (DuckDB / Postgres spelling).
pub fn field_for_sql_type(name: &str, sql_type: &str, nullable: bool) -> Result<Field, ApiError> {
    let t = sql_type.trim().to_ascii_uppercase();
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    // DuckDB's lists, `VARCHAR[]`, `INTEGER[][]` (a model contract's DDL declares them).
    if let Some(element) = t.strip_suffix("[]") {
        let element = field_for_sql_type("element", element, true)?;
        if element.metadata().contains_key(SQL_TYPE_KEY) {
            return Err(ApiError::BadRequest(format!(
                "Not implemented Error: lists of {} are not supported",
                element.metadata()[SQL_TYPE_KEY]
            )));
        }
        return Ok(Field::new(
            name,
            DataType::List(Arc::new(element)),
            nullable,
        ));
    }
    let (dt, sql_meta): (DataType, Option<&str>) = match t.as_str() {
        "VARCHAR" | "TEXT" | "STRING" | "CHAR" | "BPCHAR" | "JSON" | "UUID" => {
            (DataType::Utf8, None)
        }
        s if s.starts_with("VARCHAR(")
            || s.starts_with("CHAR(")
            || s.starts_with("CHARACTER VARYING") =>
        {
            (DataType::Utf8, None)
        }
        "BIGINT" | "INT8" | "LONG" | "INT64" => (DataType::Int64, None),
        "INTEGER" | "INT" | "INT4" | "INT32" | "SIGNED" => (DataType::Int32, None),
        "SMALLINT" | "INT2" | "SHORT" | "INT16" => (DataType::Int16, None),
        "TINYINT" | "INT1" => (DataType::Int8, None),
        "HUGEINT" | "UBIGINT" => (DataType::Decimal128(38, 0), None),
        "UINTEGER" => (DataType::Int64, None),
        "USMALLINT" => (DataType::Int32, None),
        "UTINYINT" => (DataType::Int16, None),
        "DOUBLE" | "FLOAT8" | "DOUBLE PRECISION" | "FLOAT64" => (DataType::Float64, None),
        "FLOAT" | "REAL" | "FLOAT4" | "FLOAT32" => (DataType::Float32, None),
        "BOOLEAN" | "BOOL" | "LOGICAL" => (DataType::Boolean, None),
        "DATE" => (DataType::Date32, None),
        "TIMESTAMP WITH TIME ZONE" | "TIMESTAMPTZ" => (
            DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC"))),
            None,
        ),
        "TIMESTAMP" | "TIMESTAMP WITHOUT TIME ZONE" | "DATETIME" => {
            (DataType::Timestamp(TimeUnit::Microsecond, None), None)
        }
        "TIME" | "TIME WITHOUT TIME ZONE" => (DataType::Utf8, Some("TIME")),
        "BLOB" | "BYTEA" | "BINARY" | "VARBINARY" => (DataType::Binary, None),
        "DECIMAL" | "NUMERIC" => (DataType::Decimal128(18, 3), None),
        s if s.starts_with("DECIMAL(") || s.starts_with("NUMERIC(") => {
            let inner = s
                .split_once('(')
                .and_then(|(_, r)| r.strip_suffix(')'))
                .unwrap_or("");
            let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>());
            let p = parts.next().and_then(|r| r.ok());
            let sc = parts.next().and_then(|r| r.ok()).unwrap_or(0);
            match p {
                Some(p) if (1..=38).contains(&p) && sc <= p => {
                    (DataType::Decimal128(p, sc as i8), None)
                }
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "Parser Error: invalid decimal type {sql_type}"
                    )));
                }
            }
        }
        _ => {
            return Err(ApiError::BadRequest(format!(
                "Catalog Error: Type with name {sql_type} does not exist!"
            )));
        }
    };
    let mut field = Field::new(name, dt, nullable);
    if let Some(meta) = sql_meta {
        field = field.with_metadata(HashMap::from([(
            SQL_TYPE_KEY.to_string(),
            meta.to_string(),
        )]));
    }
    Ok(field)
}

/// Whether changing a column from `from` to `to` never loses information.
pub fn is_widening(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to {
        return true;
    }
    match (from, to) {
        (Int8, Int16 | Int32 | Int64 | Float64) => true,
        (Int16, Int32 | Int64 | Float64) => true,
        (Int32, Int64 | Float64) => true,
        (Float32, Float64) => true,
        (Date32, Timestamp(_, None)) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            s2 >= s1 && (*p2 as i16 - *s2 as i16) >= (*p1 as i16 - *s1 as i16)
        }
        _ => false,
    }
}

/// The type a new table stores for a source type: Delta has no unsigned integers, no
/// nanosecond timestamps, no view types and no TIME, so those are mapped onto types that
/// hold every value.
pub fn storable_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Null | DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary | DataType::FixedSizeBinary(_) => {
            DataType::Binary
        }
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::UInt64 => DataType::Decimal128(20, 0),
        DataType::Float16 => DataType::Float32,
        DataType::Date64 => DataType::Date32,
        DataType::Timestamp(_, tz) => {
            DataType::Timestamp(TimeUnit::Microsecond, tz.as_ref().map(|_| Arc::from("UTC")))
        }
        DataType::Time32(_) | DataType::Time64(_) => DataType::Utf8,
        DataType::Dictionary(_, value) => storable_type(value),
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) => {
            DataType::List(Arc::new(storable_field(f)))
        }
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| storable_field(f)).collect())
        }
        other => other.clone(),
    }
}

fn storable_field(f: &Field) -> Field {
    let mut field = Field::new(f.name(), storable_type(f.data_type()), true);
    if matches!(f.data_type(), DataType::Time32(_) | DataType::Time64(_)) {
        field = field.with_metadata(HashMap::from([(
            SQL_TYPE_KEY.to_string(),
            "TIME".to_string(),
        )]));
    }
    field
}

/// Schema of a table created from a file: storable types, every column nullable (later
/// files may omit columns).
pub fn storable_schema(schema: &Schema) -> Schema {
    Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| storable_field(f))
            .collect::<Vec<_>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_types_round_trip_to_duckdb_names() {
        for t in [
            "BIGINT",
            "VARCHAR",
            "DOUBLE",
            "BOOLEAN",
            "DECIMAL(20,0)",
            "DECIMAL(38,9)",
            "TIMESTAMP WITH TIME ZONE",
            "TIMESTAMP",
            "DATE",
            "BLOB",
            "TIME",
            "INTEGER",
        ] {
            let f = field_for_sql_type("c", t, true).expect(t);
            assert_eq!(duckdb_field_type(&f), t);
        }
        assert!(field_for_sql_type("c", "NOPE", true).is_err());
        assert!(is_widening(&DataType::Int32, &DataType::Int64));
        assert!(!is_widening(&DataType::Int64, &DataType::Int32));
        assert!(is_widening(
            &DataType::Decimal128(10, 2),
            &DataType::Decimal128(12, 2)
        ));
    }
}
