//! DuckDB functions whose meaning depends on their argument's type, which an AST rewrite
//! cannot see: `len(x)` (characters of a string, items of a list) and `epoch_ms(x)`
//! (a timestamp's milliseconds since the epoch; the timestamp of an integer's), with
//! `epoch_us` and `epoch_ns` of timestamps and dates.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMicrosecondType};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::udf::elementwise;

/// The functions of this module.
pub(super) fn udfs() -> [ScalarUDF; 4] {
    [
        ScalarUDF::new_from_impl(Dispatch::new(Kind::Len)),
        ScalarUDF::new_from_impl(Dispatch::new(Kind::Epoch(1_000))),
        ScalarUDF::new_from_impl(Dispatch::new(Kind::Epoch(1))),
        ScalarUDF::new_from_impl(Dispatch::new(Kind::Epoch(-1_000))),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Len,
    /// Microseconds per unit (`1_000` for milliseconds); negative: units per microsecond.
    Epoch(i64),
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Dispatch {
    kind: Kind,
    signature: Signature,
}

impl Dispatch {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

fn is_integer(dt: &DataType) -> bool {
    dt.is_integer() || matches!(dt, DataType::Null)
}

fn is_temporal(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64
    )
}

impl ScalarUDFImpl for Dispatch {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Len => "len",
            Kind::Epoch(1_000) => "epoch_ms",
            Kind::Epoch(1) => "epoch_us",
            Kind::Epoch(_) => "epoch_ns",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let [arg] = args else {
            return plan_err!("{} takes one argument", self.name());
        };
        match self.kind {
            Kind::Len
                if matches!(
                    arg,
                    DataType::List(_)
                        | DataType::LargeList(_)
                        | DataType::FixedSizeList(_, _)
                        | DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Utf8View
                        | DataType::Null
                ) =>
            {
                Ok(DataType::Int64)
            }
            Kind::Epoch(1_000) if is_integer(arg) => {
                Ok(DataType::Timestamp(TimeUnit::Microsecond, None))
            }
            Kind::Epoch(_) if is_temporal(arg) => Ok(DataType::Int64),
            _ => plan_err!(
                "No function matches the given name and argument types '{}({})'",
                self.name(),
                crate::types::duckdb_type(arg)
            ),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let kind = self.kind;
        elementwise(&args.args, |arrays| match (kind, arrays) {
            (Kind::Len, [a]) => len(a),
            (Kind::Epoch(per), [a]) if is_temporal(a.data_type()) => {
                let micros = arrow::compute::cast(
                    &arrow::compute::cast(a, &DataType::Timestamp(TimeUnit::Microsecond, None))?,
                    &DataType::Int64,
                )?;
                let micros = micros.as_primitive::<Int64Type>();
                let out: Int64Array = if per > 0 {
                    micros.unary(|m| m.div_euclid(per))
                } else {
                    micros.unary(|m| m.saturating_mul(-per))
                };
                Ok(Arc::new(out) as ArrayRef)
            }
            (Kind::Epoch(per), [a]) => {
                let units = arrow::compute::cast(a, &DataType::Int64)?;
                let out: TimestampMicrosecondArray =
                    units
                        .as_primitive::<Int64Type>()
                        .unary::<_, TimestampMicrosecondType>(|n| n.saturating_mul(per));
                Ok(Arc::new(out) as ArrayRef)
            }
            _ => plan_err!("{} takes one argument", self.name()),
        })
    }
}

/// Items of a list, characters of a string.
fn len(a: &ArrayRef) -> Result<ArrayRef> {
    let out: Int64Array = match a.data_type() {
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) => {
            let lengths = arrow::compute::kernels::length::length(a)?;
            return Ok(arrow::compute::cast(&lengths, &DataType::Int64)?);
        }
        DataType::Null => Int64Array::new_null(a.len()),
        _ => {
            let text = arrow::compute::cast(a, &DataType::Utf8)?;
            text.as_string::<i32>()
                .iter()
                .map(|s| s.map(|s| s.chars().count() as i64))
                .collect()
        }
    };
    Ok(Arc::new(out))
}
