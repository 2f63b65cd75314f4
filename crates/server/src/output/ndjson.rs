//! JSON rendering of Arrow values for the NDJSON result protocol: one JSON value per line,
//! timestamps as ISO-8601, 64-bit integers as numbers, U+2028/2029/0085 escaped.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, DecimalType, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, TimeUnit, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use base64::Engine;
use chrono::{DateTime, NaiveDateTime, SecondsFormat, Timelike};

use crate::sql::text_casts::{Nested, interval_at, interval_text, item_range};

/// Append `s` as a JSON string literal; line separators that some JSON-in-JS parsers treat
/// as newlines are escaped too.
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0085}' => out.push_str("\\u0085"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Serialize a JSON value on one line with the extra escapes.
pub fn json_line(value: &serde_json::Value) -> String {
    let s = value.to_string();
    let mut line = escape_separators(&s);
    line.push('\n');
    line
}

/// Escape U+2028/U+2029/U+0085 in already-serialized JSON (they can only occur inside
/// strings, where `\uXXXX` is equivalent).
pub fn escape_separators(s: &str) -> String {
    if !s.contains(['\u{0085}', '\u{2028}', '\u{2029}']) {
        return s.to_string();
    }
    s.replace('\u{0085}', "\\u0085")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn ts_to_string(value: i64, unit: TimeUnit, tz: bool) -> Option<String> {
    let (secs, nanos) = match unit {
        TimeUnit::Second => (value, 0),
        TimeUnit::Millisecond => (value.div_euclid(1_000), value.rem_euclid(1_000) * 1_000_000),
        TimeUnit::Microsecond => (
            value.div_euclid(1_000_000),
            value.rem_euclid(1_000_000) * 1_000,
        ),
        TimeUnit::Nanosecond => (
            value.div_euclid(1_000_000_000),
            value.rem_euclid(1_000_000_000),
        ),
    };
    let dt = DateTime::from_timestamp(secs, nanos as u32)?;
    if tz {
        // `+00:00`, never `Z`, and micro-second precision: what Python's fromisoformat reads.
        Some(
            dt.to_rfc3339_opts(SecondsFormat::Micros, false)
                .replace(".000000+", "+"),
        )
    } else {
        Some(naive_iso(dt.naive_utc()))
    }
}

fn naive_iso(dt: NaiveDateTime) -> String {
    if dt.nanosecond() == 0 {
        dt.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        dt.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    }
}

/// Renders the rows of a batch column by column.
pub struct RowWriter<'a> {
    columns: Vec<ValueWriter<'a>>,
}

/// How the values of one array are written: scalars directly, nested values as JSON
/// arrays and objects (as DuckDB's `to_json` writes them, a map's keys as strings)
/// through the tree of their children, built once per batch.
type ValueWriter<'a> = Nested<'a, Leaf<'a>>;

/// A leaf array, and the formatter of the types without a JSON form of their own.
struct Leaf<'a> {
    array: &'a ArrayRef,
    fallback: Option<ArrayFormatter<'a>>,
}

impl<'a> RowWriter<'a> {
    /// Prepare writers for a batch.
    pub fn new(batch: &'a RecordBatch, options: &'a FormatOptions<'a>) -> Self {
        let columns = batch
            .columns()
            .iter()
            .map(|array| ValueWriter::of(array, options))
            .collect();
        Self { columns }
    }

    /// Append row `row` as a JSON array.
    pub fn push_array_row(&self, out: &mut String, row: usize) {
        out.push('[');
        for (i, col) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            col.push_value(out, row);
        }
        out.push_str("]\n");
    }

    /// Append row `row` as a JSON object keyed by `names`.
    pub fn push_object_row(&self, out: &mut String, names: &[String], row: usize) {
        out.push('{');
        for (i, col) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, &names[i]);
            out.push(':');
            col.push_value(out, row);
        }
        out.push_str("}\n");
    }
}

