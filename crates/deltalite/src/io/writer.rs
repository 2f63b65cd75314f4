//! Output files: delta-rs's streaming `PartitionWriter` (uploads as row groups complete,
//! Add actions with statistics), configured from the call's knobs. On object stores its
//! store is wrapped (`upload.rs`) so the call's multipart threshold and part size decide
//! how each file goes up, not delta-rs's process-wide part size.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use delta_kernel::table_properties::DataSkippingNumIndexedCols;
use deltalake::datafile::writer::{PartitionWriter, PartitionWriterConfig};
use deltalake::kernel::Add;
use deltalake::logstore::ObjectStoreRef;
use deltalake::parquet::basic::{Compression, Encoding};
use deltalake::parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use deltalake::parquet::file::properties::{
    DEFAULT_BLOOM_FILTER_NDV, WriterProperties, WriterPropertiesBuilder,
};
use deltalake::parquet::schema::types::ColumnPath;

use crate::error::Result;
use crate::io::upload::MultipartPolicy;
use crate::schema::partition::PartitionKey;

/// Uncompressed bytes at which a data page of a lookup column closes: about 1,000 64-bit
/// keys, where parquet's default (1 MiB, at most 20,000 rows) gives 20,000. A probe reads
/// only the pages whose page-index bounds admit one of its keys, and each page it reads is
/// decompressed whole: with 20,000-row pages, 39 keys spread over a 250,000-row file hit
/// all 13 pages of its key column; with 1,000-row pages, 39 of 250. The cost is a page
/// header and an index entry per page, and slightly worse compression of the key column.
const LOOKUP_PAGE_BYTES: usize = 8 * 1024;

/// How lookup columns are written: a bloom filter (probes skip row groups without the
/// key) and small pages (probes skip pages). A single-column key that is unique per row
/// gets no dictionary: every value is distinct, so parquet would fill a 1 MiB dictionary
/// page before falling back to plain pages, and a probe reading any page of the first
/// part would have to read that whole dictionary too.
fn lookup_properties(
    mut props: WriterPropertiesBuilder,
    columns: &[ColumnPath],
    unique_key: bool,
) -> WriterPropertiesBuilder {
    for column in columns {
        props = props
            .set_column_bloom_filter_enabled(column.clone(), true)
            .set_column_data_page_size_limit(column.clone(), LOOKUP_PAGE_BYTES);
    }
    if let ([column], true) = (columns, unique_key) {
        props = props.set_column_dictionary_enabled(column.clone(), false);
    }
    props
}

/// How the engine's writes compress pages (appends, upserts, type changes, and the
/// compaction of tables that write deletion vectors): Snappy, what delta-rs and Spark
/// write, and quicker to decode than ZSTD (a 16M-row scan of the same rows took
/// 1.1-1.3x as long from ZSTD(4) pages: bench/README.md). Compaction of other tables
/// writes ZSTD(4), as delta-rs's optimize does (`ops/compact.rs`).
pub(crate) const WRITE_COMPRESSION: Compression = Compression::SNAPPY;

/// How an append's files are encoded: [`WRITE_COMPRESSION`], parquet's defaults
/// otherwise (what delta-rs writes). Also what a server spools a client's rows into when that file is
/// then stored as it is, so such a file is encoded like any other append's.
pub fn append_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(WRITE_COMPRESSION)
        .build()
}

/// Builds writers that all share one configuration.
pub(crate) struct WriterFactory {
    store: ObjectStoreRef,
    data_schema: SchemaRef,
    properties: WriterProperties,
    target_file_size: NonZeroU64,
    write_batch_size: usize,
    upload_concurrency: usize,
    num_indexed_cols: DataSkippingNumIndexedCols,
    stats_columns: Option<Vec<String>>,
    row_group_bytes: usize,
    bloom_columns: Vec<ColumnPath>,
    /// Bytes an open file's upload may hold beyond its row group (see `writer_bytes`).
    upload_bytes: usize,
}

