//! The table provider every Delta table is scanned through: delta-rs's own, with two
//! corrections.
//!
//! - delta-rs 1.1 claims to apply exactly any pushed-down filter that names no column (it
//!   takes such a filter for a partition-only one), then drops it: a filter the planner
//!   folded to a constant (`WHERE k NOT IN (1, NULL)` → `… AND NULL`, a MERGE clause `AND
//!   FALSE`) returned rows it should not. Filters without columns stay above the scan
//!   here, where DataFusion evaluates them.
//! - delta-rs reads a table that has deletion vectors in one stream (it numbers each
//!   file's rows as they arrive), so everything above the scan ran on one core: a full
//!   scan took 3x its copy-on-write time. Such a table is scanned here as a union of one
//!   delta-rs scan per group of files (delta-rs's own file selection), as many groups as
//!   the session has target partitions, balanced by size: each file is still read whole
//!   by one stream, and the groups run side by side. Files without a vector get groups
//!   of their own: delta-rs pushes a query's predicate into the Parquet reader (row
//!   groups, pages) only for a scan none of whose files has a vector.
//! - The files with vectors themselves are one Parquet scan of ours when the table allows
//!   (`sql/vector_scan.rs`: each vector a row selection, the predicate pruning as for any
//!   file), so a selective query no longer reads each of them whole.
//! - delta-rs lists a table's files newest commit first, so `SELECT * FROM t` after two
//!   `INSERT`s showed the second one's rows first. A table without vectors is read oldest
//!   file first ([`oldest_first`]): rows come back in the order they were written, as in
//!   DuckDB, as long as the scan is one stream (DataFusion splits a scan of more than
//!   `repartition_file_min_size` bytes into partitions read side by side).

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result;
use datafusion::common::Statistics;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig, FileScanConfigBuilder};
use datafusion::datasource::source::DataSourceExec;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::union::UnionExec;
use deltalake::DeltaTable;
use deltalake::delta_datafusion::DeltaScanNext;
use deltalake::kernel::Add;

use super::vector_scan::{VectorFile, VectorTable};

/// A Delta table as the session scans it (see the module documentation).
#[derive(Debug)]
pub(crate) struct DeltaScan {
    inner: Arc<dyn TableProvider>,
    /// The table's files when any has a deletion vector (else empty): scanned in groups.
    files: Vec<ScanFile>,
    /// Its files with vectors and how our own scan reads them; `None` when delta-rs reads
    /// them (in groups of `files`).
    vectors: Option<(VectorTable, Vec<VectorFile>)>,
}

impl DeltaScan {
    pub(crate) fn wrap(inner: Arc<dyn TableProvider>) -> Arc<dyn TableProvider> {
        Arc::new(Self {
            inner,
            files: Vec::new(),
            vectors: None,
        })
    }

