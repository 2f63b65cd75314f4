//! DuckDB's functions over a list and a lambda: `list_transform` and `list_filter`,
//! whose lambda may take the element's 1-based index after the element (DataFusion's
//! `array_transform`/`array_filter`, which these replace, take the element only), and
//! `list_reduce`, which DataFusion lacks.
//!
//! Each lambda is evaluated once over all the lists' elements of a batch (a reduction
//! once per position), with the columns it captures repeated for each element.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, ListArray, UInt32Array, new_null_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::kernels::interleave::interleave;
use datafusion::arrow::compute::{cast, filter, nullif, take, take_arrays};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::utils::{adjust_offsets_for_slice, list_values_row_number};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::logical_expr::type_coercion::binary::type_union_resolution;
use datafusion::logical_expr::{
    ColumnarValue, HigherOrderFunctionArgs, HigherOrderReturnFieldArgs, HigherOrderSignature,
    HigherOrderUDF, HigherOrderUDFImpl, LambdaArgument, LambdaParametersProgress, ValueOrLambda,
    Volatility,
};

use crate::types::duckdb_type;

/// The functions, under the names `rewrite` gives DuckDB's.
pub(in crate::sql) fn functions() -> Vec<Arc<HigherOrderUDF>> {
    [Kind::Transform, Kind::Filter, Kind::Reduce]
        .into_iter()
        .map(|kind| {
            Arc::new(HigherOrderUDF::new_from_impl(ListLambda {
                kind,
                signature: HigherOrderSignature::user_defined(Volatility::Immutable),
            }))
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Kind {
    Transform,
    Filter,
    Reduce,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ListLambda {
    kind: Kind,
    signature: HigherOrderSignature,
}

impl ListLambda {
    /// DuckDB's name, for messages.
    fn duckdb_name(&self) -> &'static str {
        match self.kind {
            Kind::Transform => "list_transform",
            Kind::Filter => "list_filter",
            Kind::Reduce => "list_reduce",
        }
    }
}

/// The element field of a (coerced) list argument.
fn element(list: &DataType) -> Result<&FieldRef> {
    match list {
        DataType::List(field) => Ok(field),
        _ => plan_err!("Invalid LIST argument during lambda function binding!"),
    }
}

/// The type a reduction accumulates in: the element's, widened to hold the initial value
/// and what the lambda returns, as DuckDB widens it (a BOOLEAN or NULL fits any).
pub(super) fn accumulator(element: &DataType, others: &[&DataType]) -> Result<DataType> {
    let mut to = element.clone();
    for other in others {
        if *other == &to || matches!(other, DataType::Null | DataType::Boolean) {
            continue;
        }
        let text =
            |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        match type_union_resolution(&[to.clone(), (*other).clone()]) {
            Some(union) if text(&union) == text(element) => to = union,
            _ => {
                return plan_err!(
                    "No common super type between list element type {} and lambda return type {}",
                    duckdb_type(element),
                    duckdb_type(other)
                );
            }
        }
    }
    Ok(to)
}

impl HigherOrderUDFImpl for ListLambda {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Transform => "array_transform",
            Kind::Filter => "array_filter",
            Kind::Reduce => "list_reduce",
        }
    }

    fn signature(&self) -> &HigherOrderSignature {
        &self.signature
    }

    fn coerce_value_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let arity = match self.kind {
            Kind::Reduce => 1..=2,
            _ => 1..=1,
        };
        if !arity.contains(&arg_types.len()) {
            return plan_err!(
                "{} takes a list, a lambda{}",
                self.duckdb_name(),
                if self.kind == Kind::Reduce {
                    " and an optional initial value"
                } else {
                    ""
                }
            );
        }
        let list = match &arg_types[0] {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                DataType::List(Arc::clone(f))
            }
            DataType::Null => DataType::new_list(DataType::Null, true),
            _ => return plan_err!("Invalid LIST argument during lambda function binding!"),
        };
        let mut out = vec![list];
        out.extend(arg_types[1..].iter().cloned());
        Ok(out)
    }

    fn lambda_parameters(
        &self,
        _step: usize,
        fields: &[ValueOrLambda<FieldRef, Option<FieldRef>>],
    ) -> Result<LambdaParametersProgress> {
        let (Some(ValueOrLambda::Value(list)), Some(ValueOrLambda::Lambda(_))) =
            (fields.first(), fields.get(1))
        else {
            return plan_err!("{} expects a list and a lambda", self.duckdb_name());
        };
        let element = Arc::new(
            element(list.data_type())?
                .as_ref()
                .clone()
                .with_nullable(true),
        );
        let index: FieldRef = Arc::new(Field::new("", DataType::Int64, false));
        let params = match self.kind {
            // The accumulator is an element: `ResolveLambdas` made the list of the
            // accumulator's type.
            Kind::Reduce => vec![Arc::clone(&element), element, index],
            _ => vec![element, index],
        };
        Ok(LambdaParametersProgress::Complete(vec![params]))
    }

    fn return_field_from_args(&self, args: HigherOrderReturnFieldArgs) -> Result<FieldRef> {
        let (Some(ValueOrLambda::Value(list)), Some(ValueOrLambda::Lambda(out))) =
            (args.arg_fields.first(), args.arg_fields.get(1))
        else {
            return plan_err!("{} expects a list and a lambda", self.duckdb_name());
        };
        let data_type = match self.kind {
            Kind::Transform => DataType::new_list(out.data_type().clone(), true),
            Kind::Filter => list.data_type().clone(),
            Kind::Reduce => element(list.data_type())?.data_type().clone(),
        };
        Ok(Arc::new(Field::new("", data_type, true)))
    }

    fn invoke_with_args(&self, args: HigherOrderFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let return_type = args.return_field.data_type().clone();
        let mut values = args.args.iter();
        let (Some(ValueOrLambda::Value(list)), Some(ValueOrLambda::Lambda(lambda))) =
            (values.next(), values.next())
        else {
            return exec_err!("{} expects a list and a lambda", self.duckdb_name());
        };
        let list = list.to_array(rows)?;
        if list.null_count() == list.len() {
            return Ok(ColumnarValue::Array(new_null_array(&return_type, rows)));
        }
        let Some(list) = list.as_list_opt::<i32>() else {
            return exec_err!(
                "{} expects a list, got {}",
                self.duckdb_name(),
                list.data_type()
            );
        };
        let offsets = adjust_offsets_for_slice(list);
        let first = list.value_offsets()[0] as usize;
        let elements = list
            .values()
            .slice(first, offsets.last().copied().unwrap_or(0) as usize);
        let result: ArrayRef = match self.kind {
            Kind::Transform | Kind::Filter => {
                let out = each_element(lambda, list, &offsets, &elements)?;
                let field = match (&return_type, self.kind) {
                    (DataType::List(field), _) => Arc::clone(field),
                    _ => return exec_err!("{} returns a list", self.duckdb_name()),
                };
                if self.kind == Kind::Transform {
                    Arc::new(ListArray::try_new(
                        field,
                        offsets,
                        out,
                        list.nulls().cloned(),
                    )?)
                } else {
                    let Some(keep) = out.as_boolean_opt() else {
                        return exec_err!("{}'s lambda must return a BOOLEAN", self.duckdb_name());
                    };
                    let kept = kept_offsets(&offsets, keep);
                    // A NULL keeps nothing.
                    let keep = match keep.nulls() {
                        Some(nulls) => BooleanArray::new(keep.values() & nulls.inner(), None),
                        None => keep.clone(),
                    };
                    let elements = filter(&elements, &keep)?;
                    Arc::new(ListArray::try_new(
                        field,
                        kept,
                        elements,
                        list.nulls().cloned(),
                    )?)
                }
            }
            Kind::Reduce => {
                let initial = match values.next() {
                    Some(ValueOrLambda::Value(v)) => Some(v.to_array(rows)?),
                    _ => None,
                };
                let acc = reduce(lambda, list, &offsets, &elements, initial)?;
                cast(&acc, &return_type)?
            }
        };
        Ok(ColumnarValue::Array(result))
    }
}

