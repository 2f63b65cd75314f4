//! The target side: which files of the snapshot belong to the touched partitions, and
//! which of those the Delta log statistics already rule out.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, StringArray,
    TimestampMicrosecondArray,
};
use arrow::compute::kernels::cmp::{gt_eq, lt_eq};
use arrow::compute::{and, cast};
use arrow::datatypes::DataType;
use delta_kernel::expressions::Scalar;

use crate::error::Result;
use crate::ops::upsert::source::{Layout, SourcePartition};
use crate::table::files::TargetFile;

pub(crate) use crate::table::files::field_of;

/// A kernel scalar as a one-element Arrow array of `to`, or `None` when it cannot be.
pub(crate) fn scalar_to_array(scalar: &Scalar, to: &DataType) -> Option<ArrayRef> {
    let array: ArrayRef = match scalar {
        Scalar::Integer(v) => Arc::new(Int32Array::from(vec![*v])),
        Scalar::Long(v) => Arc::new(Int64Array::from(vec![*v])),
        Scalar::Short(v) => Arc::new(Int16Array::from(vec![*v])),
        Scalar::Byte(v) => Arc::new(Int8Array::from(vec![*v])),
        Scalar::Float(v) => Arc::new(Float32Array::from(vec![*v])),
        Scalar::Double(v) => Arc::new(Float64Array::from(vec![*v])),
        Scalar::String(v) => Arc::new(StringArray::from(vec![v.as_str()])),
        Scalar::Boolean(v) => Arc::new(BooleanArray::from(vec![*v])),
        Scalar::Timestamp(v) => {
            Arc::new(TimestampMicrosecondArray::from(vec![*v]).with_timezone("UTC"))
        }
        Scalar::TimestampNtz(v) => Arc::new(TimestampMicrosecondArray::from(vec![*v])),
        Scalar::Date(v) => Arc::new(Date32Array::from(vec![*v])),
        Scalar::Binary(v) => Arc::new(BinaryArray::from(vec![v.as_slice()])),
        Scalar::Decimal(d) => Arc::new(
            Decimal128Array::from(vec![d.bits()])
                .with_precision_and_scale(d.precision(), d.scale() as i8)
                .ok()?,
        ),
        _ => return None,
    };
    if array.data_type() == to {
        return Some(array);
    }
    cast(&array, to).ok().filter(|a| a.null_count() == 0)
}

/// Rows of `values` inside `[min, max]` (either bound may be unknown). NULL rows are false.
pub(crate) fn within_bounds(
    values: &ArrayRef,
    min: Option<&ArrayRef>,
    max: Option<&ArrayRef>,
) -> Result<BooleanArray> {
    let mut mask = BooleanArray::from(vec![true; values.len()]);
    if let Some(min) = min {
        mask = and(&mask, &gt_eq(values, &arrow::array::Scalar::new(min))?)?;
    }
    if let Some(max) = max {
        mask = and(&mask, &lt_eq(values, &arrow::array::Scalar::new(max))?)?;
    }
    // NULL comparisons yield NULL; treat as "no".
    Ok(if mask.null_count() == 0 {
        mask
    } else {
        arrow::compute::prep_null_mask_filter(&mask)
    })
}

/// Bounds pruning is unsound for floats: statistics leave NaN out and may not order
/// signed zeros the way key equality does.
pub(crate) fn prunable(dt: &DataType) -> bool {
    !dt.is_floating()
}

/// Whether the log statistics of `file` allow it to hold a key of `part`.
pub(crate) fn stats_may_match(
    file: &TargetFile,
    part: &SourcePartition,
    layout: &Layout,
) -> Result<bool> {
    if file.num_records == Some(0) {
        return Ok(false);
    }
    let live_rows = part.null_key.iter().filter(|n| !**n).count();
    if live_rows == 0 {
        return Ok(false);
    }
    let mut mask: Option<BooleanArray> = None;
    for &k in &layout.key_columns {
        let field = layout.data_schema.field(k);
        let name = field.name();
        // A key column that is NULL in every row of the file cannot match.
        if let (Some(Scalar::Long(nulls)), Some(records)) =
            (field_of(&file.null_counts, name), file.num_records)
            && *nulls as usize == records
        {
            return Ok(false);
        }
        if !prunable(field.data_type()) {
            continue;
        }
        let min =
            field_of(&file.min_values, name).and_then(|s| scalar_to_array(s, field.data_type()));
        let max =
            field_of(&file.max_values, name).and_then(|s| scalar_to_array(s, field.data_type()));
        if min.is_none() && max.is_none() {
            continue;
        }
        if let (Some(sorted), [_]) = (part.index.sorted_ints(), layout.key_columns.as_slice()) {
            // One integer key, its source keys ascending: a binary search, not a pass
            // over the partition's keys for every file.
            let bound = |a: &Option<ArrayRef>| {
                a.as_ref().and_then(|a| {
                    let a = cast(a, &DataType::Int64).ok()?;
                    let a = a.as_any().downcast_ref::<Int64Array>()?;
                    a.is_valid(0).then(|| a.value(0))
                })
            };
            let lo = bound(&min).map_or(0, |min| sorted.partition_point(|&(k, _)| k < min));
            let hi = bound(&max).map_or(sorted.len(), |max| {
                sorted.partition_point(|&(k, _)| k <= max)
            });
            return Ok(lo < hi);
        }
        let col = part.batch.column(k);
        let m = within_bounds(col, min.as_ref(), max.as_ref())?;
        mask = Some(match mask {
            Some(prev) => and(&prev, &m)?,
            None => m,
        });
    }
    Ok(match mask {
        Some(m) => m.true_count() > 0,
        None => true,
    })
}
