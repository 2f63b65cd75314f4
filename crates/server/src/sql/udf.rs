//! Functions the SQL sessions add or replace: capped size-taking functions, `from_base64`,
//! DuckDB's `sha256` and `sha1`; and the parts the other modules' functions are built of
//! ([`elementwise`], [`marker`], [`Replacing`]).

use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, StringArray};
use arrow::datatypes::{DataType, FieldRef};
use base64::Engine;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility, create_udf,
};

/// `kernel` over the arguments' values as arrays; a scalar again when every argument was
/// one, so that a call of constants stays a constant.
pub(super) fn elementwise(
    args: &[ColumnarValue],
    kernel: impl FnOnce(&[ArrayRef]) -> Result<ArrayRef>,
) -> Result<ColumnarValue> {
    let scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let result = kernel(&ColumnarValue::values_to_arrays(args)?)?;
    Ok(if scalar {
        ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
    } else {
        ColumnarValue::Array(result)
    })
}

/// A function of one argument that a rewrite puts where an expression was written:
/// `kernel` over the argument's values, answering `returns` (the argument's type when
/// `None`), its column named by `named` from the argument, so that the column keeps the
/// name of what was written.
pub(super) fn marker(
    name: &'static str,
    kernel: fn(&ArrayRef) -> Result<ArrayRef>,
    returns: Option<DataType>,
    named: fn(&Expr) -> String,
) -> ScalarUDF {
    ScalarUDF::new_from_impl(Marker {
        name,
        kernel,
        returns,
        named,
        signature: Signature::any(1, Volatility::Immutable),
    })
}

struct Marker {
    name: &'static str,
    kernel: fn(&ArrayRef) -> Result<ArrayRef>,
    returns: Option<DataType>,
    named: fn(&Expr) -> String,
    signature: Signature,
}

impl Debug for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Marker").field(&self.name).finish()
    }
}

/// A marker is its name (each name has one kernel).
impl PartialEq for Marker {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Marker {}

impl Hash for Marker {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for Marker {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(match &self.returns {
            Some(t) => t.clone(),
            None => args.first().cloned().unwrap_or(DataType::Null),
        })
    }
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        Ok(match args {
            [arg] => (self.named)(arg),
            _ => format!("{}({})", self.name, args.len()),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        elementwise(&args.args, |arrays| match arrays {
            [arg] => (self.kernel)(arg),
            _ => datafusion::common::internal_err!("{} takes one argument", self.name),
        })
    }
}

/// What a [`Replacing`] function computes instead of the function it replaces.
pub(super) trait Replacement: Debug + PartialEq + Eq + Hash + Send + Sync + 'static {
    fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue>;
}

/// One of DataFusion's functions computed otherwise: its name, aliases, signature, types,
/// simplification and documentation are `inner`'s; its values are `replacement`'s.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Replacing<R> {
    pub(super) inner: ScalarUDF,
    pub(super) replacement: R,
}

impl<R: Replacement> ScalarUDFImpl for Replacing<R> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }
    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }
    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.replacement.invoke(&self.inner, args)
    }
}