/// The lambda over every element with its 1-based index, captures repeated per element.
fn each_element(
    lambda: &LambdaArgument,
    list: &ListArray,
    offsets: &OffsetBuffer<i32>,
    elements: &ArrayRef,
) -> Result<ArrayRef> {
    let index: ArrayRef = Arc::new(Int64Array::from_iter_values(
        offsets.windows(2).flat_map(|w| 1..=i64::from(w[1] - w[0])),
    ));
    let rows = list_values_row_number(list)?;
    let value = || Ok(Arc::clone(elements));
    let index = || Ok(Arc::clone(&index));
    lambda
        .evaluate(&[&value, &index], |captured| {
            Ok(take_arrays(captured, &rows, None)?)
        })?
        .into_array(elements.len())
}

/// Each list's new offsets once the elements `keep` leaves out are gone.
fn kept_offsets(offsets: &OffsetBuffer<i32>, keep: &BooleanArray) -> OffsetBuffer<i32> {
    OffsetBuffer::from_lengths(offsets.windows(2).map(|w| {
        (w[0] as usize..w[1] as usize)
            .filter(|&j| keep.is_valid(j) && keep.value(j))
            .count()
    }))
}

/// DuckDB's `list_reduce`: per list, the accumulator starts at the initial value (or
/// the first element) and takes the lambda of itself and each next element (with its
/// 1-based index). One lambda evaluation per position, over the lists that long.
fn reduce(
    lambda: &LambdaArgument,
    list: &ListArray,
    offsets: &OffsetBuffer<i32>,
    elements: &ArrayRef,
    initial: Option<ArrayRef>,
) -> Result<ArrayRef> {
    let rows = list.len();
    let element_type = elements.data_type().clone();
    let lengths: Vec<usize> = offsets.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
    let start = match initial {
        Some(_) => 0,
        None => {
            if (0..rows).any(|r| list.is_valid(r) && lengths[r] == 0) {
                return exec_err!(
                    "Invalid Input Error: Cannot perform list_reduce on an empty input list"
                );
            }
            1
        }
    };
    let mut acc = match initial {
        Some(initial) => cast(&initial, &element_type)?,
        None => {
            // Each list's first element (a NULL list's slot is never read).
            let firsts = UInt32Array::from_iter_values((0..rows).map(|r| {
                if lengths[r] == 0 {
                    0
                } else {
                    offsets[r] as u32
                }
            }));
            match elements.is_empty() {
                true => new_null_array(&element_type, rows),
                false => take(elements, &firsts, None)?,
            }
        }
    };
    let longest = lengths.iter().copied().max().unwrap_or(0);
    for position in start..longest {
        let active: Vec<u32> = (0..rows)
            .filter(|&r| list.is_valid(r) && lengths[r] > position)
            .map(|r| r as u32)
            .collect();
        let active = UInt32Array::from(active);
        let at = UInt32Array::from_iter_values(
            active
                .values()
                .iter()
                .map(|&r| offsets[r as usize] as u32 + position as u32),
        );
        let so_far = take(&acc, &active, None)?;
        let next = take(elements, &at, None)?;
        let index: ArrayRef = Arc::new(Int64Array::from_value(position as i64 + 1, active.len()));
        let out = lambda
            .evaluate(
                &[
                    &|| Ok(Arc::clone(&so_far)),
                    &|| Ok(Arc::clone(&next)),
                    &|| Ok(Arc::clone(&index)),
                ],
                |captured| Ok(take_arrays(captured, &active, None)?),
            )?
            .into_array(active.len())?;
        let out = cast(&out, &element_type)?;
        // Rows not this long keep their accumulator.
        let mut taken: Vec<(usize, usize)> = (0..rows).map(|r| (0, r)).collect();
        for (i, &r) in active.values().iter().enumerate() {
            taken[r as usize] = (1, i);
        }
        acc = interleave(&[acc.as_ref(), out.as_ref()], &taken)?;
    }
    // A NULL list reduces to NULL.
    match list.logical_nulls() {
        Some(nulls) => {
            let null = BooleanArray::new(!nulls.inner(), None);
            Ok(nullif(&acc, &null)?)
        }
        None => Ok(acc),
    }
}
