//! Bringing batches to the table's schema: by column name, with checked casts.
//!
//! Source batches are strict (an unknown column is an error, a lossy cast is an error).
//! Stored batches read back from older files are lenient (columns added later by schema
//! evolution come back as NULL) but still cast to the table's current types.
//!
//! A column a source batch leaves out is NULL, or its default when the column has one
//! ([`COLUMN_DEFAULT_KEY`]): every write path (appends, upserts, SQL `INSERT`, ingest)
//! conforms here, so a default applies wherever a row is written without the column.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array, new_null_array};
use arrow::compute::kernels::cast::{CastOptions, can_cast_types, cast_with_options};
use arrow::compute::kernels::cmp::distinct;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::error::{DeltaLiteError, Result};

/// The field metadata key of a column's default: the value as text, cast to the
/// column's type when a written batch leaves the column out. Not Delta's
/// `CURRENT_DEFAULT` (an expression, behind the `allowColumnDefaults` writer feature
/// delta-rs cannot write): other readers ignore this key and see the stored values.
pub const COLUMN_DEFAULT_KEY: &str = "deltalite.default";

/// `rows` copies of the default `text` of column `field` (its type's value).
pub fn default_column(field: &Field, text: &str, rows: usize) -> Result<ArrayRef> {
    let one: ArrayRef = Arc::new(StringArray::from(vec![text]));
    let value = cast_with_options(&one, field.data_type(), &STRICT).map_err(|e| {
        DeltaLiteError::schema(format!(
            "column {:?}: its default {text:?} is not a {}: {e}",
            field.name(),
            field.data_type()
        ))
    })?;
    let zeros = UInt32Array::from(vec![0u32; rows]);
    Ok(arrow::compute::take(value.as_ref(), &zeros, None)?)
}

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
/// columns become their default, or NULL (refused for non-nullable columns).
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
                if let Some(text) = field.metadata().get(COLUMN_DEFAULT_KEY) {
                    carried.push(false);
                    columns.push(default_column(field, text, batch.num_rows())?);
                    continue;
                }
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

    #[test]
    fn a_column_left_out_is_its_default_or_null() {
        let defaulted = |name: &str, dt: DataType, text: &str| {
            Field::new(name, dt, true).with_metadata(
                [(COLUMN_DEFAULT_KEY.to_string(), text.to_string())]
                    .into_iter()
                    .collect(),
            )
        };
        let target = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            defaulted("tag", DataType::Utf8, "dummy_value"),
            defaulted("n", DataType::Int32, "-7"),
            Field::new("plain", DataType::Utf8, true),
        ]));
        let source = RecordBatch::try_from_iter([(
            "id",
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
        )])
        .unwrap();
        let conformed = conform_source(&source, &target).unwrap();
        assert_eq!(conformed.carried, [true, false, false, false]);
        let b = &conformed.batch;
        assert_eq!(
            b.column(1).as_ref(),
            &StringArray::from(vec!["dummy_value", "dummy_value"]) as &dyn Array
        );
        assert_eq!(
            b.column(2).as_ref(),
            &Int32Array::from(vec![-7, -7]) as &dyn Array
        );
        assert_eq!(b.column(3).null_count(), 2);
        // A default the column's type cannot hold names the column and the value.
        let bad = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            defaulted("n", DataType::Int32, "seven"),
        ]));
        let err = conform_source(&source, &bad).err().expect("refused");
        assert!(
            err.to_string()
                == "schema mismatch: column \"n\": its default \"seven\" is not a Int32: \
                    Cast error: Cannot cast string 'seven' to value of Int32 type",
            "{err}"
        );
    }
}