/// Functions whose result size is an argument (`repeat('x', 1e9)`, `lpad`, `rpad`,
/// `array_repeat`): one such call allocated gigabytes that no memory pool accounts for
/// (a hostile-input run drove the server to 6.9 GB). Each is replaced, under its own name
/// and aliases, by a wrapper that refuses batches whose result could exceed
/// [`capped::MAX_VALUE_BYTES`].
pub(super) mod capped {
    use datafusion::execution::FunctionRegistry;
    use std::sync::Arc;

    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Int64Type};
    use datafusion::common::{Result, exec_err};
    use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};
    use datafusion::prelude::SessionContext;

    use super::{Replacement, Replacing};

    /// Largest result one call may produce for a batch of rows, in bytes (estimated from
    /// the largest count and the longest repeated value).
    pub const MAX_VALUE_BYTES: i64 = 256 * deltalite::MIB as i64;

    #[derive(Debug, PartialEq, Eq, Hash)]
    struct Capped {
        /// Argument holding the repeat count / target length.
        count_arg: usize,
        /// Argument whose length multiplies the count (`repeat`'s string), if any.
        unit_arg: Option<usize>,
    }

    /// Largest integer in an argument (NULLs and non-integers count as 0).
    fn max_int(value: &ColumnarValue) -> i64 {
        let array = match value {
            ColumnarValue::Scalar(s) => match s.to_array() {
                Ok(a) => a,
                Err(_) => return 0,
            },
            ColumnarValue::Array(a) => Arc::clone(a),
        };
        match arrow::compute::cast(&array, &DataType::Int64) {
            Ok(a) => arrow::compute::max(a.as_primitive::<Int64Type>()).unwrap_or(0),
            Err(_) => 0,
        }
    }

    /// Longest value of an argument in bytes (8 for fixed-width values).
    fn max_len(value: &ColumnarValue) -> i64 {
        let array = match value {
            ColumnarValue::Scalar(s) => match s.to_array() {
                Ok(a) => a,
                Err(_) => return 1,
            },
            ColumnarValue::Array(a) => Arc::clone(a),
        };
        match arrow::compute::kernels::length::length(&array) {
            Ok(l) => max_int(&ColumnarValue::Array(l)).max(1),
            Err(_) => 8,
        }
    }

    impl Replacement for Capped {
        fn invoke(&self, inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
            let count = args.args.get(self.count_arg).map(max_int).unwrap_or(0);
            let unit = match self.unit_arg.and_then(|i| args.args.get(i)) {
                Some(v) => max_len(v),
                // lpad/rpad count characters (up to 4 bytes); array elements ~8 bytes.
                None => 8,
            };
            // An upper bound of the batch's result: every row at the largest count and unit.
            let rows = args.number_rows.max(1) as i64;
            if count.saturating_mul(unit).saturating_mul(rows) > MAX_VALUE_BYTES {
                return exec_err!(
                    "{}: the result would exceed {} MiB",
                    inner.name(),
                    MAX_VALUE_BYTES / deltalite::MIB as i64
                );
            }
            inner.invoke_with_args(args)
        }
    }

    /// Replace the size-taking functions of `ctx` by capped versions.
    pub fn register(ctx: &SessionContext) {
        for (name, count_arg, unit_arg) in [
            ("repeat", 1, Some(0)),
            ("lpad", 1, None),
            ("rpad", 1, None),
            ("array_repeat", 1, Some(0)),
        ] {
            if let Ok(inner) = ctx.udf(name) {
                ctx.register_udf(ScalarUDF::new_from_impl(Replacing {
                    inner: inner.as_ref().clone(),
                    replacement: Capped {
                        count_arg,
                        unit_arg,
                    },
                }));
            }
        }
    }
}

/// DuckDB's `typeof(x)`: the name of `x`'s type, as `DESCRIBE` spells it (`INTEGER`,
/// `DECIMAL(18,3)`, `TIMESTAMP WITH TIME ZONE`).
pub(super) fn typeof_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(TypeOf {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TypeOf {
    signature: Signature,
}

impl ScalarUDFImpl for TypeOf {
    fn name(&self) -> &str {
        "typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = args
            .arg_fields
            .first()
            .map(|f| crate::types::duckdb_field_type(f));
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(name)))
    }
}

/// `from_base64(text) -> BLOB`, as DuckDB has it.
pub(super) fn from_base64_udf() -> datafusion::logical_expr::ScalarUDF {
    create_udf(
        "from_base64",
        vec![DataType::Utf8],
        DataType::Binary,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let input = arrays.first().ok_or_else(|| {
                datafusion::error::DataFusionError::Execution(
                    "from_base64 needs one argument".into(),
                )
            })?;
            let input = arrow::compute::cast(input, &DataType::Utf8)?;
            let strings = input
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| {
                    datafusion::error::DataFusionError::Execution("from_base64 expects text".into())
                })?;
            let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(strings.len());
            for v in strings.iter() {
                out.push(match v {
                    Some(s) => Some(base64::engine::general_purpose::STANDARD.decode(s.trim()).map_err(|e| {
                        datafusion::error::DataFusionError::Execution(format!(
                            "Conversion Error: Could not decode string \"{s}\" as base64: {e}"
                        ))
                    })?),
                    None => None,
                });
            }
            let array = BinaryArray::from_iter(out.iter().map(|o| o.as_deref()));
            Ok(ColumnarValue::Array(Arc::new(array)))
        }),
    )
}

