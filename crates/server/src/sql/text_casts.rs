//! Values as text the way DuckDB writes them, where Arrow's cast writes otherwise:
//!
//! - timestamps: `2024-01-15 10:30:00`, a fraction only when there is one and without its
//!   trailing zeros (`…:00.12`), a zone as its offset (`2024-01-15 10:30:00+00`). Arrow
//!   writes ISO 8601 (`2024-01-15T10:30:00`, `…Z`);
//! - intervals and durations: `1 year 2 months 3 days 04:05:06.789` ([`interval_text`]),
//!   where Arrow writes `1 days` and `1 days 0 hours 0 mins 0.000000 secs`;
//! - lists, structs and maps: `[1, NULL]`, `{'a': 1, 'b': x}`, `{k=v}`, a value quoted
//!   when its text holds a character that would make it ambiguous (`['a:b']`). Arrow
//!   writes a NULL item as nothing (`[1, ]`) and refuses structs and maps.
//!
//! An analyzer rule ([`DuckdbText`]) after type coercion, when every cast is in the plan
//! (also those `||` and `concat` need), puts [`DUCKDB_TEXT`] where such a value is cast
//! to text. The HTTP API's JSON rows keep their own format; its CSV writes nested values
//! with [`duckdb_text`].

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use arrow::datatypes::{
    DataType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Timelike};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, exec_err};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;

/// The function a value is written as text by.
const DUCKDB_TEXT: &str = "__deltalite_duckdb_text";

#[derive(Debug, Default)]
pub(super) struct DuckdbText;

impl AnalyzerRule for DuckdbText {
    fn name(&self) -> &str {
        "duckdb_text"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        super::analyzer::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| text_cast(e, schema))
        })
    }
}

/// A cast to text of a value Arrow writes otherwise than DuckDB, written by
/// [`DUCKDB_TEXT`] (then cast to the text type asked for, when that is not `Utf8`).
fn text_cast(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let written = |expr: Box<Expr>| Box::new(duckdb_text_udf().call(vec![*expr]));
    let to_text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    Ok(match e {
        Expr::Cast(Cast { expr, field })
            if to_text(field.data_type()) && written_otherwise(&expr.get_type(schema)?) =>
        {
            Transformed::yes(Expr::Cast(Cast {
                expr: written(expr),
                field,
            }))
        }
        Expr::TryCast(TryCast { expr, field })
            if to_text(field.data_type()) && written_otherwise(&expr.get_type(schema)?) =>
        {
            Transformed::yes(Expr::TryCast(TryCast {
                expr: written(expr),
                field,
            }))
        }
        other => Transformed::no(other),
    })
}

/// Whether Arrow writes values of `dt` as text otherwise than DuckDB.
pub fn written_otherwise(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Timestamp(..)
            | DataType::Interval(_)
            | DataType::Duration(_)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Struct(_)
            | DataType::Map(..)
    )
}

/// [`DUCKDB_TEXT`]: named as its argument, as the cast it replaces is.
fn duckdb_text_udf() -> ScalarUDF {
    super::udf::marker(DUCKDB_TEXT, duckdb_text, Some(DataType::Utf8), |arg| {
        arg.schema_name().to_string()
    })
}

/// Each value of `array` as DuckDB writes it as text (`Utf8`).
pub fn duckdb_text(array: &ArrayRef) -> Result<ArrayRef> {
    match array.data_type() {
        DataType::Timestamp(..) => timestamps_as_text(array),
        DataType::Interval(_) | DataType::Duration(_) => intervals_as_text(array),
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(..)
        | DataType::Struct(_)
        | DataType::Map(..) => {
            let writer = Nested::new(array, &mut |leaf| {
                Ok::<_, datafusion::error::DataFusionError>(
                    duckdb_text(leaf)?.as_string::<i32>().clone(),
                )
            })?;
            let mut out = StringBuilder::with_capacity(array.len(), array.len() * 8);
            let mut text = String::new();
            for row in 0..array.len() {
                if array.is_null(row) {
                    out.append_null();
                } else {
                    text.clear();
                    writer.push(&mut text, row, false);
                    out.append_value(&text);
                }
            }
            Ok(Arc::new(out.finish()))
        }
        _ => Ok(arrow::compute::cast(array, &DataType::Utf8)?),
    }
}

