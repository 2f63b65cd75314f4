//! Timestamps as text the way DuckDB writes them: `2024-01-15 10:30:00`, a fraction only
//! when there is one and without its trailing zeros (`…:00.12`), a zone as its offset
//! (`2024-01-15 10:30:00+00`). Arrow's cast writes ISO 8601 (`2024-01-15T10:30:00`,
//! `…Z`), so `CAST(ts AS VARCHAR)` and `'x' || ts` answered otherwise than DuckDB.
//!
//! An analyzer rule ([`DuckdbText`]) after type coercion, when every cast is in the plan
//! (also those `||` and `concat` need), puts [`TIMESTAMP_TEXT`] where a timestamp is cast
//! to text. The HTTP API's JSON rows keep their own format.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
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

/// The function a timestamp is written as text by.
const TIMESTAMP_TEXT: &str = "__deltalite_timestamp_text";

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

/// A cast of a timestamp to text, written by [`TIMESTAMP_TEXT`] (then cast to the text
/// type asked for, when that is not `Utf8`).
fn text_cast(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let written = |expr: Box<Expr>| Box::new(timestamp_text_udf().call(vec![*expr]));
    let to_text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    Ok(match e {
        Expr::Cast(Cast { expr, field })
            if to_text(field.data_type())
                && matches!(expr.get_type(schema)?, DataType::Timestamp(..)) =>
        {
            Transformed::yes(Expr::Cast(Cast {
                expr: written(expr),
                field,
            }))
        }
        Expr::TryCast(TryCast { expr, field })
            if to_text(field.data_type())
                && matches!(expr.get_type(schema)?, DataType::Timestamp(..)) =>
        {
            Transformed::yes(Expr::TryCast(TryCast {
                expr: written(expr),
                field,
            }))
        }
        other => Transformed::no(other),
    })
}

/// [`TIMESTAMP_TEXT`]: named as its argument, as the cast it replaces is.
fn timestamp_text_udf() -> ScalarUDF {
    super::udf::marker(
        TIMESTAMP_TEXT,
        timestamps_as_text,
        Some(DataType::Utf8),
        |arg| arg.schema_name().to_string(),
    )
}

/// Each timestamp of `array` as DuckDB writes it.
fn timestamps_as_text(array: &ArrayRef) -> Result<ArrayRef> {
    let DataType::Timestamp(unit, zone) = array.data_type() else {
        return exec_err!(
            "{TIMESTAMP_TEXT} takes a timestamp, not {}",
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

    use super::written;

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
