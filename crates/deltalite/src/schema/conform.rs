//! Bringing batches to the table's schema: by column name, with checked casts.
//!
//! Source batches are strict (an unknown column is an error, a lossy cast is an error).
//! Stored batches read back from older files are lenient (columns added later by schema
//! evolution come back as NULL) but still cast to the table's current types.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, new_null_array};
use arrow::compute::kernels::cast::{CastOptions, can_cast_types, cast_with_options};
use arrow::compute::kernels::cmp::distinct;
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::error::{DeltaLiteError, Result};

const STRICT: CastOptions<'static> = CastOptions {
    safe: false,
    format_options: arrow::util::display::FormatOptions::new(),
};

fn is_numeric_or_temporal(dt: &DataType) -> bool {
    dt.is_numeric() || dt.is_temporal()
}

/// Cast one column, refusing overflow, unparsable strings and silent truncation.
pub(crate) fn cast_column(name: &str, array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    let from = array.data_type();
    if from == to {
        return Ok(Arc::clone(array));
    }
    if !can_cast_types(from, to) {
        return Err(DeltaLiteError::schema(format!(
            "column {name:?}: cannot cast {from} to the table's type {to}"
        )));
    }
    let cast = cast_with_options(array, to, &STRICT).map_err(|e| {
        DeltaLiteError::schema(format!(
            "column {name:?}: value does not fit the table's type {to}: {e}"
        ))
    })?;
    // A numeric cast that succeeded may still have rounded (1.5 -> 1, scale reduction,
    // nanoseconds -> microseconds): cast back and compare.
    if is_numeric_or_temporal(from) && is_numeric_or_temporal(to) {
        let back = cast_with_options(&cast, from, &STRICT).map_err(|e| {
            DeltaLiteError::schema(format!("column {name:?}: value does not fit {to}: {e}"))
        })?;
        let changed = distinct(array, &back)?;
        if changed.true_count() > 0 {
            return Err(DeltaLiteError::schema(format!(
                "column {name:?}: {} value(s) would be truncated casting {from} to the table's type {to}",
                changed.true_count()
            )));
        }
    }
    Ok(cast)
}

/// A source batch conformed to `target`, plus which target columns it carried.
pub(crate) struct Conformed {
    pub batch: RecordBatch,
    pub carried: Vec<bool>,
}

/// Conform a caller's batch: every column must exist in `target`; missing target
/// columns become NULL (refused for non-nullable columns).
pub(crate) fn conform_source(batch: &RecordBatch, target: &SchemaRef) -> Result<Conformed> {
    let schema = batch.schema();
    for field in schema.fields() {
        if target.index_of(field.name()).is_err() {
            return Err(DeltaLiteError::schema(format!(
                "column {:?} is not in the table (table columns: {})",
                field.name(),
                target
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let mut carried = Vec::with_capacity(target.fields().len());
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        match schema.index_of(field.name()) {
            Ok(idx) => {
                carried.push(true);
                let column = cast_column(field.name(), batch.column(idx), field.data_type())?;
                if !field.is_nullable() && column.null_count() > 0 {
                    return Err(DeltaLiteError::schema(format!(
                        "column {:?} is not nullable but the batch has {} NULL(s)",
                        field.name(),
                        column.null_count()
                    )));
                }
                columns.push(column);
            }
            Err(_) => {
                if !field.is_nullable() && batch.num_rows() > 0 {
                    return Err(DeltaLiteError::schema(format!(
                        "column {:?} is not nullable and the batch does not carry it",
                        field.name()
                    )));
                }
                carried.push(false);
                columns.push(new_null_array(field.data_type(), batch.num_rows()));
            }
        }
    }
    let batch = RecordBatch::try_new_with_options(
        Arc::clone(target),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?;
    Ok(Conformed { batch, carried })
}

/// Conform a batch read from a stored file: unknown columns are ignored, missing ones
/// are NULL, types are cast to the table's current types.
pub(crate) fn conform_stored(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
    let schema = batch.schema();
    let columns = target
        .fields()
        .iter()
        .map(|field| match schema.index_of(field.name()) {
            Ok(idx) => cast_column(field.name(), batch.column(idx), field.data_type()),
            Err(_) => Ok(new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(target),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// `schema` without the named columns (the layout of data files in a partitioned table).
pub(crate) fn without_columns(schema: &Schema, drop: &[String]) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .filter(|f| !drop.iter().any(|d| d == f.name()))
            .cloned()
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array, Int64Array, StringArray};

    #[test]
    fn lossless_casts_pass_and_lossy_ones_name_the_column() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let wide = cast_column("id", &ints, &DataType::Int64).unwrap();
        assert_eq!(wide.data_type(), &DataType::Int64);

        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 1.5]));
        let err = cast_column("amount", &floats, &DataType::Int64).unwrap_err();
        assert!(matches!(err, DeltaLiteError::SchemaMismatch(_)));
        assert!(err.to_string().contains("amount"), "{err}");

        let big: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX]));
        let err = cast_column("n", &big, &DataType::Int32).unwrap_err();
        assert!(err.to_string().contains("\"n\""), "{err}");

        let text: ArrayRef = Arc::new(StringArray::from(vec!["12", "x"]));
        let err = cast_column("qty", &text, &DataType::Int64).unwrap_err();
        assert!(err.to_string().contains("qty"), "{err}");
    }
}