    /// `inner`, delta-rs's provider of `table`, scanned in groups of files when the table
    /// has deletion vectors.
    pub(crate) fn of_table(
        table: &DeltaTable,
        inner: Arc<dyn TableProvider>,
    ) -> deltalake::DeltaResult<Arc<dyn TableProvider>> {
        let state = table.snapshot()?;
        let log = state.log_data();
        let files = if log.iter().any(|f| f.deletion_vector_descriptor().is_some()) {
            log.iter()
                .map(|f| ScanFile {
                    path: f.path().into_owned(),
                    size: f.size(),
                    vector: f.deletion_vector_descriptor().is_some(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let vectors = if files.is_empty() {
            None
        } else {
            VectorTable::of(table)?
        };
        Ok(Arc::new(Self {
            inner,
            files,
            vectors,
        }))
    }

    /// Whether `provider` is a Delta table scanned through this wrapper.
    pub(crate) fn is_delta(provider: &dyn TableProvider) -> bool {
        provider
            .downcast_ref::<Self>()
            .is_some_and(|s| s.inner.is::<DeltaScanNext>())
    }

    /// The files with vectors in up to `n` groups of about equal bytes, then those
    /// without in up to `n` more (largest first, each to the lightest group), as the Adds
    /// delta-rs selects files by (their path is what its own `add_action` gives: decoded).
    fn groups(&self, n: usize) -> Vec<Vec<Add>> {
        let (mut marked, plain): (Vec<&ScanFile>, Vec<&ScanFile>) =
            self.files.iter().partition(|f| f.vector);
        if self.vectors.is_some() {
            // Read by our own scan.
            marked.clear();
        }
        [marked, plain]
            .into_iter()
            .flat_map(|files| {
                let sized = files.into_iter().map(|file| {
                    let add = Add {
                        path: file.path.clone(),
                        size: file.size,
                        ..Add::default()
                    };
                    (file.size.max(0) as u64, add)
                });
                balanced(sized.collect(), n)
            })
            .collect()
    }
}

/// `plan` with the files of each of its Parquet scans in the opposite order, and its
/// groups too: delta-rs lists files newest commit first (its log replay's order), and
/// this reads them in the order they were committed. Only for scans without deletion
/// vectors: delta-rs's scan of those validates its files' placement.
fn oldest_first(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(config) = node
            .downcast_ref::<DataSourceExec>()
            .and_then(|exec| exec.data_source().downcast_ref::<FileScanConfig>())
        else {
            return Ok(Transformed::no(node));
        };
        let groups: Vec<FileGroup> = config
            .file_groups
            .iter()
            .rev()
            .map(|group| {
                let files = group.files().iter().rev().cloned().collect();
                match group.file_statistics(None) {
                    Some(stats) => FileGroup::new(files).with_statistics(Arc::new(stats.clone())),
                    None => FileGroup::new(files),
                }
            })
            .collect();
        let config = FileScanConfigBuilder::from(config.clone())
            .with_file_groups(groups)
            .build();
        Ok(Transformed::yes(
            DataSourceExec::from_data_source(config) as Arc<dyn ExecutionPlan>
        ))
    })
    .map(|t| t.data)
}

/// `items` (each with its size) in up to `n` groups of about equal size: largest first,
/// each to the lightest group.
pub(crate) fn balanced<T>(mut items: Vec<(u64, T)>, n: usize) -> Vec<Vec<T>> {
    items.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
    let mut groups: Vec<(u64, Vec<T>)> = (0..n.min(items.len())).map(|_| (0, Vec::new())).collect();
    for (size, item) in items {
        if let Some(lightest) = groups.iter_mut().min_by_key(|(bytes, _)| *bytes) {
            lightest.0 += size;
            lightest.1.push(item);
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// A file of a table with deletion vectors, as [`DeltaScan::groups`] sorts it.
#[derive(Debug)]
struct ScanFile {
    /// Decoded, relative to the table root.
    path: String,
    size: i64,
    vector: bool,
}

#[async_trait]
impl TableProvider for DeltaScan {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let partitions = state.config().target_partitions();
        let next = self.inner.downcast_ref::<DeltaScanNext>();
        let Some(next) = next.filter(|_| self.vectors.is_some() || self.files.len() > 1) else {
            let plan = self.inner.scan(state, projection, filters, limit).await?;
            return oldest_first(plan);
        };
        let mut plans = Vec::new();
        for group in self.groups(partitions) {
            let scan = next.clone().with_adds(group);
            plans.push(scan.scan(state, projection, filters, limit).await?);
        }
        if let Some((table, files)) = &self.vectors {
            let files: Vec<&VectorFile> = files.iter().collect();
            let schema = self.inner.schema();
            plans.push(
                table
                    .scan(
                        &files, &schema, state, projection, filters, limit, partitions,
                    )
                    .await?,
            );
        }
        if plans.len() == 1 {
            return Ok(plans.remove(0));
        }
        UnionExec::try_new(plans)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let answers = self.inner.supports_filters_pushdown(filters)?;
        Ok(filters
            .iter()
            .zip(answers)
            .map(|(filter, answer)| {
                if filter.column_refs().is_empty() {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    answer
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        self.inner.statistics()
    }
}