/// What the factory needs to know.
pub(crate) struct WriterSettings {
    pub data_schema: SchemaRef,
    /// Columns looked up by value (an upsert's keys), laid out so that a probe reads
    /// little of a file: see [`lookup_properties`].
    pub bloom_columns: Vec<String>,
    /// Whether `bloom_columns` is an upsert key, unique per row of the table.
    pub unique_key: bool,
    pub target_file_size: u64,
    /// Encoded bytes at which a row group closes (callers size it; a tiny value makes a
    /// row group per written batch).
    pub row_group_bytes: usize,
    /// Page compression: [`WRITE_COMPRESSION`], or ZSTD(4) for compaction of tables
    /// without deletion vectors (what delta-rs's optimize writes).
    pub compression: Compression,
    pub write_batch_size: usize,
    pub upload_concurrency: usize,
    pub num_indexed_cols: DataSkippingNumIndexedCols,
    pub stats_columns: Option<Vec<String>>,
    /// How output files go up; `None` leaves the store as it is (local tables, see
    /// [`MultipartPolicy::for_table`]).
    pub multipart: Option<MultipartPolicy>,
}

impl WriterFactory {
    pub(crate) fn new(store: ObjectStoreRef, settings: WriterSettings) -> Self {
        let row_group_bytes = settings.row_group_bytes.max(1);
        let mut props = WriterProperties::builder()
            .set_compression(settings.compression)
            .set_max_row_group_bytes(Some(row_group_bytes))
            .set_write_batch_size(settings.write_batch_size.min(8192));
        let bloom_columns: Vec<ColumnPath> = settings
            .bloom_columns
            .iter()
            .map(|name| ColumnPath::from(name.as_str()))
            .collect();
        props = lookup_properties(props, &bloom_columns, settings.unique_key);
        let upload_concurrency = settings.upload_concurrency.max(1);
        // delta-rs rolls to a new file once the encoded size reaches the target, checking
        // between slices, so a file is about the target plus one row group: the most an
        // upload can hold whatever the threshold (all of it, with threshold 0).
        let file_bytes = usize::try_from(settings.target_file_size)
            .unwrap_or(usize::MAX)
            .saturating_add(row_group_bytes);
        let (store, upload_bytes) = match settings.multipart {
            Some(policy) => (
                policy.wrap(store),
                policy.held_bytes(row_group_bytes, upload_concurrency, file_bytes),
            ),
            None => (store, 0),
        };
        Self {
            store,
            data_schema: settings.data_schema,
            properties: props.build(),
            target_file_size: NonZeroU64::new(settings.target_file_size.max(1))
                .unwrap_or(NonZeroU64::MIN),
            write_batch_size: settings.write_batch_size,
            upload_concurrency,
            num_indexed_cols: settings.num_indexed_cols,
            stats_columns: settings.stats_columns,
            row_group_bytes,
            bloom_columns,
            upload_bytes,
        }
    }

    /// Bytes one open writer may hold, for budgeting: its row group twice (a closing row
    /// group's encoded pages are copied into the async writer's buffer before they go to
    /// storage, and both exist until the copy is done: measured, one rewrite task peaks at
    /// about twice its row group plus its read window), plus on object stores what its
    /// upload holds before and between parts (up to the multipart threshold; see
    /// `MultipartPolicy::held_bytes`). Local uploads stream to disk and add nothing.
    /// Files the writer already closed and still uploads in the background are bounded by
    /// delta-rs's own upload budget (`DELTARS_MAX_IN_FLIGHT_UPLOAD_BYTES`), not this.
    pub(crate) fn writer_bytes(&self) -> usize {
        self.writer_bytes_for(u64::MAX)
    }

    /// [`Self::writer_bytes`] for a writer whose output is about `output_bytes`: a small
    /// file's row group never grows to the row group limit, so rewrites of small files
    /// reserve little and many run at once, while rewrites of large ones are bounded by
    /// the budget.
    pub(crate) fn writer_bytes_for(&self, output_bytes: u64) -> usize {
        let row_group = usize::try_from(output_bytes)
            .unwrap_or(usize::MAX)
            .min(self.row_group_bytes);
        row_group
            .saturating_mul(2)
            .saturating_add(self.upload_bytes)
    }

    /// A new writer for one partition.
    pub(crate) fn partition_writer(&self, partition: &PartitionKey) -> Result<OutputWriter> {
        self.writer_with(partition, self.properties.clone())
    }