/// The positions in a list's (or map's) items of row `row`'s; empty for other arrays.
pub fn item_range(array: &dyn Array, row: usize) -> std::ops::Range<usize> {
    match array.data_type() {
        DataType::List(_) => {
            let o = array.as_list::<i32>().value_offsets();
            o[row] as usize..o[row + 1] as usize
        }
        DataType::LargeList(_) => {
            let o = array.as_list::<i64>().value_offsets();
            o[row] as usize..o[row + 1] as usize
        }
        DataType::FixedSizeList(..) => {
            let l = array.as_fixed_size_list();
            let start = l.value_offset(row) as usize;
            start..start + l.value_length() as usize
        }
        DataType::Map(..) => {
            let o = array.as_map().value_offsets();
            o[row] as usize..o[row + 1] as usize
        }
        _ => 0..0,
    }
}

/// A nested array as a tree: its lists, structs and maps down to what a writer keeps for
/// each leaf array (`L`), built once per array (JSON results and DuckDB's text walk it).
pub enum Nested<'a, L> {
    Leaf(L),
    /// A list of any layout: [`item_range`] gives the positions of a row's items.
    List {
        array: &'a ArrayRef,
        items: Box<Nested<'a, L>>,
    },
    Struct {
        array: &'a ArrayRef,
        names: Vec<&'a str>,
        fields: Vec<Nested<'a, L>>,
    },
    Map {
        array: &'a ArrayRef,
        keys: Box<Nested<'a, L>>,
        values: Box<Nested<'a, L>>,
    },
}

impl<'a, L> Nested<'a, L> {
    /// The tree of `array`, each leaf array made into an `L` by `leaf`.
    pub fn new<E>(
        array: &'a ArrayRef,
        leaf: &mut impl FnMut(&'a ArrayRef) -> Result<L, E>,
    ) -> Result<Self, E> {
        Ok(match array.data_type() {
            DataType::List(_) => Self::List {
                array,
                items: Box::new(Self::new(array.as_list::<i32>().values(), leaf)?),
            },
            DataType::LargeList(_) => Self::List {
                array,
                items: Box::new(Self::new(array.as_list::<i64>().values(), leaf)?),
            },
            DataType::FixedSizeList(..) => Self::List {
                array,
                items: Box::new(Self::new(array.as_fixed_size_list().values(), leaf)?),
            },
            DataType::Struct(fields) => Self::Struct {
                array,
                names: fields.iter().map(|f| f.name().as_str()).collect(),
                fields: array
                    .as_struct()
                    .columns()
                    .iter()
                    .map(|c| Self::new(c, leaf))
                    .collect::<Result<_, E>>()?,
            },
            DataType::Map(..) => {
                let entries = array.as_map().entries();
                Self::Map {
                    array,
                    keys: Box::new(Self::new(entries.column(0), leaf)?),
                    values: Box::new(Self::new(entries.column(1), leaf)?),
                }
            }
            _ => Self::Leaf(leaf(array)?),
        })
    }
}

impl Nested<'_, StringArray> {
    /// Row `row`'s text; an item's (`item`) quoted when its text would be ambiguous.
    fn push(&self, out: &mut String, row: usize, item: bool) {
        let null = match self {
            Self::Leaf(text) => text.is_null(row),
            Self::List { array, .. } | Self::Struct { array, .. } | Self::Map { array, .. } => {
                array.is_null(row)
            }
        };
        if null {
            return out.push_str("NULL");
        }
        match self {
            Self::Leaf(text) => {
                let text = text.value(row);
                if item && ambiguous(text) {
                    quote(out, text);
                } else {
                    out.push_str(text);
                }
            }
            Self::List { array, items } => {
                out.push('[');
                for (i, at) in item_range(array.as_ref(), row).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    items.push(out, at, true);
                }
                out.push(']');
            }
            Self::Struct { names, fields, .. } => {
                out.push('{');
                for (i, (name, field)) in names.iter().zip(fields).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    quote(out, name);
                    out.push_str(": ");
                    field.push(out, row, true);
                }
                out.push('}');
            }
            Self::Map {
                array,
                keys,
                values,
            } => {
                out.push('{');
                for (i, at) in item_range(array.as_ref(), row).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    keys.push(out, at, true);
                    out.push('=');
                    values.push(out, at, true);
                }
                out.push('}');
            }
        }
    }
}

/// Whether an item's text needs quotes to be read back as one value.
fn ambiguous(text: &str) -> bool {
    text.is_empty()
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
        || text.eq_ignore_ascii_case("null")
        || text.contains(['\'', '"', ',', '[', ']', '{', '}', ':', '=', '\\'])
}

