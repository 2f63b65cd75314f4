//! DuckDB's `AT TIME ZONE` and `timezone(zone, value)`, which move a value between a
//! zone's wall clock and an instant:
//!
//! - a `TIMESTAMPTZ` (an instant) gives the `TIMESTAMP` a clock in `zone` shows then
//!   (`TIMESTAMPTZ '2024-01-15 10:30+00' AT TIME ZONE 'America/New_York'` is
//!   `2024-01-15 05:30:00`);
//! - a `TIMESTAMP` or `DATE` (a wall clock) gives the `TIMESTAMPTZ` at which a clock in
//!   `zone` shows it. A time a clock skips (the hour a daylight-saving change jumps) is
//!   read with the offset before the change, a time it shows twice with the later
//!   (standard) offset, as DuckDB's ICU does.
//!
//! DataFusion plans `AT TIME ZONE` as a cast to a timestamp in `zone`: the same instant
//! labelled with another zone, which every client shows converted back to UTC, so a
//! `TIMESTAMPTZ`'s local time was lost. `sql/normalize.rs` writes `x AT TIME ZONE z` as
//! `timezone(z, x)`.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone};
use datafusion::common::{DataFusionError, Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::udf::elementwise;

/// The function `AT TIME ZONE` is written as.
pub(super) const TIMEZONE: &str = "timezone";

/// The zone an instant (a `TIMESTAMPTZ`) is labelled with: the session's.
const SESSION_ZONE: &str = super::SESSION_TIME_ZONE;

pub(super) fn timezone_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(Timezone {
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Timezone {
    signature: Signature,
}

/// A wall clock's type (the value a `TIMESTAMP` or `DATE` argument is read as).
const WALL_CLOCK: DataType = DataType::Timestamp(TimeUnit::Microsecond, None);

impl ScalarUDFImpl for Timezone {
    fn name(&self) -> &str {
        TIMEZONE
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    /// The zone as text; an instant in microseconds in its own zone, anything else a wall
    /// clock in microseconds (a `DATE` its midnight). Other types are left for
    /// [`Self::return_type`] to refuse, whose error is the client's message as it is.
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let text = |t: &DataType| {
            matches!(
                t,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
            )
        };
        Ok(match args {
            [zone, value] => {
                let zone = if text(zone) {
                    DataType::Utf8
                } else {
                    zone.clone()
                };
                let value = match value {
                    DataType::Timestamp(_, Some(zone)) => {
                        DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::clone(zone)))
                    }
                    DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64 => {
                        WALL_CLOCK
                    }
                    other if text(other) => WALL_CLOCK,
                    other => other.clone(),
                };
                vec![zone, value]
            }
            other => other.to_vec(),
        })
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [
                DataType::Utf8,
                DataType::Timestamp(TimeUnit::Microsecond, zone),
            ] => Ok(match zone {
                Some(_) => WALL_CLOCK,
                None => DataType::Timestamp(TimeUnit::Microsecond, Some(SESSION_ZONE.into())),
            }),
            [DataType::Utf8, other] => {
                plan_err!("{TIMEZONE} takes a TIMESTAMP, TIMESTAMPTZ or DATE, not {other}")
            }
            [other, _] => plan_err!("{TIMEZONE}: a time zone is text, not {other}"),
            _ => plan_err!("{TIMEZONE} takes a time zone and a timestamp"),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        elementwise(&args.args, |arrays| {
            let [zones, values] = arrays else {
                return exec_err!("{TIMEZONE} takes a time zone and a timestamp");
            };
            let instants = matches!(values.data_type(), DataType::Timestamp(_, Some(_)));
            let zones = zones.as_string::<i32>();
            let values = values.as_primitive::<TimestampMicrosecondType>();
            let mut parsed: Option<(&str, Tz)> = None;
            let mut out = Vec::with_capacity(values.len());
            for i in 0..values.len() {
                if zones.is_null(i) || values.is_null(i) {
                    out.push(None);
                    continue;
                }
                let name = zones.value(i);
                let zone = match parsed {
                    Some((n, z)) if n == name => z,
                    _ => {
                        let z = zone_named(name)?;
                        parsed = Some((name, z));
                        z
                    }
                };
                let micros = values.value(i);
                out.push(Some(if instants {
                    wall_clock(micros, &zone)?
                } else {
                    instant(micros, &zone)?
                }));
            }
            let out = TimestampMicrosecondArray::from(out);
            let out = if instants {
                out
            } else {
                out.with_timezone(SESSION_ZONE)
            };
            Ok(Arc::new(out) as ArrayRef)
        })
    }
}

/// The zone `name` names (an IANA name or an offset), or DuckDB's error.
pub(super) fn zone_named(name: &str) -> Result<Tz> {
    name.parse()
        .map_err(|_| DataFusionError::NotImplemented(format!("Unknown TimeZone '{name}'")))
}

fn out_of_range(micros: i64) -> DataFusionError {
    DataFusionError::Execution(format!(
        "Out of Range Error: timestamp {micros} µs is out of range for AT TIME ZONE"
    ))
}

/// The wall clock (microseconds since the epoch, as if UTC) `zone` shows at the instant
/// `micros`.
fn wall_clock(micros: i64, zone: &Tz) -> Result<i64> {
    let utc = DateTime::from_timestamp_micros(micros).ok_or_else(|| out_of_range(micros))?;
    Ok(zone
        .from_utc_datetime(&utc.naive_utc())
        .naive_local()
        .and_utc()
        .timestamp_micros())
}

/// The instant at which `zone` shows the wall clock `micros`.
fn instant(micros: i64, zone: &Tz) -> Result<i64> {
    let local: NaiveDateTime = DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| out_of_range(micros))?
        .naive_utc();
    let utc = match zone.from_local_datetime(&local) {
        LocalResult::Single(t) => t.naive_utc(),
        // Shown twice: the later, standard-time one.
        LocalResult::Ambiguous(_, later) => later.naive_utc(),
        // Skipped: read with the offset a day before (before the change).
        LocalResult::None => {
            let before = local - TimeDelta::days(1);
            let offset = zone.offset_from_utc_datetime(&before).fix();
            local - TimeDelta::seconds(i64::from(offset.local_minus_utc()))
        }
    };
    Ok(utc.and_utc().timestamp_micros())
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::{instant, wall_clock, zone_named};

    fn micros(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_opt(h, mi, 0))
            .expect("valid")
            .and_utc()
            .timestamp_micros()
    }

    /// DuckDB 2.0.1's answers.
    #[test]
    fn as_duckdb_moves_between_clocks_and_instants() {
        let new_york = zone_named("America/New_York").expect("zone");
        let berlin = zone_named("Europe/Berlin").expect("zone");
        assert_eq!(
            wall_clock(micros(2024, 1, 15, 10, 30), &new_york).expect("in range"),
            micros(2024, 1, 15, 5, 30)
        );
        let cases = [
            // (zone, wall clock, the instant DuckDB answers)
            (
                &new_york,
                micros(2024, 1, 15, 10, 30),
                micros(2024, 1, 15, 15, 30),
            ),
            // skipped by the change to summer time: the offset before it
            (
                &new_york,
                micros(2024, 3, 10, 2, 30),
                micros(2024, 3, 10, 7, 30),
            ),
            (
                &berlin,
                micros(2024, 3, 31, 2, 30),
                micros(2024, 3, 31, 1, 30),
            ),
            // shown twice at the change back: the later, standard time
            (
                &new_york,
                micros(2024, 11, 3, 1, 30),
                micros(2024, 11, 3, 6, 30),
            ),
            (
                &berlin,
                micros(2024, 10, 27, 2, 30),
                micros(2024, 10, 27, 1, 30),
            ),
        ];
        for (zone, clock, expected) in cases {
            assert_eq!(instant(clock, zone).expect("in range"), expected);
        }
        assert!(matches!(
            zone_named("Nowhere/X"),
            Err(datafusion::error::DataFusionError::NotImplemented(m)) if m == "Unknown TimeZone 'Nowhere/X'"
        ));
    }
}
