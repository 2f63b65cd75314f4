//! DuckDB's `strptime(text, format)` and `try_strptime`: text parsed by a format (or the
//! first of a list of formats that parses it) into a `TIMESTAMP`; a format with a zone
//! (`%z`) gives a `TIMESTAMP WITH TIME ZONE`. DataFusion's `to_timestamp_micros` was used
//! before and failed over a column ("Function 'to_timestamp_micros' returned value of
//! type 'Timestamp(µs)' while … 'Timestamp(µs, "+00:00")' was promised").
//!
//! DuckDB's specifiers are read as chrono reads them by `sql/temporal.rs::chrono_format`.
//! Text that no format parses fails the statement with DuckDB's message
//! (`strptime`) or is NULL (`try_strptime`).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, TimestampMicrosecondBuilder};
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use chrono::format::{Parsed, StrftimeItems, parse};
use chrono::{NaiveDateTime, NaiveTime};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::SESSION_TIME_ZONE;
use super::temporal::chrono_format;

/// `strptime` and `try_strptime`.
pub(super) fn udfs() -> [ScalarUDF; 2] {
    [
        ScalarUDF::new_from_impl(Strptime::new(false)),
        ScalarUDF::new_from_impl(Strptime::new(true)),
    ]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Strptime {
    /// `try_strptime`: NULL where no format parses the text.
    lenient: bool,
    signature: Signature,
}

impl Strptime {
    fn new(lenient: bool) -> Self {
        Self {
            lenient,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

fn is_text(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

impl ScalarUDFImpl for Strptime {
    fn name(&self) -> &str {
        if self.lenient {
            "try_strptime"
        } else {
            "strptime"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        plan_err!("{} answers by return_field_from_args", self.name())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [text, format] = args.arg_fields else {
            return plan_err!("{} takes a text and a format", self.name());
        };
        let formats_ok = match format.data_type() {
            DataType::List(item) | DataType::LargeList(item) => is_text(item.data_type()),
            other => is_text(other),
        };
        if !is_text(text.data_type()) || !formats_ok {
            return plan_err!(
                "No function matches the given name and argument types '{}({}, {})'",
                self.name(),
                crate::types::duckdb_type(text.data_type()),
                crate::types::duckdb_type(format.data_type())
            );
        }
        // A zone in a constant format: the instant, as DuckDB's TIMESTAMPTZ.
        let zoned = match args.scalar_arguments.get(1).copied().flatten() {
            Some(format) => formats_of(format).iter().any(|f| f.contains("%z")),
            None => false,
        };
        let zone = zoned.then(|| Arc::from(SESSION_TIME_ZONE));
        Ok(Arc::new(Field::new(
            self.name(),
            DataType::Timestamp(TimeUnit::Microsecond, zone),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let [text, format] = args.args.as_slice() else {
            return plan_err!("{} takes a text and a format", self.name());
        };
        let text = arrow::compute::cast(&text.to_array(rows)?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let constant = match format {
            ColumnarValue::Scalar(s) => Some(formats_of(s)),
            ColumnarValue::Array(_) => None,
        };
        let format_array = match format {
            ColumnarValue::Array(a) => Some(a.clone()),
            ColumnarValue::Scalar(_) => None,
        };
        let mut translated: HashMap<String, String> = HashMap::new();
        let mut out = TimestampMicrosecondBuilder::with_capacity(rows);
        for row in 0..rows {
            let formats = match (&constant, &format_array) {
                (Some(formats), _) => formats.clone(),
                (None, Some(a)) => formats_of(&ScalarValue::try_from_array(a, row)?),
                (None, None) => Vec::new(),
            };
            if text.is_null(row) || formats.is_empty() {
                out.append_null();
                continue;
            }
            let value = text.value(row);
            let parsed = formats.iter().find_map(|f| {
                let chrono = translated
                    .entry(f.clone())
                    .or_insert_with(|| chrono_format(f, true));
                parse_one(value, chrono)
            });
            match parsed {
                Some(at) => out.append_value(at.and_utc().timestamp_micros()),
                None if self.lenient => out.append_null(),
                None => {
                    return Err(DataFusionError::Execution(format!(
                        "Invalid Input Error: Could not parse string \"{value}\" according to \
                         format specifier \"{}\"",
                        formats.join("\", \"")
                    )));
                }
            }
        }
        let zone = match args.return_field.data_type() {
            DataType::Timestamp(_, zone) => zone.clone(),
            _ => None,
        };
        let array: ArrayRef = Arc::new(out.finish().with_timezone_opt(zone));
        Ok(ColumnarValue::Array(array))
    }
}

/// The formats a format argument holds: one text, or a list of them.
fn formats_of(value: &ScalarValue) -> Vec<String> {
    match value {
        ScalarValue::Utf8(Some(f))
        | ScalarValue::LargeUtf8(Some(f))
        | ScalarValue::Utf8View(Some(f)) => {
            vec![f.clone()]
        }
        ScalarValue::List(list) if !list.is_empty() => {
            let items = list.value(0);
            match arrow::compute::cast(&items, &DataType::Utf8) {
                Ok(items) => items
                    .as_string::<i32>()
                    .iter()
                    .flatten()
                    .map(str::to_string)
                    .collect(),
                Err(_) => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// `text` read by the chrono format `format`: a date alone is its midnight; a zone makes
/// it the instant's UTC time.
fn parse_one(text: &str, format: &str) -> Option<NaiveDateTime> {
    let mut parsed = Parsed::new();
    parse(&mut parsed, text, StrftimeItems::new(format)).ok()?;
    if parsed.offset().is_some() {
        return parsed.to_datetime().ok().map(|at| at.naive_utc());
    }
    let date = parsed.to_naive_date().ok()?;
    let time = match parsed.hour_div_12() {
        Some(_) => parsed.to_naive_time().ok()?,
        None => NaiveTime::MIN,
    };
    Some(date.and_time(time))
}

#[cfg(test)]
mod tests {
    use super::parse_one;

    #[test]
    fn dates_times_fractions_and_zones() {
        let at = |text: &str, format: &str| parse_one(text, format).map(|t| t.to_string());
        assert_eq!(
            at("2024-01-05", "%Y-%m-%d").as_deref(),
            Some("2024-01-05 00:00:00")
        );
        assert_eq!(
            at("05/01/2024 13:14:15.25", "%d/%m/%Y %H:%M:%S%.f").as_deref(),
            Some("2024-01-05 13:14:15.250")
        );
        assert_eq!(
            at("2024-01-01 10:00:00+02:00", "%Y-%m-%d %H:%M:%S%z").as_deref(),
            Some("2024-01-01 08:00:00")
        );
        assert_eq!(at("2024-01-01 10", "%Y-%m-%d"), None);
        assert_eq!(at("x", "%Y-%m-%d"), None);
    }
}