/// DuckDB's `sha256(text or blob) -> VARCHAR` and `sha1`: the digest as lowercase hex
/// (DataFusion's `sha256` answers the 32 bytes as a BLOB, so keys built with it differed
/// from DuckDB's; it has no `sha1`).
pub(super) fn digest_udfs() -> [datafusion::logical_expr::ScalarUDF; 2] {
    [
        digest_udf::<sha2::Sha256>("sha256"),
        digest_udf::<sha1::Sha1>("sha1"),
    ]
}

fn digest_udf<D: sha2::Digest>(name: &'static str) -> datafusion::logical_expr::ScalarUDF {
    use datafusion::logical_expr::{Signature, expr_fn::SimpleScalarUDF};
    let one = |bytes: &[u8]| hex::encode(D::digest(bytes));
    let takes = vec![
        DataType::Utf8,
        DataType::LargeUtf8,
        DataType::Utf8View,
        DataType::Binary,
        DataType::LargeBinary,
        DataType::BinaryView,
    ];
    SimpleScalarUDF::new_with_signature(
        name,
        Signature::uniform(1, takes, Volatility::Immutable),
        DataType::Utf8,
        Arc::new(move |args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let [input] = arrays.as_slice() else {
                return Err(datafusion::error::DataFusionError::Execution(format!(
                    "{name} takes one argument"
                )));
            };
            let input = arrow::compute::cast(input, &DataType::Binary)?;
            let bytes = input
                .as_any()
                .downcast_ref::<BinaryArray>()
                .ok_or_else(|| {
                    datafusion::error::DataFusionError::Execution(format!("{name} expects bytes"))
                })?;
            let out: StringArray = bytes.iter().map(|v| v.map(one)).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    )
    .into()
}

/// DuckDB's `error(message)`: fails the statement with `message` when evaluated for a row.
/// Volatile, so the planner never folds it away or evaluates it for rows a `CASE` does
/// not select.
pub(super) fn error_udf() -> datafusion::logical_expr::ScalarUDF {
    create_udf(
        "error",
        vec![DataType::Utf8],
        DataType::Null,
        Volatility::Volatile,
        Arc::new(|args: &[ColumnarValue]| {
            let message = match args.first() {
                Some(ColumnarValue::Scalar(s)) => Some(s.to_string()),
                Some(ColumnarValue::Array(a)) if a.is_empty() => {
                    return Ok(ColumnarValue::Array(arrow::array::new_null_array(
                        &DataType::Null,
                        0,
                    )));
                }
                Some(ColumnarValue::Array(a)) => {
                    let text = arrow::compute::cast(a, &DataType::Utf8)?;
                    text.as_any().downcast_ref::<StringArray>().and_then(|s| {
                        (0..s.len())
                            .find(|&i| s.is_valid(i))
                            .map(|i| s.value(i).to_string())
                    })
                }
                None => None,
            };
            Err(datafusion::error::DataFusionError::Execution(
                message.unwrap_or_default(),
            ))
        }),
    )
}

/// A function of no arguments answering `value`: `current_database()`, `version()`, …
pub(super) fn constant_udf(name: &str, value: String) -> datafusion::logical_expr::ScalarUDF {
    create_udf(
        name,
        vec![],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(move |_: &[ColumnarValue]| {
            Ok(ColumnarValue::Scalar(
                datafusion::scalar::ScalarValue::Utf8(Some(value.clone())),
            ))
        }),
    )
}

/// The DuckDB release whose SQL surface the server speaks, as `version()` answers it:
/// clients parse it (dbt-altertable compares it with `1.5.3` for DuckLake workarounds,
/// ibis with `packaging.Version`).
pub(super) const DUCKDB_VERSION: &str = "v1.5.3";

/// `now()` and `current_timestamp` as DuckDB has them: a `TIMESTAMP WITH TIME ZONE` of
/// microseconds, the same wherever it appears in a statement. DataFusion's own answers
/// nanoseconds, and a table column holds microseconds (Delta's timestamps do): `CREATE
/// TABLE … AS SELECT now()::timestamp …`, which dbt's snapshots send, failed the
/// no-silent-truncation check on the sub-microsecond digits.
pub(super) mod now {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
    use datafusion::common::{Result, ScalarValue, internal_err};
    use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
    use datafusion::logical_expr::{
        ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
        Volatility,
    };

    /// The session's time zone: the sessions set UTC (`sql/mod.rs`).
    const ZONE: &str = "+00:00";

    #[derive(Debug, PartialEq, Eq, Hash)]
    pub(in crate::sql) struct NowMicros {
        signature: Signature,
        aliases: Vec<String>,
    }

    impl NowMicros {
        pub(in crate::sql) fn new() -> Self {
            Self {
                signature: Signature::nullary(Volatility::Stable),
                aliases: vec!["current_timestamp".to_string()],
            }
        }
    }

    impl ScalarUDFImpl for NowMicros {
        fn name(&self) -> &str {
            "now"
        }

        fn signature(&self) -> &Signature {
            &self.signature
        }

        fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
            Ok(Arc::new(Field::new(
                self.name(),
                DataType::Timestamp(TimeUnit::Microsecond, Some(ZONE.into())),
                false,
            )))
        }

        fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
            internal_err!("return_field_from_args should be called instead")
        }

        fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
            internal_err!("now() is replaced by its value when the statement is planned")
        }

        /// The statement's start time, as DataFusion's `now()` takes it, to the microsecond.
        fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
            let Some(start) = info.query_execution_start_time() else {
                return Ok(ExprSimplifyResult::Original(args));
            };
            Ok(ExprSimplifyResult::Simplified(Expr::Literal(
                ScalarValue::TimestampMicrosecond(
                    Some(start.timestamp_micros()),
                    Some(ZONE.into()),
                ),
                None,
            )))
        }

        fn aliases(&self) -> &[String] {
            &self.aliases
        }
    }
}

