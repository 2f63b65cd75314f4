//! DuckDB's string functions where DataFusion's answer differently.
//!
//! - `substring(s, start[, length])` (also `substr`, `SUBSTRING(s FROM a FOR b)`): a
//!   negative `start` counts from the end (`substring('hello', -3)` is `llo`) and a
//!   negative `length` takes the characters before `start` (`substring('hello', 3, -2)`
//!   is `he`). DataFusion's follows Postgres: a negative start is before the string
//!   (`hello`), a negative length an error. Replaces DataFusion's under its name and
//!   aliases, with its signature (so its argument coercion), and planned by
//!   [`DuckdbStrings`] ahead of DataFusion's planners (sqlparser parses `SUBSTRING` as a
//!   form of its own, which DataFusion's planner hands its own function).
//! - `s[i]` and `s[a:b]` of a string: its `i`-th character, its characters `a` to `b`
//!   (1 the first, -1 the last, both ends included), as DuckDB has them; DataFusion
//!   subscripts only lists ("array_element does not support type Utf8"). Planned by
//!   [`DuckdbStrings`] when the subscripted value is text.
//!
//! DuckDB's regular expression functions DataFusion lacks are in `sql/regexps.rs`.

use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::{GetFieldAccess, ScalarFunction};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, Volatility,
};
use datafusion::prelude::SessionContext;

use super::udf::{Replacement, Replacing, elementwise};

/// DuckDB's `substring`, in DataFusion's clothes.
fn substring_udf() -> Arc<ScalarUDF> {
    static UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
        Arc::new(ScalarUDF::new_from_impl(Replacing {
            inner: datafusion::functions::unicode::substr().as_ref().clone(),
            replacement: Substring,
        }))
    });
    Arc::clone(&UDF)
}

/// Plans `SUBSTRING(…)` and `SUBSTR(…)`, which sqlparser parses as their own form (not
/// a function call) and DataFusion's planner hands its own `substr`; goes before it.
#[derive(Debug)]
pub(super) struct DuckdbStrings;

impl ExprPlanner for DuckdbStrings {
    fn plan_substring(&self, args: Vec<Expr>) -> Result<PlannerResult<Vec<Expr>>> {
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(substring_udf(), args),
        )))
    }

    fn plan_field_access(
        &self,
        access: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawFieldAccessExpr>> {
        let text = matches!(
            access.expr.get_type(schema),
            Ok(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
        );
        if !text {
            return Ok(PlannerResult::Original(access));
        }
        match access.field_access {
            GetFieldAccess::ListIndex { key } => Ok(PlannerResult::Planned(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    substring_udf(),
                    vec![access.expr, *key, datafusion::prelude::lit(1i64)],
                ),
            ))),
            GetFieldAccess::ListRange {
                start,
                stop,
                stride,
            } if matches!(
                stride.as_ref(),
                Expr::Literal(ScalarValue::Int64(Some(1)), _)
            ) =>
            {
                Ok(PlannerResult::Planned(Expr::ScalarFunction(
                    ScalarFunction::new_udf(
                        Arc::new(string_slice_udf()),
                        vec![access.expr, *start, *stop],
                    ),
                )))
            }
            field_access => Ok(PlannerResult::Original(RawFieldAccessExpr {
                field_access,
                expr: access.expr,
            })),
        }
    }
}

/// `s[a:b]` of a string.
fn string_slice_udf() -> ScalarUDF {
    datafusion::logical_expr::create_udf(
        "__deltalite_string_slice",
        vec![DataType::Utf8, DataType::Int64, DataType::Int64],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| elementwise(args, string_slices)),
    )
}

