//! DuckDB's date arithmetic that DataFusion lacks, as dbt-duckdb's cross-database macros
//! (which dbt-altertable renders) write it:
//!
//! - `date_diff(part, a, b)` (also `datediff`): how many `part` boundaries lie between
//!   `a` and `b` (`date_diff('day', '… 23:00', 'next day 01:00')` is 1); a week is 7 of
//!   those days, truncated. dbt's `datediff` macro and everything built on it (date
//!   spines, `get_intervals_between`).
//! - `date_sub(part, a, b)` (also `datesub`): how many complete `part`s lie between `a`
//!   and `b` (`date_sub('month', '2024-01-15 10:00', '2024-02-15 09:59')` is 0). Months
//!   and the parts made of them count as DuckDB's age does, a start past the end's day
//!   of a month whose last day the end is taken as that day (`2024-01-31` to
//!   `2024-02-29` is a month); shorter parts are the microseconds between, divided.
//! - `n * INTERVAL '…'` (either order): dbt's `dateadd` macro writes
//!   `d + cast(n as bigint) * interval 1 day`. DataFusion types no product of a number
//!   and an interval, so `sql/normalize.rs` turns the product of an interval literal into
//!   `__deltalite_interval_times(interval, n)`.
//! - DuckDB's `strftime`/`strptime` format specifiers where chrono's (which DataFusion's
//!   `to_char` and `to_timestamp` read) mean otherwise: `%f` is microseconds (chrono:
//!   nanoseconds), `%g` milliseconds, `%n` nanoseconds, `%c`/`%x`/`%X` ISO forms
//!   (chrono: the C locale's), [`chrono_format`].
//! - `age(a, b)`: the interval from `b` to `a` in years, months, days and a time of
//!   day, as DuckDB (and PostgreSQL) count it: each field's difference, a negative one
//!   borrowed from the next larger (a day from the earlier date's month), negated when
//!   `a` is earlier ([`age`]); `age(a)` is from `a` to today's midnight
//!   (`sql/normalize.rs`'s composites).
//! - A clock in an interval literal (`INTERVAL '1 day 04:05:06.789'`, `'-02:00'`), which
//!   Arrow's parser refuses: spelled out as hours, minutes and seconds
//!   ([`interval_clock`]).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, IntervalMonthDayNanoArray};
use arrow::datatypes::{
    DataType, Int64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, TimeUnit,
    TimestampMicrosecondType,
};
use chrono::{DateTime, Datelike, Timelike};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, Value};

/// `interval * n` (or `n * interval`) as DataFusion plans it: `INTERVAL_TIMES(interval, n)`.
pub(super) const INTERVAL_TIMES: &str = "__deltalite_interval_times";

/// A DuckDB `strftime` (or, `parsing`, `strptime`) format as chrono reads it. Parsing,
/// a fraction after a dot is chrono's `%.f`, which takes `.25` as 250 ms, as DuckDB's
/// `%f` does.
pub(super) fn chrono_format(duckdb: &str, parsing: bool) -> String {
    let mut out = String::with_capacity(duckdb.len() + 8);
    let mut chars = duckdb.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            out.push('%');
            break;
        };
        if spec == '-' {
            // A flag (`%-d`): chrono's is the same.
            out.push_str("%-");
            if let Some(n) = chars.next() {
                out.push(n);
            }
            continue;
        }
        // Parsing, chrono's `%.f` takes a dot and any number of digits; its `%.6f` wants
        // all six.
        let fraction = |digits: &str| {
            if parsing && out.ends_with('.') {
                "%.f".to_string()
            } else {
                format!("%{digits}f")
            }
        };
        let mapped = match spec {
            'f' => fraction("6"),
            'g' => fraction("3"),
            'n' => fraction("9"),
            'c' => "%Y-%m-%d %H:%M:%S".to_string(),
            'x' => "%Y-%m-%d".to_string(),
            'X' => "%H:%M:%S".to_string(),
            other => format!("%{other}"),
        };
        if mapped.starts_with("%.") {
            out.pop();
        }
        out.push_str(&mapped);
    }
    out
}

/// DuckDB's `INTERVAL 1 DAY` (a number, not a string) as `INTERVAL '1' DAY`: DataFusion
/// reads the number form in expressions but not as a window frame's bound
/// (`RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW`).
pub(super) fn interval_number(e: &mut SqlExpr) {
    if let SqlExpr::Interval(interval) = e
        && let SqlExpr::Value(v) = interval.value.as_mut()
        && let Value::Number(n, _) = &v.value
    {
        v.value = Value::SingleQuotedString(n.clone());
    }
}