/// DuckDB's `make_timestamp(y, mo, d, h, mi, s)` (a `TIMESTAMP`) and
/// `make_timestamptz(y, mo, d, h, mi, s [, zone])` (a `TIMESTAMPTZ`, the fields read in
/// `zone`, UTC without one): ibis' DuckDB compiler writes every timestamp literal so.
pub(super) fn make_timestamp_udfs() -> [datafusion::logical_expr::ScalarUDF; 2] {
    use arrow::datatypes::TimeUnit;
    use datafusion::logical_expr::{Signature, TypeSignature, expr_fn::SimpleScalarUDF};

    let fields = || {
        let mut t = vec![DataType::Int64; 5];
        t.push(DataType::Float64);
        t
    };
    let with_zone = || {
        let mut t = fields();
        t.push(DataType::Utf8);
        t
    };
    let plain = SimpleScalarUDF::new_with_signature(
        "make_timestamp",
        Signature::exact(fields(), Volatility::Immutable),
        DataType::Timestamp(TimeUnit::Microsecond, None),
        Arc::new(|args: &[ColumnarValue]| make_timestamp(args, None)),
    );
    let zoned = SimpleScalarUDF::new_with_signature(
        "make_timestamptz",
        Signature::one_of(
            vec![
                TypeSignature::Exact(fields()),
                TypeSignature::Exact(with_zone()),
            ],
            Volatility::Immutable,
        ),
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        Arc::new(|args: &[ColumnarValue]| make_timestamp(args, Some("UTC"))),
    );
    [plain.into(), zoned.into()]
}