    /// A writer for the rewrite of a stored file, which learns from how the stored file
    /// encoded: columns whose stored data pages were not all dictionary-encoded (the
    /// writer gave up on the dictionary, or never used one) are written without one, and
    /// columns the stored file could not compress are written uncompressed. Trying again
    /// would only build and drop a dictionary per page, or spend CPU on Snappy to save
    /// nothing: the payload of a rewrite is mostly the stored rows.
    pub(crate) fn partition_writer_like(
        &self,
        partition: &PartitionKey,
        stored: &ParquetMetaData,
    ) -> Result<OutputWriter> {
        let Some(row_group) = stored.row_groups().first() else {
            return self.partition_writer(partition);
        };
        let mut props = self.properties.clone().into_builder();
        for column in row_group.columns() {
            let Some(data_pages) = column.page_encoding_stats_mask() else {
                continue;
            };
            let all_dictionary = column.dictionary_page_offset().is_some()
                && (data_pages.is_only(Encoding::RLE_DICTIONARY)
                    || data_pages.is_only(Encoding::PLAIN_DICTIONARY));
            if !all_dictionary {
                props = props.set_column_dictionary_enabled(column.column_path().clone(), false);
            }
            if incompressible(column) {
                props = props.set_column_compression(
                    column.column_path().clone(),
                    Compression::UNCOMPRESSED,
                );
            }
        }
        // Size bloom filters for the rows an output row group will hold (the stored
        // file's bytes per row tell how many fit), not parquet's default of a million
        // distinct values: filling a 1 MiB filter per row group per key column (folded
        // down only when the group closes) cost ~10% of a rewrite's CPU in cache misses
        // and freshly zeroed pages.
        if let Some(ndv) = rows_per_row_group(stored, self.row_group_bytes) {
            for column in &self.bloom_columns {
                props = props.set_column_bloom_filter_max_ndv(column.clone(), ndv);
            }
        }
        self.writer_with(partition, props.build())
    }

    fn writer_with(
        &self,
        partition: &PartitionKey,
        properties: WriterProperties,
    ) -> Result<OutputWriter> {
        let config = PartitionWriterConfig::try_new(
            Arc::clone(&self.data_schema),
            partition.values.clone(),
            Some(properties),
            Some(self.target_file_size),
            Some(self.write_batch_size),
            Some(self.upload_concurrency),
            None,
        )?;
        let inner = PartitionWriter::try_with_config(
            Arc::clone(&self.store),
            config,
            self.num_indexed_cols,
            self.stats_columns.clone(),
        )?;
        Ok(OutputWriter {
            inner,
            collections: collection_columns(
                &self.data_schema,
                self.num_indexed_cols,
                self.stats_columns.is_some(),
            ),
            nulls: HashMap::new(),
        })
    }
}

/// An output writer: delta-rs's `PartitionWriter`, plus the NULL counts of list and map
/// columns, which delta-rs's statistics leave out. Delta's `nullCount` of such a column
/// is the number of NULL lists (maps); the Parquet leaf's null count that older delta-rs
/// (and PostHog's deltalite) wrote there also counts empty lists and NULL elements, and
/// could make a reader skip a file for `col IS NOT NULL` that holds non-NULL lists. The
/// exact count is known only from the rows themselves, so it is added when all the rows
/// written went into one file.
pub(crate) struct OutputWriter {
    inner: PartitionWriter,
    /// `(position, name)` of the top-level list and map columns with statistics.
    collections: Vec<(usize, String)>,
    /// NULL values seen so far, per such column.
    nulls: HashMap<String, usize>,
}

impl OutputWriter {
    /// Write `batch` (in the writer's data schema).
    pub(crate) async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        for (i, name) in &self.collections {
            if let Some(column) = batch.columns().get(*i) {
                *self.nulls.entry(name.clone()).or_default() += column.null_count();
            }
        }
        self.inner.write(batch).await?;
        Ok(())
    }

    /// Finish the files; their Add actions, with the collections' `nullCount` when the
    /// rows went into one file.
    pub(crate) async fn close(self) -> Result<Vec<Add>> {
        let mut adds = self.inner.close().await?;
        if let ([add], false) = (adds.as_mut_slice(), self.collections.is_empty()) {
            add.stats = add
                .stats
                .take()
                .map(|stats| with_null_counts(stats, &self.nulls));
        }
        Ok(adds)
    }
}