/// The clock parts (`[-]H:MM[:SS[.f]]`) of an `INTERVAL '…'` literal without fields,
/// spelled out as `H hours MM minutes SS.f seconds`, each with the clock's sign.
pub(super) fn interval_clock(e: &mut SqlExpr) {
    let SqlExpr::Interval(interval) = e else {
        return;
    };
    if interval.leading_field.is_some() || interval.last_field.is_some() {
        return;
    }
    let SqlExpr::Value(v) = interval.value.as_mut() else {
        return;
    };
    let Value::SingleQuotedString(text) = &mut v.value else {
        return;
    };
    if !text.contains(':') {
        return;
    }
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| clock(w).unwrap_or_else(|| w.to_string()))
        .collect();
    *text = words.join(" ");
}

fn clock(word: &str) -> Option<String> {
    let (sign, rest) = match word.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", word.strip_prefix('+').unwrap_or(word)),
    };
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, "0"));
    if !(digits(hours) && digits(minutes) && digits(whole) && digits(fraction)) {
        return None;
    }
    Some(format!(
        "{sign}{hours} hours {sign}{minutes} minutes {sign}{seconds} seconds"
    ))
}

/// The functions this module adds to a session.
pub(super) fn udfs() -> [ScalarUDF; 4] {
    [
        ScalarUDF::new_from_impl(Age {
            signature: Signature::any(2, Volatility::Immutable),
        }),
        ScalarUDF::new_from_impl(IntervalTimes {
            signature: Signature::any(2, Volatility::Immutable),
        }),
        ScalarUDF::new_from_impl(DateDiff {
            signature: Signature::any(3, Volatility::Immutable),
            aliases: vec!["datediff".to_string()],
            counts: Counts::Boundaries,
        }),
        ScalarUDF::new_from_impl(DateDiff {
            signature: Signature::any(3, Volatility::Immutable),
            aliases: vec!["datesub".to_string()],
            counts: Counts::Complete,
        }),
    ]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalTimes {
    signature: Signature,
}

impl ScalarUDFImpl for IntervalTimes {
    fn name(&self) -> &str {
        INTERVAL_TIMES
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [DataType::Interval(_), n] if n.is_numeric() || n.is_null() => Ok(DataType::Interval(
                arrow::datatypes::IntervalUnit::MonthDayNano,
            )),
            [_, n] => plan_err!("an INTERVAL can only be multiplied by a number, not {n}"),
            _ => plan_err!("{INTERVAL_TIMES} takes an interval and an integer"),
        }
    }
    fn schema_name(&self, args: &[datafusion::logical_expr::Expr]) -> Result<String> {
        Ok(match args {
            [interval, n] => format!("{} * {}", n.schema_name(), interval.schema_name()),
            _ => INTERVAL_TIMES.to_string(),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [interval, n] = arrays.as_slice() else {
            return exec_err!("{INTERVAL_TIMES} takes two arguments");
        };
        let interval = arrow::compute::cast(
            interval,
            &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
        )?;
        let overflow = || {
            datafusion::error::DataFusionError::Execution(
                "Out of Range Error: interval multiplication overflows".to_string(),
            )
        };
        let fractional = matches!(
            n.data_type(),
            DataType::Float16
                | DataType::Float32
                | DataType::Float64
                | DataType::Decimal128(_, 1..)
                | DataType::Decimal256(_, 1..)
        );
        let interval = interval.as_primitive::<IntervalMonthDayNanoType>();
        let out = if fractional {
            let n = arrow::compute::cast(n, &DataType::Float64)?;
            interval
                .iter()
                .zip(n.as_primitive::<arrow::datatypes::Float64Type>().iter())
                .map(|(i, n)| match (i, n) {
                    (Some(i), Some(n)) => interval_scaled(i, n).map(Some).ok_or_else(overflow),
                    _ => Ok(None),
                })
                .collect::<Result<IntervalMonthDayNanoArray>>()?
        } else {
            let n = arrow::compute::cast(n, &DataType::Int64)?;
            interval
                .iter()
                .zip(n.as_primitive::<Int64Type>().iter())
                .map(|(i, n)| {
                    let (Some(i), Some(n)) = (i, n) else {
                        return Ok(None);
                    };
                    let times32 = |v: i32| {
                        i32::try_from(n)
                            .ok()
                            .and_then(|n| v.checked_mul(n))
                            .ok_or_else(overflow)
                    };
                    Ok(Some(IntervalMonthDayNano::new(
                        times32(i.months)?,
                        times32(i.days)?,
                        i.nanoseconds.checked_mul(n).ok_or_else(overflow)?,
                    )))
                })
                .collect::<Result<IntervalMonthDayNanoArray>>()?
        };
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `interval` times a fraction, as DuckDB scales one: each part scaled, the fraction of a
/// month carried into days as 30 days, the fraction of a day into the time as 24 hours,
/// the time to the microsecond. `None` when a part leaves its range.
fn interval_scaled(interval: IntervalMonthDayNano, n: f64) -> Option<IntervalMonthDayNano> {
    const NANOS_PER_DAY: f64 = 86_400e9;
    let months = f64::from(interval.months) * n;
    let days = f64::from(interval.days) * n + months.fract() * 30.0;
    let nanos = interval.nanoseconds as f64 * n + days.fract() * NANOS_PER_DAY;
    let micros = (nanos / 1e3).round();
    let whole = |v: f64, max: f64| (v.is_finite() && v.abs() <= max).then_some(v.trunc());
    Some(IntervalMonthDayNano::new(
        whole(months, f64::from(i32::MAX))? as i32,
        whole(days, f64::from(i32::MAX))? as i32,
        (whole(micros, 9.2e15)? as i64) * 1_000,
    ))
}

/// DuckDB's `age(a, b)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Age {
    signature: Signature,
}

impl ScalarUDFImpl for Age {
    fn name(&self) -> &str {
        "age"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [a, b] if timelike(a) && timelike(b) => Ok(DataType::Interval(
                arrow::datatypes::IntervalUnit::MonthDayNano,
            )),
            _ => plan_err!("age takes two dates or timestamps, not {args:?}"),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        super::udf::elementwise(&args.args, |arrays| {
            let [a, b] = arrays else {
                return exec_err!("age takes two arguments");
            };
            let micros = |a: &ArrayRef| {
                arrow::compute::cast(a, &DataType::Timestamp(TimeUnit::Microsecond, None))
            };
            let (a, b) = (micros(a)?, micros(b)?);
            let (a, b) = (
                a.as_primitive::<TimestampMicrosecondType>(),
                b.as_primitive::<TimestampMicrosecondType>(),
            );
            let out = a
                .iter()
                .zip(b.iter())
                .map(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => age(a, b).map(Some),
                    _ => Ok(None),
                })
                .collect::<Result<IntervalMonthDayNanoArray>>()?;
            Ok(Arc::new(out) as ArrayRef)
        })
    }
}

/// What `date_diff`, `date_sub` and `age` take: a date, a timestamp, or text of one.
fn timelike(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
    ) || t.is_null()
        || matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// The age from `b` to `a` (microseconds since the epoch), as DuckDB's `age` counts it.
fn age(a: i64, b: i64) -> Result<IntervalMonthDayNano> {
    let at = |micros: i64| {
        DateTime::from_timestamp_micros(micros)
            .map(|t| t.naive_utc())
            .ok_or_else(|| out_of_range(micros))
    };
    let (t1, t2) = (at(a)?, at(b)?);
    let flipped = a < b;
    let sign = if flipped { -1 } else { 1 };
    let clock = |t: chrono::NaiveDateTime| {
        i64::from(t.num_seconds_from_midnight()) * 1_000_000 + i64::from(t.nanosecond() / 1_000)
    };
    let mut years = sign * (i64::from(t1.year()) - i64::from(t2.year()));
    let mut months = sign * (i64::from(t1.month()) - i64::from(t2.month()));
    let mut days = sign * (i64::from(t1.day()) - i64::from(t2.day()));
    let mut micros = sign * (clock(t1) - clock(t2));
    if micros < 0 {
        micros += MICROS_PER_DAY;
        days -= 1;
    }
    // A day borrowed is one of the earlier date's month.
    let earlier = if flipped { t1 } else { t2 };
    let month_days = earlier
        .date()
        .with_day(1)
        .and_then(|first| first.checked_add_months(chrono::Months::new(1)))
        .and_then(|next| next.pred_opt())
        .map_or(31, |last| i64::from(last.day()));
    while days < 0 {
        days += month_days;
        months -= 1;
    }
    while months < 0 {
        months += 12;
        years -= 1;
    }
    let months = sign * (years * 12 + months);
    let (days, nanos) = (sign * days, sign * micros * 1_000);
    Ok(IntervalMonthDayNano::new(
        i32::try_from(months).map_err(|_| out_of_range(a))?,
        i32::try_from(days).map_err(|_| out_of_range(a))?,
        nanos,
    ))
}

/// `date_diff` or `date_sub`: what they count of a part between two times.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DateDiff {
    signature: Signature,
    aliases: Vec<String>,
    counts: Counts,
}

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Counts {
    /// `date_diff`: the part's boundaries crossed.
    Boundaries,
    /// `date_sub`: the complete parts.
    Complete,
}

impl ScalarUDFImpl for DateDiff {
    fn name(&self) -> &str {
        match self.counts {
            Counts::Boundaries => "date_diff",
            Counts::Complete => "date_sub",
        }
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [part, a, b]
                if matches!(
                    part,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ) && timelike(a)
                    && timelike(b) =>
            {
                Ok(DataType::Int64)
            }
            _ => plan_err!(
                "{} takes a part name and two dates or timestamps, not {args:?}",
                self.name()
            ),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [part, a, b] = arrays.as_slice() else {
            return exec_err!("{} takes three arguments", self.name());
        };
        let counts = self.counts;
        let part = arrow::compute::cast(part, &DataType::Utf8)?;
        let micros = |a: &ArrayRef| {
            arrow::compute::cast(a, &DataType::Timestamp(TimeUnit::Microsecond, None))
        };
        let (a, b) = (micros(a)?, micros(b)?);
        let (part, a, b) = (
            part.as_string::<i32>(),
            a.as_primitive::<TimestampMicrosecondType>(),
            b.as_primitive::<TimestampMicrosecondType>(),
        );
        let out = (0..a.len())
            .map(|i| {
                if part.is_null(i) || a.is_null(i) || b.is_null(i) {
                    return Ok(None);
                }
                let part = Part::named(part.value(i))?;
                match counts {
                    Counts::Boundaries => part.between(a.value(i), b.value(i)),
                    Counts::Complete => part.complete(a.value(i), b.value(i)),
                }
                .map(Some)
            })
            .collect::<Result<Int64Array>>()?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// A date part `date_diff` counts the boundaries of, `date_sub` the complete ones.
#[derive(Clone, Copy)]
enum Part {
    Millennium,
    Century,
    Decade,
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
    Microsecond,
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

impl Part {
    /// DuckDB's names for it (its specifiers and their plurals).
    fn named(name: &str) -> Result<Self> {
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "millennium" | "millennia" | "millenium" | "millenniums" => Self::Millennium,
            "century" | "centuries" | "cent" | "c" => Self::Century,
            "decade" | "decades" | "dec" | "decs" => Self::Decade,
            "year" | "years" | "y" | "yr" | "yrs" => Self::Year,
            "quarter" | "quarters" => Self::Quarter,
            "month" | "months" | "mon" | "mons" => Self::Month,
            "week" | "weeks" | "w" => Self::Week,
            "day" | "days" | "d" | "dayofmonth" => Self::Day,
            "hour" | "hours" | "h" | "hr" | "hrs" => Self::Hour,
            "minute" | "minutes" | "m" | "min" | "mins" => Self::Minute,
            "second" | "seconds" | "s" | "sec" | "secs" => Self::Second,
            "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => Self::Millisecond,
            "microsecond" | "microseconds" | "us" | "usec" | "usecs" => Self::Microsecond,
            other => {
                return exec_err!("Not implemented Error: date part \"{other}\" not recognized");
            }
        })
    }

    /// How many of this part's boundaries lie between `a` and `b` (microseconds since the
    /// epoch, UTC), negative when `b` is earlier.
    fn between(self, a: i64, b: i64) -> Result<i64> {
        let crossed = |part: Self| Ok(part.boundary(b)? - part.boundary(a)?);
        match self {
            // DuckDB counts whole 7s of the days between, not week boundaries.
            Self::Week => crossed(Self::Day).map(|days| days / 7),
            part => crossed(part),
        }
    }

    /// How many complete parts lie between `a` and `b` (microseconds since the epoch,
    /// UTC), negative when `b` is earlier; truncated toward zero, as DuckDB's `date_sub`.
    fn complete(self, a: i64, b: i64) -> Result<i64> {
        let months = || complete_months(a, b);
        let micros = |unit: i64| {
            b.checked_sub(a)
                .map(|d| d / unit)
                .ok_or_else(|| out_of_range(b))
        };
        match self {
            Self::Millennium => months().map(|m| m / 12_000),
            Self::Century => months().map(|m| m / 1_200),
            Self::Decade => months().map(|m| m / 120),
            Self::Year => months().map(|m| m / 12),
            Self::Quarter => months().map(|m| m / 3),
            Self::Month => months(),
            Self::Week => micros(7 * MICROS_PER_DAY),
            Self::Day => micros(MICROS_PER_DAY),
            Self::Hour => micros(3_600_000_000),
            Self::Minute => micros(60_000_000),
            Self::Second => micros(1_000_000),
            Self::Millisecond => micros(1_000),
            Self::Microsecond => micros(1),
        }
    }

    /// Which boundary of this part `micros` lies after.
    fn boundary(self, micros: i64) -> Result<i64> {
        let per = |unit: i64| Ok(micros.div_euclid(unit));
        let date = || {
            DateTime::from_timestamp_micros(micros)
                .map(|t| t.date_naive())
                .ok_or_else(|| out_of_range(micros))
        };
        let year = || date().map(|d| i64::from(d.year()));
        match self {
            Self::Millennium => year().map(|y| y.div_euclid(1000)),
            Self::Century => year().map(|y| y.div_euclid(100)),
            Self::Decade => year().map(|y| y.div_euclid(10)),
            Self::Year => year(),
            Self::Quarter => date().map(|d| i64::from(d.year()) * 4 + i64::from(d.month0() / 3)),
            Self::Month => date().map(|d| i64::from(d.year()) * 12 + i64::from(d.month0())),
            Self::Week | Self::Day => per(MICROS_PER_DAY),
            Self::Hour => per(3_600_000_000),
            Self::Minute => per(60_000_000),
            Self::Second => per(1_000_000),
            Self::Millisecond => per(1_000),
            Self::Microsecond => Ok(micros),
        }
    }
}

fn out_of_range(micros: i64) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::Execution(format!("timestamp {micros} out of range"))
}

/// The whole months from `a` to `b` (negative when `b` is earlier), as DuckDB's
/// `date_sub('month', …)` counts them: the months of the age between them, once a start
/// whose day of the month is past the end's last day is moved back to that day.
fn complete_months(a: i64, b: i64) -> Result<i64> {
    if b < a {
        return complete_months(b, a).map(|m| -m);
    }
    let at = |micros: i64| {
        DateTime::from_timestamp_micros(micros)
            .map(|t| t.naive_utc())
            .ok_or_else(|| out_of_range(micros))
    };
    let (start, end) = (at(a)?, at(b)?);
    let last_day = |d: chrono::NaiveDate| {
        d.with_day(1)
            .and_then(|first| first.checked_add_months(chrono::Months::new(1)))
            .and_then(|next| next.pred_opt())
            .map_or(31, |last| last.day())
    };
    let end_last = last_day(end.date());
    let start_day = if end.day() == end_last && start.day() > end_last {
        end_last
    } else {
        start.day()
    };
    let mut months = (i64::from(end.year()) - i64::from(start.year())) * 12
        + i64::from(end.month())
        - i64::from(start.month());
    if (end.day(), end.time()) < (start_day, start.time()) {
        months -= 1;
    }
    Ok(months)
}

#[cfg(test)]
mod tests {
    use super::chrono_format;

    #[test]
    fn duckdb_format_specifiers_as_chrono_reads_them() {
        assert_eq!(
            chrono_format("%H:%M:%S.%f|%g|%n|%c|%x|%X|%-d|%%f", false),
            "%H:%M:%S.%6f|%3f|%9f|%Y-%m-%d %H:%M:%S|%Y-%m-%d|%H:%M:%S|%-d|%%f"
        );
        assert_eq!(
            chrono_format("%Y-%m-%d %H:%M:%S.%f", true),
            "%Y-%m-%d %H:%M:%S%.f"
        );
        assert_eq!(chrono_format("%S.%g %d", true), "%S%.f %d");
    }
}