fn quote(out: &mut String, text: &str) {
    out.push('\'');
    for c in text.chars() {
        if matches!(c, '\'' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
}

/// Each interval or duration of `array` as [`interval_text`] writes it.
fn intervals_as_text(array: &ArrayRef) -> Result<ArrayRef> {
    let out: StringArray = (0..array.len())
        .map(|row| interval_at(array, row).map(|(m, d, us)| interval_text(m, d, us)))
        .collect();
    Ok(Arc::new(out))
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Row `row` of an interval or duration array as months, days and microseconds (a
/// duration as whole days and the rest, as DuckDB's `ts - ts`); `None` when NULL.
pub fn interval_at(a: &dyn Array, row: usize) -> Option<(i64, i64, i64)> {
    use arrow::datatypes::{
        DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
        DurationSecondType, IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit,
        IntervalYearMonthType,
    };
    if a.is_null(row) {
        return None;
    }
    let days_and_rest = |micros: i64| (0, micros / MICROS_PER_DAY, micros % MICROS_PER_DAY);
    Some(match a.data_type() {
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = a.as_primitive::<IntervalMonthDayNanoType>().value(row);
            (v.months.into(), v.days.into(), v.nanoseconds / 1_000)
        }
        DataType::Interval(IntervalUnit::DayTime) => {
            let v = a.as_primitive::<IntervalDayTimeType>().value(row);
            (0, v.days.into(), i64::from(v.milliseconds) * 1_000)
        }
        DataType::Interval(IntervalUnit::YearMonth) => (
            a.as_primitive::<IntervalYearMonthType>().value(row).into(),
            0,
            0,
        ),
        DataType::Duration(TimeUnit::Second) => days_and_rest(
            a.as_primitive::<DurationSecondType>()
                .value(row)
                .saturating_mul(1_000_000),
        ),
        DataType::Duration(TimeUnit::Millisecond) => days_and_rest(
            a.as_primitive::<DurationMillisecondType>()
                .value(row)
                .saturating_mul(1_000),
        ),
        DataType::Duration(TimeUnit::Microsecond) => {
            days_and_rest(a.as_primitive::<DurationMicrosecondType>().value(row))
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            days_and_rest(a.as_primitive::<DurationNanosecondType>().value(row) / 1_000)
        }
        _ => return None,
    })
}

/// An interval as DuckDB writes it: `1 year 2 months 3 days 04:05:06.789`, `-1 day
/// -02:00:00`, `00:00:00` when empty.
pub fn interval_text(months: i64, days: i64, micros: i64) -> String {
    use std::fmt::Write;
    let mut parts = Vec::new();
    let mut unit = |n: i64, name: &str| {
        if n != 0 {
            let plural = if n.abs() == 1 { "" } else { "s" };
            parts.push(format!("{n} {name}{plural}"));
        }
    };
    unit(months / 12, "year");
    unit(months % 12, "month");
    unit(days, "day");
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 { "-" } else { "" };
        let m = micros.unsigned_abs();
        let mut time = format!(
            "{sign}{:02}:{:02}:{:02}",
            m / 3_600_000_000,
            m / 60_000_000 % 60,
            m / 1_000_000 % 60
        );
        let fraction = m % 1_000_000;
        if fraction != 0 {
            let _ = write!(time, ".{fraction:06}");
            time.truncate(time.trim_end_matches('0').len());
        }
        parts.push(time);
    }
    parts.join(" ")
}

/// Each timestamp of `array` as DuckDB writes it.
fn timestamps_as_text(array: &ArrayRef) -> Result<ArrayRef> {
    let DataType::Timestamp(unit, zone) = array.data_type() else {
        return exec_err!(
            "{DUCKDB_TEXT} takes a timestamp here, not {}",
            array.data_type()
        );
    };
    let zone: Option<Tz> = zone.as_deref().map(str::parse).transpose()?;
    let naive = |v: i64| -> Option<NaiveDateTime> {
        match unit {
            TimeUnit::Second => {
                arrow::array::temporal_conversions::as_datetime::<TimestampSecondType>(v)
            }
            TimeUnit::Millisecond => {
                arrow::array::temporal_conversions::as_datetime::<TimestampMillisecondType>(v)
            }
            TimeUnit::Microsecond => {
                arrow::array::temporal_conversions::as_datetime::<TimestampMicrosecondType>(v)
            }
            TimeUnit::Nanosecond => {
                arrow::array::temporal_conversions::as_datetime::<TimestampNanosecondType>(v)
            }
        }
    };
    let values = arrow::compute::cast(array, &DataType::Int64)?;
    let values = values.as_primitive::<arrow::datatypes::Int64Type>();
    let mut out = StringBuilder::with_capacity(array.len(), array.len() * 26);
    for v in values.iter() {
        let Some(utc) = v.and_then(naive) else {
            out.append_null();
            continue;
        };
        match &zone {
            None => out.append_value(written(&utc, None)),
            Some(zone) => {
                let local: DateTime<Tz> = zone.from_utc_datetime(&utc);
                let offset = local.offset().fix().local_minus_utc();
                out.append_value(written(&local.naive_local(), Some(offset)));
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

/// `2024-01-15 10:30:00[.fraction][+HH[:MM]]`.
fn written(t: &NaiveDateTime, offset_seconds: Option<i32>) -> String {
    let mut text = t.format("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = t.nanosecond() % 1_000_000_000;
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    if let Some(offset) = offset_seconds {
        let sign = if offset < 0 { '-' } else { '+' };
        let (hours, minutes) = (offset.abs() / 3600, offset.abs() % 3600 / 60);
        text.push_str(&format!("{sign}{hours:02}"));
        if minutes != 0 {
            text.push_str(&format!(":{minutes:02}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use std::sync::Arc;

    use arrow::array::{
        Array, ArrayRef, AsArray, Int32Builder, ListBuilder, StringArray, StructArray,
    };
    use arrow::datatypes::{DataType, Field};

    use super::{duckdb_text, interval_text, written};

    #[test]
    fn intervals_as_duckdb_writes_them() {
        let hour = 3_600_000_000;
        assert_eq!(interval_text(0, 1, 0), "1 day");
        assert_eq!(interval_text(0, 0, 36 * hour), "36:00:00");
        assert_eq!(interval_text(0, 0, 1_500_000), "00:00:01.5");
        assert_eq!(interval_text(0, 0, 1_000_123), "00:00:01.000123");
        assert_eq!(
            interval_text(14, 3, 4 * hour + 306_789_000),
            "1 year 2 months 3 days 04:05:06.789"
        );
        assert_eq!(interval_text(0, -1, -2 * hour), "-1 day -02:00:00");
        assert_eq!(interval_text(-14, 0, 0), "-1 year -2 months");
        assert_eq!(interval_text(0, 0, 0), "00:00:00");
    }

    #[test]
    fn nested_values_as_duckdb_writes_them() {
        let mut lists = ListBuilder::new(Int32Builder::new());
        lists.append_value([Some(1), None]);
        lists.append_null();
        let lists: ArrayRef = Arc::new(lists.finish());
        let structs: ArrayRef = Arc::new(StructArray::from(vec![
            (
                Arc::new(Field::new("a b", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("x y"), Some("it's: 1")])) as ArrayRef,
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
        let text = |a: &ArrayRef| {
            let t = duckdb_text(a).expect("written");
            let t = t.as_string::<i32>();
            (0..t.len())
                .map(|i| t.is_valid(i).then(|| t.value(i).to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(text(&lists), [Some("[1, NULL]".to_string()), None]);
        assert_eq!(
            text(&structs),
            [
                Some("{'a b': x y, 'l': [1, NULL]}".to_string()),
                Some("{'a b': 'it\\'s: 1', 'l': NULL}".to_string())
            ]
        );
    }

    #[test]
    fn as_duckdb_writes_them() {
        let at = |micros: u32| {
            NaiveDate::from_ymd_opt(2024, 1, 15)
                .and_then(|d| d.and_hms_micro_opt(10, 30, 0, micros))
                .expect("valid")
        };
        assert_eq!(written(&at(0), None), "2024-01-15 10:30:00");
        assert_eq!(written(&at(120_000), None), "2024-01-15 10:30:00.12");
        assert_eq!(written(&at(1), None), "2024-01-15 10:30:00.000001");
        assert_eq!(written(&at(0), Some(0)), "2024-01-15 10:30:00+00");
        assert_eq!(written(&at(0), Some(-5 * 3600)), "2024-01-15 10:30:00-05");
        assert_eq!(
            written(&at(0), Some(5 * 3600 + 1800)),
            "2024-01-15 10:30:00+05:30"
        );
    }
}