/// The top-level list and map columns of `schema` that get statistics: delta-rs's
/// selection (the first `num_indexed_cols` top-level columns; with explicit
/// `delta.dataSkippingStatsColumns` it names leaf columns, which a collection never
/// matches, so none).
fn collection_columns(
    schema: &SchemaRef,
    num_indexed_cols: DataSkippingNumIndexedCols,
    explicit_columns: bool,
) -> Vec<(usize, String)> {
    if explicit_columns {
        return Vec::new();
    }
    let limit = match num_indexed_cols {
        DataSkippingNumIndexedCols::AllColumns => usize::MAX,
        DataSkippingNumIndexedCols::NumColumns(n) => n as usize,
    };
    schema
        .fields()
        .iter()
        .enumerate()
        .take(limit)
        .filter(|(_, f)| {
            matches!(
                f.data_type(),
                DataType::List(_)
                    | DataType::LargeList(_)
                    | DataType::FixedSizeList(..)
                    | DataType::ListView(_)
                    | DataType::LargeListView(_)
                    | DataType::Map(..)
            )
        })
        .map(|(i, f)| (i, f.name().clone()))
        .collect()
}

/// `stats` (an Add's statistics JSON) with `nulls` added to its `nullCount` where it has
/// none for the column. Statistics that do not parse are left as they are.
fn with_null_counts(stats: String, nulls: &HashMap<String, usize>) -> String {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&stats) else {
        return stats;
    };
    let Some(counts) = value
        .get_mut("nullCount")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return stats;
    };
    for (name, count) in nulls {
        counts
            .entry(name.clone())
            .or_insert_with(|| serde_json::Value::from(*count));
    }
    value.to_string()
}

/// Whether Snappy saved less than a tenth of a stored column chunk (random bytes, hashes,
/// already-compressed blobs; what it still finds there is mostly the plain encoding's
/// length prefixes): compressing it again costs CPU on every write and read for little.
fn incompressible(column: &ColumnChunkMetaData) -> bool {
    let (compressed, raw) = (column.compressed_size(), column.uncompressed_size());
    column.compression() != Compression::UNCOMPRESSED && raw > 0 && compressed * 10 >= raw * 9
}

/// Rows that fit a row group of `row_group_bytes` at the stored file's encoded bytes per
/// row, within `[1024, parquet's default ndv]`.
fn rows_per_row_group(stored: &ParquetMetaData, row_group_bytes: usize) -> Option<u64> {
    let (rows, bytes) = stored
        .row_groups()
        .iter()
        .fold((0i64, 0i64), |(rows, bytes), rg| {
            (rows + rg.num_rows(), bytes + rg.compressed_size())
        });
    if rows <= 0 || bytes <= 0 {
        return None;
    }
    let bytes_per_row = (bytes as f64 / rows as f64).max(1.0);
    let fit = (row_group_bytes as f64 / bytes_per_row).ceil() as u64;
    Some(fit.clamp(1024, DEFAULT_BLOOM_FILTER_NDV))
}

/// Abort a writer's partial uploads after a failure. object_store's buffered writer
/// panics when asked to abort an upload whose flush already failed ("Already shut down");
/// that panic is caught here, since the upload is gone either way.
pub(crate) async fn abort(writer: OutputWriter) {
    abort_with(writer.inner.abort()).await;
}

/// Like [`abort`], for delta-rs's `DeltaWriter`.
pub(crate) async fn abort_delta_writer(writer: deltalake::datafile::writer::DeltaWriter) {
    abort_with(writer.abort()).await;
}