impl<'a> ValueWriter<'a> {
    fn of(array: &'a ArrayRef, options: &'a FormatOptions<'a>) -> Self {
        let leaf = &mut |array: &'a ArrayRef| {
            Ok::<_, std::convert::Infallible>(Leaf {
                array,
                fallback: needs_fallback(array.data_type())
                    .then(|| ArrayFormatter::try_new(array.as_ref(), options).ok())
                    .flatten(),
            })
        };
        let Ok(tree) = Nested::new(array, leaf);
        tree
    }

    fn push_value(&self, out: &mut String, row: usize) {
        match self {
            Self::Leaf(Leaf { array, fallback }) => push_scalar(out, array, fallback.as_ref(), row),
            Self::List { array, items } => {
                if array.is_null(row) {
                    return out.push_str("null");
                }
                out.push('[');
                for (i, item) in item_range(array.as_ref(), row).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    items.push_value(out, item);
                }
                out.push(']');
            }
            Self::Struct {
                array,
                names,
                fields,
            } => {
                if array.is_null(row) {
                    return out.push_str("null");
                }
                out.push('{');
                for (i, (name, field)) in names.iter().zip(fields).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_json_str(out, name);
                    out.push(':');
                    field.push_value(out, row);
                }
                out.push('}');
            }
            Self::Map {
                array,
                keys,
                values,
            } => {
                if array.is_null(row) {
                    return out.push_str("null");
                }
                out.push('{');
                let mut key = String::new();
                for (i, item) in item_range(array.as_ref(), row).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    key.clear();
                    keys.push_value(&mut key, item);
                    if key.starts_with('"') {
                        out.push_str(&key);
                    } else {
                        push_json_str(out, &key);
                    }
                    out.push(':');
                    values.push_value(out, item);
                }
                out.push('}');
            }
        }
    }
}

fn needs_fallback(dt: &DataType) -> bool {
    !matches!(
        dt,
        DataType::Null
            | DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Interval(_)
            | DataType::Duration(_)
    )
}

fn push_float(out: &mut String, v: f64) {
    if v.is_finite() {
        out.push_str(
            &serde_json::Number::from_f64(v).map_or_else(|| "null".into(), |n| n.to_string()),
        );
    } else {
        out.push_str("null");
    }
}

