//! Streaming reads of target files: one row group (or one `read_batch_size` slice of it)
//! at a time, projected to the columns a phase needs.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, NullArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, SchemaRef};
use bytes::Bytes;
use deltalake::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use deltalake::parquet::arrow::async_reader::AsyncFileReader;
#[allow(deprecated)]
use deltalake::parquet::arrow::async_reader::{
    ParquetObjectReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use deltalake::parquet::arrow::{ProjectionMask, RowNumber};
use deltalake::parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
use deltalake::parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use deltalake::parquet::file::page_index::offset_index::OffsetIndexMetaData;
use futures::future::{BoxFuture, FutureExt};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::ObjectStore;

use crate::error::{DeltaLiteError, Result};
use crate::schema::conform::cast_column;
use crate::table::files::TargetFile;

pub(crate) type FileBuilder = ParquetRecordBatchStreamBuilder<TailReader>;

/// Bytes a target file is opened with, read from its end in one request: its footer and
/// its page index (about 40 bytes a page and column; 11 KiB for a 250,000-row file of
/// the engine benchmark). Opening then costs one request where the footer's length, the
/// metadata and the page index took one each: on a local disk each request is a
/// blocking-pool task (an open, a stat, thread wake-ups), on an object store a round
/// trip.
const TAIL_BYTES: u64 = 64 * 1024;

/// A Parquet file reader that reads the file's last [`TAIL_BYTES`] when its metadata is
/// first asked for and answers every later request inside them from memory.
pub(crate) struct TailReader {
    // `ParquetObjectReader` is deprecated upstream in favour of hand-written readers; it
    // is still the maintained object_store adapter and does what the rest needs.
    #[allow(deprecated)]
    inner: ParquetObjectReader,
    size: u64,
    /// Where the tail starts, and its bytes.
    tail: Option<(u64, Bytes)>,
}

impl TailReader {
    #[allow(deprecated)]
    fn new(store: Arc<dyn ObjectStore>, file: &TargetFile) -> Self {
        Self {
            inner: ParquetObjectReader::new(store, file.path.clone()).with_file_size(file.size),
            size: file.size,
            tail: None,
        }
    }

    fn cached(&self, range: &std::ops::Range<u64>) -> Option<Bytes> {
        let (start, bytes) = self.tail.as_ref()?;
        let end = start + bytes.len() as u64;
        (range.start >= *start && range.end <= end && range.start <= range.end)
            .then(|| bytes.slice((range.start - start) as usize..(range.end - start) as usize))
    }
}

impl AsyncFileReader for TailReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        match self.cached(&range) {
            Some(bytes) => futures::future::ready(Ok(bytes)).boxed(),
            None => self.inner.get_bytes(range),
        }
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Vec<Bytes>>> {
        match ranges
            .iter()
            .map(|r| self.cached(r))
            .collect::<Option<Vec<_>>>()
        {
            Some(all) => futures::future::ready(Ok(all)).boxed(),
            None => self.inner.get_byte_ranges(ranges),
        }
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        Box::pin(async move {
            if self.tail.is_none() {
                let start = self.size.saturating_sub(TAIL_BYTES);
                let bytes = self.inner.get_bytes(start..self.size).await?;
                self.tail = Some((start, bytes));
            }
            let mut reader = ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()));
            if let Some(options) = options {
                reader = reader
                    .with_column_index_policy(options.column_index_policy())
                    .with_offset_index_policy(options.offset_index_policy());
            }
            let size = self.size;
            Ok(Arc::new(reader.load_and_finish(self, size).await?))
        })
    }
}

/// Open a target file and read its footer.
pub(crate) async fn open(store: Arc<dyn ObjectStore>, file: &TargetFile) -> Result<FileBuilder> {
    Ok(ParquetRecordBatchStreamBuilder::new(TailReader::new(store, file)).await?)
}

/// Name of the virtual column that [`open_with_row_numbers`] adds.
const ROW_NUMBER: &str = "__deltalite_row_number";