fn string_slices(arrays: &[ArrayRef]) -> Result<ArrayRef> {
    let [text, from, to] = arrays else {
        return exec_err!("a string slice takes a string and two bounds");
    };
    let text = cast(text, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let bound = |a: &ArrayRef| -> Result<Int64Array> {
        Ok(cast(a, &DataType::Int64)?.as_primitive().clone())
    };
    let (from, to) = (bound(from)?, bound(to)?);
    let mut out = StringBuilder::with_capacity(text.len(), text.value_data().len());
    for i in 0..text.len() {
        if text.is_null(i) || from.is_null(i) || to.is_null(i) {
            out.append_null();
        } else {
            out.append_value(slice(text.value(i), from.value(i), to.value(i)));
        }
    }
    Ok(Arc::new(out.finish()))
}

/// DuckDB's `s[from:to]`: characters `from` to `to`, both included, 1 the first and -1
/// the last; bounds past either end are clamped to it.
fn slice(s: &str, from: i64, to: i64) -> &str {
    let size = s.chars().count() as i64;
    let at = |i: i64| if i < 0 { size + i + 1 } else { i };
    let (from, to) = (at(from).max(1), at(to).min(size));
    if from > to {
        return "";
    }
    substring(s, from, to - from + 1)
}

/// Replace the session's `substr`/`substring` functions (a quoted `"substring"(…)` is a
/// call by name) with DuckDB's.
pub(super) fn register(ctx: &SessionContext) {
    ctx.register_udf(substring_udf().as_ref().clone());
}

/// DuckDB's positions, on DataFusion's `substr` (its name, aliases, signature and so
/// argument coercion, and return type are kept).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Substring;

impl Replacement for Substring {
    fn invoke(&self, _inner: &ScalarUDF, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        elementwise(&args.args, substrings)
    }
}

/// Each row's `substring(text, start[, length])`.
fn substrings(arrays: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, numbers) = match arrays {
        [text, numbers @ ..] if (1..=2).contains(&numbers.len()) => (text, numbers),
        _ => return exec_err!("substring takes a string, a start and a length"),
    };
    let out_type = text.data_type().clone();
    let text = cast(text, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let int64 = |a: &ArrayRef| -> Result<Int64Array> {
        Ok(cast(a, &DataType::Int64)?.as_primitive().clone())
    };
    let start = int64(&numbers[0])?;
    let length = numbers.get(1).map(int64).transpose()?;
    let mut out = StringBuilder::with_capacity(text.len(), text.value_data().len());
    for i in 0..text.len() {
        let length = match &length {
            Some(l) if l.is_null(i) => None,
            Some(l) => Some(l.value(i)),
            // DuckDB's "the rest": its longest string.
            None => Some(i64::from(u32::MAX)),
        };
        match (text.is_null(i) || start.is_null(i), length) {
            (false, Some(length)) => {
                out.append_value(substring(text.value(i), start.value(i), length))
            }
            _ => out.append_null(),
        }
    }
    Ok(cast(&(Arc::new(out.finish()) as ArrayRef), &out_type)?)
}

/// DuckDB's `substring(s, offset, length)`, in characters: from `offset` (1 is the first
/// character, 0 the one before it, -1 the last) `length` characters on, or back when
/// negative, of those inside the string. (Checked against DuckDB 2.0.1 for every offset
/// in -9..=9 and length in -9..=9 of a five-character string.)
fn substring(s: &str, offset: i64, length: i64) -> &str {
    let size = s.chars().count() as i64;
    let from = if offset < 0 {
        size.saturating_add(offset)
    } else {
        offset - 1
    };
    let to = from.saturating_add(length);
    let (from, to) = (from.min(to).clamp(0, size), from.max(to).clamp(0, size));
    if from >= to {
        return "";
    }
    let byte = |char_index: i64| {
        s.char_indices()
            .nth(char_index as usize)
            .map_or(s.len(), |(b, _)| b)
    };
    &s[byte(from)..byte(to)]
}

#[cfg(test)]
mod tests {
    use super::{slice, substring};

    /// Answers DuckDB 2.0.1 gave for `'abcdef'[from:to]`.
    #[test]
    fn slices_as_duckdb() {
        for (from, to, want) in [
            (2, 3, "bc"),
            (-3, -1, "def"),
            (2, -2, "bcde"),
            (0, 2, "ab"),
            (1, 3, "abc"),
            (4, -1, "def"),
            (5, 2, ""),
            (-10, 2, "ab"),
            (3, 100, "cdef"),
        ] {
            assert_eq!(slice("abcdef", from, to), want, "[{from}:{to}]");
        }
        assert_eq!(slice("héllo", 2, 3), "él");
    }

    /// Answers DuckDB 2.0.1 gave.
    #[test]
    fn positions_and_lengths_as_duckdb() {
        for (offset, length, want) in [
            (1, 3, "hel"),
            (2, i64::from(u32::MAX), "ello"),
            (-3, i64::from(u32::MAX), "llo"),
            (-3, 2, "ll"),
            (0, 2, "h"),
            (0, 1, ""),
            (2, -1, "h"),
            (3, -2, "he"),
            (-10, 3, ""),
            (-7, 3, "h"),
            (0, -1, ""),
            (9, 2, ""),
            (2, 0, ""),
            (-1, -2, "ll"),
        ] {
            assert_eq!(
                substring("hello", offset, length),
                want,
                "{offset}, {length}"
            );
        }
        assert_eq!(substring("日本語テキスト", -3, 2), "キス");
    }
}