async fn abort_with<E: std::fmt::Display>(
    aborting: impl std::future::Future<Output = std::result::Result<(), E>>,
) {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(aborting).catch_unwind().await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "failed to abort a partial upload"),
        Err(_) => tracing::warn!("aborting a failed upload panicked in the store's writer"),
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};

    use crate::options::MIB;

    use super::*;

    fn factory(target_file_size: u64, multipart: Option<MultipartPolicy>) -> WriterFactory {
        WriterFactory::new(
            Arc::new(object_store::memory::InMemory::new()),
            WriterSettings {
                data_schema: Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)])),
                bloom_columns: Vec::new(),
                unique_key: false,
                target_file_size,
                row_group_bytes: 8 * MIB,
                compression: Compression::SNAPPY,
                write_batch_size: 1024,
                upload_concurrency: 2,
                num_indexed_cols: DataSkippingNumIndexedCols::AllColumns,
                stats_columns: None,
                multipart,
            },
        )
    }

    #[test]
    fn list_and_map_columns_get_their_null_count_added_to_the_statistics() {
        let item = Arc::new(Field::new("item", DataType::Int64, true));
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("tags", DataType::List(item.clone()), true),
            Field::new("more", DataType::LargeList(item), true),
        ]));
        let all = collection_columns(&schema, DataSkippingNumIndexedCols::AllColumns, false);
        assert_eq!(all, vec![(1, "tags".to_string()), (2, "more".to_string())]);
        // The first two top-level columns only, or explicit (leaf) stats columns: fewer.
        let two = collection_columns(&schema, DataSkippingNumIndexedCols::NumColumns(2), false);
        assert_eq!(two, vec![(1, "tags".to_string())]);
        assert!(
            collection_columns(&schema, DataSkippingNumIndexedCols::AllColumns, true).is_empty()
        );

        let nulls = HashMap::from([("tags".to_string(), 3), ("id".to_string(), 9)]);
        let patched = with_null_counts(
            r#"{"numRecords":5,"nullCount":{"id":1},"minValues":{}}"#.to_string(),
            &nulls,
        );
        let v: serde_json::Value = serde_json::from_str(&patched).unwrap();
        // A count delta-rs wrote stays; a missing one is added.
        assert_eq!(v["nullCount"], serde_json::json!({"id": 1, "tags": 3}));
        assert_eq!(v["numRecords"], 5);
        // Float bounds survive the round trip exactly (a max one ulp low would let a reader
        // skip the file for its own largest value).
        let floats = with_null_counts(
            r#"{"nullCount":{},"maxValues":{"f":126.33333333333333,"g":109.66666666666667}}"#
                .to_string(),
            &nulls,
        );
        let v: serde_json::Value = serde_json::from_str(&floats).unwrap();
        assert_eq!(v["maxValues"]["f"].as_f64(), Some(379.0 / 3.0));
        assert_eq!(v["maxValues"]["g"].as_f64(), Some(329.0 / 3.0));
        assert!(floats.contains("126.33333333333333") && floats.contains("109.66666666666667"));
        // Statistics without nullCount (or unparsable) are left alone.
        let bare = r#"{"numRecords":5}"#.to_string();
        assert_eq!(with_null_counts(bare.clone(), &nulls), bare);
    }

    #[test]
    fn writer_budget_covers_the_upload_buffer_on_object_stores_only() {
        let target = 100 * MIB as u64;
        // The open row group and its flushed copy.
        assert_eq!(factory(target, None).writer_bytes(), 16 * MIB);
        // An object store: the file may sit in memory up to the 64 MiB threshold.
        let policy = MultipartPolicy::new(64 * MIB, 16 * MIB);
        let held = factory(target, Some(policy)).writer_bytes();
        assert!(held >= 16 * MIB + 64 * MIB, "{held}");
        // Small files cannot hold more than themselves (target plus one row group).
        let small = factory(MIB as u64, Some(policy)).writer_bytes();
        assert_eq!(small, 16 * MIB + MIB + 8 * MIB);
    }

    #[test]
    fn a_small_output_reserves_its_own_size_not_a_full_row_group() {
        let local = factory(100 * MIB as u64, None);
        assert_eq!(local.writer_bytes_for(300 * 1024), 600 * 1024);
        assert_eq!(local.writer_bytes_for(u64::MAX), local.writer_bytes());
        assert_eq!(local.writer_bytes_for(9 * MIB as u64), 16 * MIB);
    }
}