/// Open a target file reading its footer and its page index (for page-level pruning).
/// Every batch read from it ends with a virtual column of each row's position in the file
/// (see [`row_numbers`]), whatever row groups and row selection the read skips.
pub(crate) async fn open_with_row_numbers(
    store: Arc<dyn ObjectStore>,
    file: &TargetFile,
) -> Result<FileBuilder> {
    let reader = TailReader::new(store, file);
    let row_number = Field::new(ROW_NUMBER, DataType::Int64, false).with_extension_type(RowNumber);
    let options = ArrowReaderOptions::new()
        .with_page_index_policy(PageIndexPolicy::from(true))
        .with_virtual_columns(vec![Arc::new(row_number)])?;
    Ok(ParquetRecordBatchStreamBuilder::new_with_options(reader, options).await?)
}

/// Whether the row numbers of a file's reads are positions in row-group order. The reader
/// numbers rows by the ordinals stored in the footer (assigned in order when absent);
/// a writer that stored other ordinals would make them disagree with a full read.
pub(crate) fn row_numbers_are_positions(metadata: &ParquetMetaData) -> bool {
    metadata
        .row_groups()
        .iter()
        .enumerate()
        .all(|(i, rg)| rg.ordinal().and_then(|o| usize::try_from(o).ok()) == Some(i))
}

/// The row-number column of a batch read from a file opened by [`open_with_row_numbers`].
pub(crate) fn row_numbers(batch: &RecordBatch) -> Result<&Int64Array> {
    // Virtual columns come after every projected column.
    batch
        .num_columns()
        .checked_sub(1)
        .filter(|&last| batch.schema_ref().field(last).name() == ROW_NUMBER)
        .and_then(|last| batch.column(last).as_primitive_opt::<Int64Type>())
        .ok_or_else(|| DeltaLiteError::Other("a probe read came without row numbers".into()))
}

/// Stream every row of a file, never fetching more than about `window_bytes` of pages at
/// once when the file has an offset index (then a window is a row range whose pages are
/// fetched alone, cut where a page of the row group's largest column starts), else one
/// row group at a time. Memory stays bounded even for files written as one huge row
/// group. Also returns the file's metadata.
#[allow(deprecated)]
pub(crate) async fn stream_file_windowed(
    store: Arc<dyn ObjectStore>,
    file: &TargetFile,
    batch_size: usize,
    window_bytes: usize,
) -> Result<(
    Arc<ParquetMetaData>,
    BoxStream<'static, Result<RecordBatch>>,
)> {
    let mut reader =
        ParquetObjectReader::new(Arc::clone(&store), file.path.clone()).with_file_size(file.size);
    let metadata = ArrowReaderMetadata::load_async(
        &mut reader,
        ArrowReaderOptions::new().with_page_index(true),
    )
    .await?;
    let parquet = Arc::clone(metadata.metadata());
    let has_offsets = parquet
        .offset_index()
        .is_some_and(|idx| idx.iter().all(|rg| !rg.is_empty()));
    let mut windows: Vec<(usize, usize, usize, usize)> = Vec::new();
    for (rg, meta) in parquet.row_groups().iter().enumerate() {
        let rows = meta.num_rows().max(0) as usize;
        let bytes = meta.compressed_size().max(1) as u64;
        let ranges = match parquet.offset_index().filter(|_| has_offsets) {
            Some(index) => {
                let window_rows = ((rows as u64 * window_bytes as u64 / bytes) as usize)
                    .max(batch_size)
                    .max(1);
                let starts = index.get(rg).map(|columns| page_starts(meta, columns));
                window_ranges(rows, window_rows, &starts.unwrap_or_default())
            }
            None => window_ranges(rows, rows.max(1), &[]),
        };
        windows.extend(
            ranges
                .into_iter()
                .map(|(start, len)| (rg, start, len, rows)),
        );
    }
    let path = file.path.clone();
    let size = file.size;
    let stream = stream::iter(windows)
        .then(move |(rg, start, len, rows)| {
            let reader =
                ParquetObjectReader::new(Arc::clone(&store), path.clone()).with_file_size(size);
            let metadata = metadata.clone();
            async move {
                let mut selectors = vec![RowSelector::skip(start), RowSelector::select(len)];
                if start + len < rows {
                    selectors.push(RowSelector::skip(rows - start - len));
                }
                let stream = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
                    .with_row_groups(vec![rg])
                    .with_row_selection(RowSelection::from(selectors))
                    .with_batch_size(batch_size)
                    .build()?;
                Ok::<_, crate::error::DeltaLiteError>(stream.map_err(Into::into))
            }
        })
        .try_flatten()
        .boxed();
    Ok((parquet, stream))
}

