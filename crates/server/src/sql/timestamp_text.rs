//! Text DuckDB reads as a TIMESTAMP and Arrow's parser refuses: a time without seconds
//! (`'2024-01-01 10:00'`, `TIMESTAMP '2024-01-31 10:00'`, `ts > '2024-01-01 10:00'`) or
//! with a one-digit hour (`'2024-01-01 1:02:03'`). Arrow wants `HH:MM:SS` ("error
//! parsing time").
//!
//! An analyzer rule after type coercion ([`TimestampText`]), when every comparison's and
//! literal's cast is in place: each cast of text to a TIMESTAMP reads the text completed
//! to Arrow's form ([`complete`]): a constant is completed where it stands, any other
//! text through [`COMPLETE`], a marker that keeps the name of what it wraps. Text a
//! write assigns to a TIMESTAMP column outside a plan (a `MERGE`'s rows) is completed
//! the same way ([`complete_array`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;

/// The marker a column's text is completed through.
const COMPLETE: &str = "__deltalite_timestamp_text";

/// The rule; it goes after type coercion (`sql/mod.rs::analyzer_rules`).
#[derive(Debug, Default)]
pub(super) struct TimestampText;

impl AnalyzerRule for TimestampText {
    fn name(&self) -> &str {
        "timestamp_text"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        super::analyzer::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| completed(e, schema))
        })
    }
}

/// One cast of text to a TIMESTAMP, reading its text completed.
fn completed(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    Ok(match e {
        Expr::Cast(Cast { expr, field }) if to_timestamp(&expr, field.data_type(), schema)? => {
            Transformed::yes(Expr::Cast(Cast {
                expr: Box::new(complete_text(*expr)),
                field,
            }))
        }
        Expr::TryCast(TryCast { expr, field })
            if to_timestamp(&expr, field.data_type(), schema)? =>
        {
            Transformed::yes(Expr::TryCast(TryCast {
                expr: Box::new(complete_text(*expr)),
                field,
            }))
        }
        e => Transformed::no(e),
    })
}

/// Whether a cast of `text` to `to` reads text as a TIMESTAMP (and not already through
/// the marker: a plan may be analyzed again).
fn to_timestamp(text: &Expr, to: &DataType, schema: &DFSchema) -> Result<bool> {
    if !matches!(to, DataType::Timestamp(..)) {
        return Ok(false);
    }
    if let Expr::ScalarFunction(ScalarFunction { func, .. }) = text
        && func.name() == COMPLETE
    {
        return Ok(false);
    }
    Ok(matches!(
        text.get_type(schema)?,
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
    ))
}

/// A constant completed where it stands; anything else through the marker.
fn complete_text(text: Expr) -> Expr {
    match text {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            metadata,
        ) => {
            let s = complete(&s).unwrap_or(s);
            Expr::Literal(ScalarValue::Utf8(Some(s)), metadata)
        }
        other => complete_udf().call(vec![other]),
    }
}

fn complete_udf() -> ScalarUDF {
    super::udf::marker(COMPLETE, complete_array, Some(DataType::Utf8), |arg| {
        arg.schema_name().to_string()
    })
}

/// Each text of `array` completed (as `Utf8`); also for text a write assigns to a
/// TIMESTAMP column (`sql/mod.rs::assign_types`).
pub(super) fn complete_array(array: &ArrayRef) -> Result<ArrayRef> {
    let text = arrow::compute::cast(array, &DataType::Utf8)?;
    let strings = text.as_string::<i32>();
    // Read once; a new array only from the first text that changes on.
    let Some(first) = strings
        .iter()
        .position(|s| s.is_some_and(|s| complete(s).is_some()))
    else {
        return Ok(text);
    };
    let completed: StringArray = strings
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.map(|s| match i < first {
                true => s.to_string(),
                false => complete(s).unwrap_or_else(|| s.to_string()),
            })
        })
        .collect();
    Ok(Arc::new(completed) as ArrayRef)
}

/// `text` in the form Arrow parses, if it is a date and a time DuckDB reads that Arrow
/// does not: the hour given two digits, `:00` seconds added after the minutes when the
/// time ends there (or a zone follows). `None` when nothing needs to change.
fn complete(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    // The date: digits, '-', digits, '-', digits.
    let mut at = 0;
    for part in 0..3 {
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        if at == start {
            return None;
        }
        if part < 2 {
            if bytes.get(at) != Some(&b'-') {
                return None;
            }
            at += 1;
        }
    }
    if !matches!(bytes.get(at), Some(b' ' | b'T')) {
        return None;
    }
    let hour = at + 1;
    let mut colon = hour;
    while colon < bytes.len() && bytes[colon].is_ascii_digit() {
        colon += 1;
    }
    let minutes = colon + 1;
    let digits = |from: usize| {
        bytes
            .get(from..from + 2)
            .map(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !(1..=2).contains(&(colon - hour))
        || bytes.get(colon) != Some(&b':')
        || digits(minutes) != Some(true)
    {
        return None;
    }
    let after = minutes + 2;
    let short_hour = colon - hour == 1;
    let no_seconds = matches!(bytes.get(after), None | Some(b'+' | b'-' | b'Z' | b' '));
    if !short_hour && !no_seconds {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 4);
    out.push_str(&text[..hour]);
    if short_hour {
        out.push('0');
    }
    out.push_str(&text[hour..after]);
    if no_seconds {
        out.push_str(":00");
    }
    out.push_str(&text[after..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::complete;

    #[test]
    fn times_are_completed_to_arrows_form() {
        for (text, expected) in [
            ("2024-01-01 10:00", Some("2024-01-01 10:00:00")),
            ("2024-01-01T10:00Z", Some("2024-01-01T10:00:00Z")),
            ("2024-01-01 10:00+02", Some("2024-01-01 10:00:00+02")),
            ("2024-01-01 10:00 UTC", Some("2024-01-01 10:00:00 UTC")),
            ("2024-01-01 1:02:03", Some("2024-01-01 01:02:03")),
            ("2024-1-5 1:02", Some("2024-1-5 01:02:00")),
            ("2024-01-01 10:00:00", None),
            ("2024-01-01 10:00:00.5+02", None),
            ("2024-01-01", None),
            ("2024-01-01 10", None),
            ("2024-01-01 10:0", None),
            ("10:00", None),
            ("", None),
        ] {
            assert_eq!(complete(text).as_deref(), expected, "{text}");
        }
    }
}
