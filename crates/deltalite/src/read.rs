//! Streaming reads of target files: one row group (or one `read_batch_size` slice of it)
//! at a time, projected to the columns a phase needs.

use std::sync::Arc;

use arrow::array::{ArrayRef, NullArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use deltalake::parquet::arrow::ProjectionMask;
#[allow(deprecated)]
use deltalake::parquet::arrow::async_reader::{
    ParquetObjectReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use object_store::ObjectStore;

use crate::conform::cast_column;
use crate::error::Result;
use crate::target::TargetFile;

// `ParquetObjectReader` is deprecated upstream in favour of hand-written readers; it is
// still the maintained object_store adapter and does exactly what we need.
#[allow(deprecated)]
pub(crate) type FileBuilder = ParquetRecordBatchStreamBuilder<ParquetObjectReader>;

/// Open a target file and read its footer.
#[allow(deprecated)]
pub(crate) async fn open(store: Arc<dyn ObjectStore>, file: &TargetFile) -> Result<FileBuilder> {
    let reader = ParquetObjectReader::new(store, file.path.clone()).with_file_size(file.size);
    Ok(ParquetRecordBatchStreamBuilder::new(reader).await?)
}

/// Columns of the data schema, by position, that a file actually holds.
pub(crate) fn present_roots(
    builder: &FileBuilder,
    data_schema: &SchemaRef,
    wanted: &[usize],
) -> Vec<(usize, usize)> {
    let file_schema = builder.schema();
    wanted
        .iter()
        .filter_map(|&i| {
            file_schema
                .index_of(data_schema.field(i).name())
                .ok()
                .map(|root| (i, root))
        })
        .collect()
}

/// Stream only the given root columns of the given row groups.
#[allow(deprecated)]
pub(crate) fn stream_projected(
    builder: FileBuilder,
    roots: &[usize],
    row_groups: Vec<usize>,
    batch_size: usize,
) -> Result<ParquetRecordBatchStream<ParquetObjectReader>> {
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    Ok(builder
        .with_projection(mask)
        .with_row_groups(row_groups)
        .with_batch_size(batch_size)
        .build()?)
}

/// A batch read with a projection, laid out by data-schema position: the wanted columns
/// cast to the table's types, every other position a zero-cost `NullArray`.
pub(crate) fn sparse_columns(
    batch: &RecordBatch,
    data_schema: &SchemaRef,
    wanted: &[usize],
) -> Result<Vec<ArrayRef>> {
    let rows = batch.num_rows();
    let schema = batch.schema();
    let mut columns: Vec<ArrayRef> = (0..data_schema.fields().len())
        .map(|_| Arc::new(NullArray::new(rows)) as ArrayRef)
        .collect();
    for &i in wanted {
        let field = data_schema.field(i);
        columns[i] = match schema.index_of(field.name()) {
            Ok(idx) => cast_column(field.name(), batch.column(idx), field.data_type())?,
            Err(_) => arrow::array::new_null_array(field.data_type(), rows),
        };
    }
    Ok(columns)
}