/// Rows at which the pages of a row group's largest column start: window cuts there
/// never split one of its pages, so no page of it is decompressed by two windows (a
/// window that starts inside a page must decode the page up to its first row).
fn page_starts(meta: &RowGroupMetaData, index: &[OffsetIndexMetaData]) -> Vec<usize> {
    let largest = meta
        .columns()
        .iter()
        .enumerate()
        .max_by_key(|(_, column)| column.compressed_size())
        .map(|(i, _)| i);
    largest
        .and_then(|i| index.get(i))
        .map(|column| {
            column
                .page_locations()
                .iter()
                .filter_map(|page| usize::try_from(page.first_row_index).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Split `rows` into consecutive `(start, len)` windows of at least `window_rows` each,
/// every cut placed on the first of the ascending `cuts` at or after the size is reached
/// (no cut: the rest is one window). Every window then ends where a page ends, so reads
/// overlap by no page of that column; a window grows past `window_rows` by at most one
/// page.
fn window_ranges(rows: usize, window_rows: usize, cuts: &[usize]) -> Vec<(usize, usize)> {
    let window_rows = window_rows.max(1);
    let mut windows = Vec::new();
    let mut start = 0;
    while start < rows {
        let wanted = start.saturating_add(window_rows);
        let end = if cuts.is_empty() {
            wanted.min(rows)
        } else {
            cuts[cuts.partition_point(|&c| c < wanted)..]
                .first()
                .copied()
                .unwrap_or(rows)
                .min(rows)
        };
        windows.push((start, end - start));
        start = end;
    }
    windows
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
) -> Result<ParquetRecordBatchStream<TailReader>> {
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

#[cfg(test)]
mod tests {
    use deltalake::parquet::file::metadata::{FileMetaData, RowGroupMetaData};
    use deltalake::parquet::schema::types::{SchemaDescriptor, Type};

    use super::*;

    fn metadata(ordinals: &[Option<i16>]) -> ParquetMetaData {
        let root = Type::group_type_builder("schema").build().unwrap();
        let schema = Arc::new(SchemaDescriptor::new(Arc::new(root)));
        let row_groups = ordinals
            .iter()
            .map(|ordinal| {
                let rg = RowGroupMetaData::builder(Arc::clone(&schema)).set_num_rows(10);
                match ordinal {
                    Some(o) => rg.set_ordinal(*o),
                    None => rg,
                }
                .build()
                .unwrap()
            })
            .collect();
        let file = FileMetaData::new(2, 10 * ordinals.len() as i64, None, None, schema, None);
        ParquetMetaData::new(file, row_groups)
    }

    #[test]
    fn windows_end_on_the_first_page_start_past_their_size() {
        // Pages of 100 rows; windows of at least 250 rows end at the next page start.
        let pages: Vec<usize> = (0..10).map(|p| p * 100).collect();
        assert_eq!(
            window_ranges(1000, 250, &pages),
            vec![(0, 300), (300, 300), (600, 300), (900, 100)]
        );
        // A window size that is a page boundary cuts exactly there.
        assert_eq!(window_ranges(1000, 500, &pages), vec![(0, 500), (500, 500)]);
        // One page larger than a window: the window grows to hold it whole.
        assert_eq!(
            window_ranges(1000, 10, &[0, 900]),
            vec![(0, 900), (900, 100)]
        );
    }

    #[test]
    fn windows_without_page_starts_split_by_size_and_cover_every_row() {
        assert_eq!(window_ranges(10, 4, &[]), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(window_ranges(10, 100, &[]), vec![(0, 10)]);
        assert_eq!(window_ranges(0, 4, &[]), vec![]);
        // A zero window size still makes progress.
        assert_eq!(window_ranges(2, 0, &[]).len(), 2);
    }

    #[test]
    fn row_numbers_are_positions_only_for_ordinals_in_file_order() {
        assert!(row_numbers_are_positions(&metadata(&[
            Some(0),
            Some(1),
            Some(2)
        ])));
        assert!(!row_numbers_are_positions(&metadata(&[Some(1), Some(0)])));
        assert!(!row_numbers_are_positions(&metadata(&[Some(0), Some(0)])));
        assert!(!row_numbers_are_positions(&metadata(&[None, None])));
    }
}
