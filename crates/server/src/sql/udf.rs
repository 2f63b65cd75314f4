//! Functions the SQL sessions add or replace: capped size-taking functions, `from_base64`.

use std::sync::Arc;

use arrow::array::{Array, BinaryArray, StringArray};
use arrow::datatypes::DataType;
use base64::Engine;
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};

/// Functions whose result size is an argument (`repeat('x', 1e9)`, `lpad`, `rpad`,
/// `array_repeat`): one such call allocated gigabytes that no memory pool accounts for
/// (a hostile-input run drove the server to 6.9 GB). Each is replaced, under its own name
/// and aliases, by a wrapper that refuses batches whose result could exceed
/// [`capped::MAX_VALUE_BYTES`].
pub(super) mod capped {
    use datafusion::execution::FunctionRegistry;
    use std::sync::Arc;

    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, FieldRef, Int64Type};
    use datafusion::common::{Result, exec_err};
    use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
    use datafusion::logical_expr::{
        ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
        ScalarUDFImpl, Signature,
    };
    use datafusion::prelude::SessionContext;

    /// Largest result one call may produce for a batch of rows, in bytes (estimated from
    /// the largest count and the longest repeated value).
    pub const MAX_VALUE_BYTES: i64 = 256 * deltalite::MIB as i64;

    #[derive(Debug, PartialEq, Eq, Hash)]
    struct Capped {
        inner: ScalarUDF,
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

    impl ScalarUDFImpl for Capped {
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
                    self.inner.name(),
                    MAX_VALUE_BYTES / deltalite::MIB as i64
                );
            }
            self.inner.invoke_with_args(args)
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
                ctx.register_udf(ScalarUDF::new_from_impl(Capped {
                    inner: inner.as_ref().clone(),
                    count_arg,
                    unit_arg,
                }));
            }
        }
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
