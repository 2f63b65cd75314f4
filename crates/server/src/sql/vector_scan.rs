//! The scan of a table's files that have deletion vectors: one DataFusion Parquet scan in
//! which each file's vector is a row selection the reader skips, and the query's
//! predicate prunes row groups (statistics, bloom filters) and pages (page index).
//!
//! delta-rs 1.1 reads such files whole, in one stream, without the predicate, and drops
//! the deleted rows after decoding them. A selective query on a table that merge-on-read
//! upserts have written to then reads every file with a vector in full: the new row
//! versions sit in files whose keys span the table, so no log statistic rules them out,
//! and their vectors kept delta-rs from pushing the predicate. Here the vector only
//! narrows what the reader decodes (`ParquetRowSelection`, checked against the file's
//! row count when it is opened), so pruning is as for any file.
//!
//! A query that asks a column for given values (`k = v`, `k IN (…)`: point lookups by
//! key) skips, before anything is planned, the files whose log bounds or bloom filters
//! hold none of them: merge-on-read leaves each upsert's new row versions in a file that
//! spans the table's keys, so a lookup would otherwise open every one of those files.
//! The check reads the footer through the runtime's metadata cache and only the filter
//! blocks the values hash to (`deltalite::may_hold_any`); a file's vector is read only
//! when the file is scanned.
//!
//! Used for the plain case only ([`VectorTable::of`]): no column mapping (the stored
//! column names are the table's), every file with a vector has its `numRecords`. Anything
//! else is read through delta-rs as before (`sql/scan.rs`).

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{Field, FieldRef, Schema, SchemaRef};
use chrono::{TimeZone, Utc};
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{
    ColumnStatistics, DFSchema, DataFusionError, Result, ScalarValue, Statistics,
};
use datafusion::config::TableParquetOptions;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, ParquetRowSelection,
};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{Expr, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use delta_kernel::expressions::Scalar;
use deltalake::DeltaTable;
use deltalake::kernel::DeletionVectorDescriptor;
use deltalake::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use deltalake::parquet::file::metadata::PageIndexPolicy;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use url::Url;

/// A file with a deletion vector, as the scan reads it.
#[derive(Debug)]
pub(crate) struct VectorFile {
    /// Relative to the table root, as the object store spells it.
    relative: Path,
    size: u64,
    rows: u64,
    /// In the table's partition-column order; `None` for NULL.
    partition_values: Vec<Option<String>>,
    vector: DeletionVectorDescriptor,
    /// The log's per-column bounds (a struct of columns), for pruning whole files.
    min_values: Option<Scalar>,
    max_values: Option<Scalar>,
}

/// What a scan of a table's files with vectors needs.
#[derive(Debug)]
pub(crate) struct VectorTable {
    table_url: Url,
    /// The table's own store, rooted at the table: where its vectors are read from.
    store: Arc<dyn ObjectStore>,
    partition_columns: Vec<String>,
}

impl VectorTable {
    /// The table's files with vectors and how to scan them; `None` when the table needs
    /// delta-rs's reader (column mapping, or a file with a vector but no row count).
    pub(crate) fn of(
        table: &DeltaTable,
    ) -> deltalake::DeltaResult<Option<(Self, Vec<VectorFile>)>> {
        let state = table.snapshot()?;
        let mapped = state
            .metadata()
            .configuration()
            .get("delta.columnMapping.mode")
            .is_some_and(|mode| mode != "none");
        if mapped {
            return Ok(None);
        }
        let partition_columns = state.metadata().partition_columns().to_vec();
        let mut files = Vec::new();
        for view in state.log_data().iter() {
            let Some(vector) = view.deletion_vector_descriptor() else {
                continue;
            };
            let Some(rows) = view.num_records() else {
                return Ok(None);
            };
            let values = view.partition_values_map();
            files.push(VectorFile {
                relative: view.object_store_path(),
                size: view.size().max(0) as u64,
                rows: rows as u64,
                partition_values: partition_columns
                    .iter()
                    .map(|c| values.get(c).cloned().flatten())
                    .collect(),
                vector,
                min_values: view.min_values(),
                max_values: view.max_values(),
            });
        }
        Ok(Some((
            Self {
                table_url: table.table_url().clone(),
                store: table.object_store(),
                partition_columns,
            },
            files,
        )))
    }

    /// One Parquet scan of `files` in up to `partitions` groups, with the columns of
    /// `projection` of `schema` (the table's, as its provider reports it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn scan(
        &self,
        files: &[&VectorFile],
        schema: &SchemaRef,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
        partitions: usize,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let is_partition = |f: &Field| self.partition_columns.iter().any(|c| c == f.name());
        let stored: Vec<FieldRef> = schema
            .fields()
            .iter()
            .filter(|f| !is_partition(f))
            .cloned()
            .collect();
        let partition_fields: Vec<FieldRef> = self
            .partition_columns
            .iter()
            .map(|c| schema.field_with_name(c).map(|f| Arc::new(f.clone())))
            .collect::<std::result::Result<_, _>>()?;
        let table_schema = TableSchema::builder(Arc::new(Schema::new(stored)))
            .with_table_partition_cols(partition_fields.clone())
            .build();
        let full = Arc::clone(table_schema.table_schema());

        let store_url = ObjectStoreUrl::parse(crate::sql::stores::store_key(&self.table_url))?;
        let store = state.runtime_env().object_store(&store_url)?;
        let metadata_cache = state.runtime_env().cache_manager.get_file_metadata_cache();
        let root = Path::from_url_path(self.table_url.path())?;
        let lookups = Lookup::of(filters, &full, &self.partition_columns);
        let reader = Reader {
            store: &store,
            metadata_cache: &metadata_cache,
            lookups: &lookups,
            table_schema: &full,
            partition_fields: &partition_fields,
        };
        // Collected first: a lazy map of borrowing futures is not `Send` enough for the
        // provider's boxed future.
        let pending: Vec<_> = files.iter().map(|f| self.file(f, &root, &reader)).collect();
        let read: Vec<(u64, PartitionedFile)> = futures::stream::iter(pending)
            .buffer_unordered(8)
            .try_filter_map(|file| async move { Ok(file) })
            .try_collect()
            .await?;

        let groups = super::scan::balanced(read, partitions.max(1));

        // The session's Parquet settings (page index, bloom filters on read, plain types).
        let options = TableParquetOptions {
            global: state.config_options().execution.parquet.clone(),
            ..Default::default()
        };
        // Footers and page indexes through the runtime's metadata cache, shared by every
        // session (as delta-rs's own scans do): a file's metadata is read once, not on
        // every query that opens it.
        let reader = CachedParquetFileReaderFactory::new(store, metadata_cache);
        let mut source = ParquetSource::new(table_schema)
            .with_table_parquet_options(options)
            .with_parquet_file_reader_factory(Arc::new(reader))
            .with_pushdown_filters(false);
        // The provider answers filters on partition columns only as exact (delta-rs's
        // answer): DataFusion keeps no filter of its own for them, so they are applied
        // here, after they have pruned whole files. Every other filter stays above the
        // scan, and DataFusion's filter pushdown hands it to this source for pruning
        // (pushdown_filters off: rows are filtered above, not while decoding).
        let exact: Vec<Expr> = filters
            .iter()
            .flat_map(split_conjunction)
            .filter(|e| {
                let columns = e.column_refs();
                !columns.is_empty()
                    && columns
                        .iter()
                        .all(|c| self.partition_columns.iter().any(|p| p == c.name()))
            })
            .cloned()
            .collect();
        let exact = match conjunction(exact) {
            Some(expr) => {
                let columns = DFSchema::try_from(full.as_ref().clone())?;
                let on_table = state.create_physical_expr(expr.clone(), &columns)?;
                source = source.with_predicate(on_table);
                Some(expr)
            }
            None => None,
        };
        let wanted: Vec<usize> = match projection {
            Some(indices) => indices.clone(),
            None => (0..schema.fields().len()).collect(),
        };
        let mut indices = wanted
            .iter()
            .map(|&i| full.index_of(schema.field(i).name()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // The exact filter's columns, read too when the query does not ask for them.
        if let Some(expr) = &exact {
            for column in expr.column_refs() {
                let i = full.index_of(column.name())?;
                if !indices.contains(&i) {
                    indices.push(i);
                }
            }
        }
        let read_columns = indices.len();
        let config = FileScanConfigBuilder::new(store_url, Arc::new(source))
            .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
            .with_projection_indices(Some(indices))?
            .with_limit(if exact.is_some() { None } else { limit })
            .build();
        let scan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
        let Some(expr) = exact else {
            return Ok(scan);
        };
        let columns = DFSchema::try_from(scan.schema().as_ref().clone())?;
        let predicate = state.create_physical_expr(expr, &columns)?;
        let filtered: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(predicate, scan)?);
        if read_columns == wanted.len() {
            return Ok(filtered);
        }
        let output = filtered.schema();
        let keep = (0..wanted.len())
            .map(|i| {
                (
                    Arc::new(Column::new(output.field(i).name(), i)) as Arc<dyn PhysicalExpr>,
                    output.field(i).name().to_string(),
                )
            })
            .collect::<Vec<_>>();
        Ok(Arc::new(ProjectionExec::try_new(keep, filtered)?))
    }
}

/// What reading one file of the scan needs besides the file.
struct Reader<'a> {
    store: &'a Arc<dyn ObjectStore>,
    metadata_cache: &'a Arc<FileMetadataCache>,
    lookups: &'a [Lookup],
    table_schema: &'a Schema,
    partition_fields: &'a [FieldRef],
}