/// One value of a scalar type; `fallback` formats the types without a JSON form of their own.
fn push_scalar(out: &mut String, a: &ArrayRef, fallback: Option<&ArrayFormatter<'_>>, row: usize) {
    if a.is_null(row) {
        out.push_str("null");
        return;
    }
    use std::fmt::Write;
    match a.data_type() {
        DataType::Null => out.push_str("null"),
        DataType::Boolean => out.push_str(if a.as_boolean().value(row) {
            "true"
        } else {
            "false"
        }),
        DataType::Int8 => {
            let _ = write!(out, "{}", a.as_primitive::<Int8Type>().value(row));
        }
        DataType::Int16 => {
            let _ = write!(out, "{}", a.as_primitive::<Int16Type>().value(row));
        }
        DataType::Int32 => {
            let _ = write!(out, "{}", a.as_primitive::<Int32Type>().value(row));
        }
        DataType::Int64 => {
            let _ = write!(out, "{}", a.as_primitive::<Int64Type>().value(row));
        }
        DataType::UInt8 => {
            let _ = write!(out, "{}", a.as_primitive::<UInt8Type>().value(row));
        }
        DataType::UInt16 => {
            let _ = write!(out, "{}", a.as_primitive::<UInt16Type>().value(row));
        }
        DataType::UInt32 => {
            let _ = write!(out, "{}", a.as_primitive::<UInt32Type>().value(row));
        }
        DataType::UInt64 => {
            let _ = write!(out, "{}", a.as_primitive::<UInt64Type>().value(row));
        }
        DataType::Float32 => push_float(out, a.as_primitive::<Float32Type>().value(row) as f64),
        DataType::Float64 => push_float(out, a.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => push_json_str(out, a.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => push_json_str(out, a.as_string::<i64>().value(row)),
        DataType::Utf8View => push_json_str(out, a.as_string_view().value(row)),
        DataType::Binary => push_b64(out, a.as_binary::<i32>().value(row)),
        DataType::LargeBinary => push_b64(out, a.as_binary::<i64>().value(row)),
        DataType::BinaryView => push_b64(out, a.as_binary_view().value(row)),
        DataType::Date32 => {
            let days = a.as_primitive::<Date32Type>().value(row);
            match Date32Type::to_naive_date_opt(days) {
                Some(d) => push_json_str(out, &d.format("%Y-%m-%d").to_string()),
                None => out.push_str("null"),
            }
        }
        DataType::Timestamp(unit, tz) => {
            let v = timestamp_value(a, *unit, row);
            match ts_to_string(v, *unit, tz.is_some()) {
                Some(s) => push_json_str(out, &s),
                None => out.push_str("null"),
            }
        }
        DataType::Decimal128(_, scale) => {
            let v = a.as_primitive::<Decimal128Type>().value(row);
            // A JSON number with the exact decimal digits (no float rounding).
            out.push_str(&Decimal128Type::format_decimal(v, 38, *scale));
        }
        DataType::Interval(_) | DataType::Duration(_) => match interval_at(a.as_ref(), row) {
            Some((months, days, micros)) => {
                push_json_str(out, &interval_text(months, days, micros));
            }
            None => out.push_str("null"),
        },
        _ => match fallback {
            Some(f) => push_json_str(out, &f.value(row).to_string()),
            None => out.push_str("null"),
        },
    }
}

fn timestamp_value(a: &ArrayRef, unit: TimeUnit, row: usize) -> i64 {
    use arrow::datatypes::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    match unit {
        TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(row),
        TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(row),
        TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(row),
    }
}

fn push_b64(out: &mut String, bytes: &[u8]) {
    push_json_str(
        out,
        &base64::engine::general_purpose::STANDARD.encode(bytes),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_escaped() {
        let mut out = String::new();
        push_json_str(&mut out, "a\u{2028}b\u{2029}c\u{0085}\"");
        assert_eq!(out, "\"a\\u2028b\\u2029c\\u0085\\\"\"");
    }

    #[test]
    fn nested_values_are_json() {
        use arrow::array::{
            Int32Builder, ListBuilder, MapBuilder, StringArray, StringBuilder, StructArray,
        };
        use arrow::datatypes::Field;
        use std::sync::Arc;
        let mut lists = ListBuilder::new(Int32Builder::new());
        lists.append_value([Some(1), None, Some(3)]);
        lists.append_null();
        lists.append_value([]);
        let mut maps = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
        for (k, v) in [(1, "a"), (2, "b")] {
            maps.keys().append_value(k);
            maps.values().append_value(v);
        }
        maps.append(true).unwrap();
        maps.append(false).unwrap();
        maps.append(true).unwrap();
        let lists: ArrayRef = Arc::new(lists.finish());
        let structs: ArrayRef = Arc::new(StructArray::from(vec![
            (
                Arc::new(Field::new("s", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("x\""), None, Some("z")])) as ArrayRef,
            ),
            (
                Arc::new(Field::new_list(
                    "l",
                    Field::new_list_field(DataType::Int32, true),
                    true,
                )),
                lists.clone(),
            ),
        ]));
        let batch = RecordBatch::try_from_iter([
            ("l", lists),
            ("st", structs),
            ("m", Arc::new(maps.finish()) as ArrayRef),
        ])
        .unwrap();
        // A slice, so that offsets into the children are exercised.
        let batch = batch.slice(0, 3);
        let options = FormatOptions::default();
        let writer = RowWriter::new(&batch, &options);
        let mut out = String::new();
        for row in 0..3 {
            writer.push_array_row(&mut out, row);
        }
        assert_eq!(
            out,
            "[[1,null,3],{\"s\":\"x\\\"\",\"l\":[1,null,3]},{\"1\":\"a\",\"2\":\"b\"}]\n\
             [null,{\"s\":null,\"l\":null},null]\n\
             [[],{\"s\":\"z\",\"l\":[]},{}]\n"
        );
        let tail = batch.slice(1, 2);
        let writer = RowWriter::new(&tail, &options);
        let mut out = String::new();
        writer.push_array_row(&mut out, 1);
        assert_eq!(out, "[[],{\"s\":\"z\",\"l\":[]},{}]\n");
    }

    #[test]
    fn timestamps_parse_as_iso() {
        assert_eq!(
            ts_to_string(1_700_000_000_123_456, TimeUnit::Microsecond, true).as_deref(),
            Some("2023-11-14T22:13:20.123456+00:00")
        );
        assert_eq!(
            ts_to_string(1_700_000_000_000_000, TimeUnit::Microsecond, true).as_deref(),
            Some("2023-11-14T22:13:20+00:00")
        );
        assert_eq!(
            ts_to_string(1_700_000_000_000_000, TimeUnit::Microsecond, false).as_deref(),
            Some("2023-11-14T22:13:20")
        );
    }
}