fn make_timestamp(
    args: &[ColumnarValue],
    zone: Option<&str>,
) -> datafusion::error::Result<ColumnarValue> {
    use arrow::array::{AsArray, TimestampMicrosecondArray};
    use arrow::datatypes::{Float64Type, Int64Type};
    use chrono::{NaiveDate, TimeZone};
    use datafusion::error::DataFusionError;

    let arrays = ColumnarValue::values_to_arrays(args)?;
    let rows = arrays.first().map_or(0, |a| a.len());
    let ints: Vec<_> = arrays[..5]
        .iter()
        .map(|a| a.as_primitive::<Int64Type>())
        .collect();
    let seconds = arrays[5].as_primitive::<Float64Type>();
    let zones = arrays.get(6).map(|a| a.as_string::<i32>());
    let mut out = Vec::with_capacity(rows);
    for row in 0..rows {
        if ints.iter().any(|a| a.is_null(row))
            || seconds.is_null(row)
            || zones.is_some_and(|z| z.is_null(row))
        {
            out.push(None);
            continue;
        }
        let [y, mo, d, h, mi] = [0, 1, 2, 3, 4].map(|i| ints[i].value(row));
        let s = seconds.value(row);
        let invalid = || {
            DataFusionError::Execution(format!(
                "Conversion Error: Timestamp out of range: {y}-{mo}-{d} {h}:{mi}:{s}"
            ))
        };
        let micros = (s * 1e6).round();
        if !(0.0..60e6).contains(&micros) {
            return Err(invalid());
        }
        let naive = i32::try_from(y)
            .ok()
            .zip(u32::try_from(mo).ok())
            .zip(u32::try_from(d).ok())
            .and_then(|((y, mo), d)| NaiveDate::from_ymd_opt(y, mo, d))
            .and_then(|date| {
                date.and_hms_micro_opt(
                    u32::try_from(h).ok()?,
                    u32::try_from(mi).ok()?,
                    (micros as u32) / 1_000_000,
                    (micros as u32) % 1_000_000,
                )
            })
            .ok_or_else(invalid)?;
        let value = match zones.map(|z| z.value(row)).or(zone) {
            None => naive.and_utc().timestamp_micros(),
            Some(name) => super::time_zones::zone_named(name)?
                .from_local_datetime(&naive)
                .earliest()
                .ok_or_else(invalid)?
                .timestamp_micros(),
        };
        out.push(Some(value));
    }
    let array = TimestampMicrosecondArray::from(out);
    let array = match zone {
        Some(z) => array.with_timezone(z),
        None => array,
    };
    Ok(ColumnarValue::Array(Arc::new(array)))
}

/// Name of [`row_key_udf`], which `count(DISTINCT row(…))` is rewritten to count
/// (`sql/normalize.rs`).
pub(super) const ROW_KEY: &str = "__deltalite_row_key";

/// `__deltalite_row_key(a, b, …)`: the tuple's Arrow row encoding, never NULL, equal for
/// equal tuples (NULL fields included, as `DISTINCT` compares them). dlt's merge checks
/// send `count(DISTINCT row(k, …))`; DataFusion counts distinct structs with its generic
/// accumulator, which charges every value with its whole batch's arrays and exhausted the
/// 1 GiB query pool on a 200,000-row staging file. Distinct bytes have a compact
/// accumulator of their own.
pub(super) fn row_key_udf() -> datafusion::logical_expr::ScalarUDF {
    datafusion::logical_expr::ScalarUDF::new_from_impl(RowKey {
        signature: datafusion::logical_expr::Signature::variadic_any(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RowKey {
    signature: datafusion::logical_expr::Signature,
}

impl datafusion::logical_expr::ScalarUDFImpl for RowKey {
    fn name(&self) -> &str {
        ROW_KEY
    }
    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Binary)
    }
    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let fields = arrays
            .iter()
            .map(|a| arrow::row::SortField::new(a.data_type().clone()))
            .collect();
        let rows = arrow::row::RowConverter::new(fields)?.convert_columns(&arrays)?;
        Ok(ColumnarValue::Array(Arc::new(rows.try_into_binary()?)))
    }
}