impl VectorTable {
    /// `f` as the scan reads it (its partition values typed, its vector a row
    /// selection), or `None` when the query's lookups rule it out.
    async fn file(
        &self,
        f: &VectorFile,
        root: &Path,
        reader: &Reader<'_>,
    ) -> Result<Option<(u64, PartitionedFile)>> {
        let location = Path::from_iter(root.parts().chain(f.relative.parts()));
        let meta = ObjectMeta {
            location,
            last_modified: Utc.timestamp_nanos(0),
            size: f.size,
            e_tag: None,
            version: None,
        };
        let statistics = bounds(f, reader.table_schema);
        if !reader.may_match(&meta, &statistics).await? {
            return Ok(None);
        }
        let deleted = deltalite::deleted_positions(&self.store, &self.table_url, &f.vector)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let partition_values = f
            .partition_values
            .iter()
            .zip(reader.partition_fields)
            .map(|(value, field)| match value {
                Some(v) => ScalarValue::try_from_string(v.clone(), field.data_type()),
                None => ScalarValue::try_from(field.data_type()),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut file = PartitionedFile::from(meta)
            .with_partition_values(partition_values)
            .with_extension(ParquetRowSelection::new(live_rows(&deleted, f.rows)));
        file.statistics = Some(Arc::new(statistics));
        Ok(Some((f.size, file)))
    }
}

/// A conjunct of the query that holds only where a column equals one of some values:
/// `c = v`, `c IN (v, …)` or `c = v1 OR c = v2`, the values literals of the column's own type (NULLs left
/// out: they match nothing).
#[derive(Debug)]
struct Lookup {
    /// The column's index in the table schema.
    index: usize,
    name: String,
    values: Vec<ScalarValue>,
    /// `values` as one array, for the bloom filter check.
    array: ArrayRef,
}

impl Lookup {
    /// The lookups among `filters` (the provider's conjuncts), on stored columns.
    fn of(filters: &[Expr], schema: &Schema, partition_columns: &[String]) -> Vec<Self> {
        filters
            .iter()
            .flat_map(split_conjunction)
            .filter_map(|e| {
                let (column, values) = Self::wanted(e)?;
                if partition_columns.iter().any(|p| p == &column.name) {
                    return None;
                }
                let index = schema.index_of(&column.name).ok()?;
                let wanted = schema.field(index).data_type();
                let values: Vec<ScalarValue> =
                    values.into_iter().filter(|v| !v.is_null()).collect();
                if values.is_empty() || values.iter().any(|v| &v.data_type() != wanted) {
                    return None;
                }
                let array = ScalarValue::iter_to_array(values.iter().cloned()).ok()?;
                Some(Self {
                    index,
                    name: column.name.clone(),
                    values,
                    array,
                })
            })
            .collect()
    }

    /// The column `e` asks to equal one of some literals, and those literals: `c = v`,
    /// `c IN (v, …)`, and `OR`s of them on one column (DataFusion's simplifier writes a
    /// short `IN` list as `c = v1 OR c = v2`).
    fn wanted(e: &Expr) -> Option<(&datafusion::common::Column, Vec<ScalarValue>)> {
        match e {
            Expr::BinaryExpr(b) if b.op == Operator::Eq => {
                match (b.left.as_ref(), b.right.as_ref()) {
                    (Expr::Column(c), Expr::Literal(v, _))
                    | (Expr::Literal(v, _), Expr::Column(c)) => Some((c, vec![v.clone()])),
                    _ => None,
                }
            }
            Expr::BinaryExpr(b) if b.op == Operator::Or => {
                let (left, mut values) = Self::wanted(&b.left)?;
                let (right, more) = Self::wanted(&b.right)?;
                if left != right {
                    return None;
                }
                values.extend(more);
                Some((left, values))
            }
            Expr::InList(list) if !list.negated => {
                let Expr::Column(c) = list.expr.as_ref() else {
                    return None;
                };
                let values = list
                    .list
                    .iter()
                    .map(|v| match v {
                        Expr::Literal(v, _) => Some(v.clone()),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some((c, values))
            }
            _ => None,
        }
    }

    /// Whether the column's bounds (`statistics`, when known) admit one of the values.
    fn within(&self, statistics: &Statistics) -> bool {
        let column = &statistics.column_statistics[self.index];
        let (Some(min), Some(max)) = (column.min_value.get_value(), column.max_value.get_value())
        else {
            return true;
        };
        self.values.iter().any(|v| {
            !matches!(v.partial_cmp(min), Some(std::cmp::Ordering::Less))
                && !matches!(v.partial_cmp(max), Some(std::cmp::Ordering::Greater))
        })
    }
}

impl Reader<'_> {
    /// Whether the file at `meta` may hold a row every lookup admits: its log bounds
    /// first, then, in each row group, the bloom filters of the looked-up columns.
    async fn may_match(&self, meta: &ObjectMeta, statistics: &Statistics) -> Result<bool> {
        if self.lookups.is_empty() {
            return Ok(true);
        }
        if !self.lookups.iter().all(|l| l.within(statistics)) {
            return Ok(false);
        }
        // Without the page index: the files ruled out never need it, and DataFusion
        // adds it to the cached footer when it opens the others.
        let metadata = DFParquetMetadata::new(self.store.as_ref(), meta)
            .with_file_metadata_cache(Some(Arc::clone(self.metadata_cache)))
            .with_page_index_policy(Some(PageIndexPolicy::Skip))
            .fetch_metadata()
            .await?;
        for group in metadata.row_groups() {
            let mut admitted = true;
            for lookup in self.lookups {
                let Some(column) = group
                    .columns()
                    .iter()
                    .find(|c| matches!(c.column_path().parts(), [name] if *name == lookup.name))
                else {
                    continue;
                };
                let held =
                    deltalite::may_hold_any(self.store, &meta.location, column, &lookup.array)
                        .await
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                if held == Some(false) {
                    admitted = false;
                    break;
                }
            }
            if admitted {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// What DataFusion may skip a whole file by before opening it: the log's bounds of its
/// integer, date, timestamp and decimal columns. They are bounds, not tight (the rows
/// the vector deletes are within them too), which pruning only needs; nothing else is
/// claimed (row and NULL counts stay unknown), so no aggregate is answered from them.
/// String bounds are left out: the log may cut them to a prefix.
fn bounds(f: &VectorFile, table_schema: &Schema) -> Statistics {
    let bound = |values: &Option<Scalar>, field: &Field| -> Option<ScalarValue> {
        let Some(Scalar::Struct(data)) = values else {
            return None;
        };
        let at = data
            .fields()
            .iter()
            .position(|c| c.name() == field.name())?;
        let value = match &data.values()[at] {
            Scalar::Long(v) => ScalarValue::Int64(Some(*v)),
            Scalar::Integer(v) => ScalarValue::Int32(Some(*v)),
            Scalar::Short(v) => ScalarValue::Int16(Some(*v)),
            Scalar::Byte(v) => ScalarValue::Int8(Some(*v)),
            Scalar::Date(v) => ScalarValue::Date32(Some(*v)),
            Scalar::Timestamp(v) => ScalarValue::TimestampMicrosecond(Some(*v), Some("UTC".into())),
            Scalar::TimestampNtz(v) => ScalarValue::TimestampMicrosecond(Some(*v), None),
            Scalar::Decimal(d) => {
                ScalarValue::Decimal128(Some(d.bits()), d.precision(), d.scale() as i8)
            }
            _ => return None,
        };
        value.cast_to(field.data_type()).ok()
    };
    let column_statistics = table_schema
        .fields()
        .iter()
        .map(|field| {
            let mut column = ColumnStatistics::new_unknown();
            if let (Some(min), Some(max)) =
                (bound(&f.min_values, field), bound(&f.max_values, field))
            {
                column.min_value = Precision::Exact(min);
                column.max_value = Precision::Exact(max);
            }
            column
        })
        .collect();
    Statistics {
        num_rows: Precision::Absent,
        total_byte_size: Precision::Absent,
        column_statistics,
    }
}

/// The rows of a file of `rows` rows that `deleted` (ascending positions) leaves.
fn live_rows(deleted: &[u64], rows: u64) -> RowSelection {
    let mut selectors = Vec::with_capacity(2 * deleted.len() + 1);
    let mut next = 0u64;
    for &position in deleted {
        if position > next {
            selectors.push(RowSelector::select((position - next) as usize));
        }
        selectors.push(RowSelector::skip(1));
        next = position + 1;
    }
    if rows > next {
        selectors.push(RowSelector::select((rows - next) as usize));
    }
    // `From` merges neighbouring skips.
    RowSelection::from(selectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_rows_skip_exactly_the_deleted_positions() {
        let selection = live_rows(&[0, 1, 5, 9], 10);
        let selectors: Vec<(bool, usize)> =
            selection.iter().map(|s| (s.skip, s.row_count)).collect();
        assert_eq!(
            selectors,
            vec![(true, 2), (false, 3), (true, 1), (false, 3), (true, 1)]
        );
        assert_eq!(selection.row_count(), 6);
        let none = live_rows(&[], 4);
        assert_eq!(none.row_count(), 4);
        let all = live_rows(&[0, 1, 2], 3);
        assert_eq!(all.row_count(), 0);
    }
}
