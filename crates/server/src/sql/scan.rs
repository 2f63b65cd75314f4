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

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result;
use datafusion::common::Statistics;
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
            return self.inner.scan(state, projection, filters, limit).await;
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
