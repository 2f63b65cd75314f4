//! Parquet readers whose failed footer reads keep the store's error.
//!
//! DataFusion 55.2's `ParquetFileReader::get_metadata` turns a failed footer read into
//! text ("Failed to fetch metadata for file …: {e}"). A scan opens each file's footer as
//! it executes, so a throttled or reset read there lost its cause, and
//! `deltalite::error::is_transient` answered it as final: a query on a flaky store failed
//! for good where a retry would have succeeded. Page reads keep their error already.
//!
//! [`KeepStoreErrors`] wraps the reader factory of every Parquet scan in a plan
//! (delta-rs's, ours in `sql/vector_scan.rs`, any other): the scan's own reader still
//! reads the footer, through its cache; only when that fails is the footer fetched once
//! more straight from the store, and that fetch's result is the answer, an error with
//! the store's error as its source.
//!
//! One scan keeps its readers: delta-rs's scan of a table with deletion vectors (the
//! server's DML reads one) accepts only the Parquet sources it planned. It reads the
//! footers of its files with vectors while planning, keeping the cause; for its other
//! files the rule puts [`KeepFooterErrorsExec`] above it, which recovers the cause from
//! the failed stream: it reads the footer that DataFusion's text names once more.

use std::sync::Arc;

use bytes::Bytes;
use datafusion::common::Result;
use datafusion::common::Statistics;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::datasource::physical_plan::parquet::{
    DefaultParquetFileReaderFactory, ParquetFileReaderFactory,
};
use datafusion::datasource::physical_plan::{FileScanConfig, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::DataFusionError;
use datafusion::execution::object_store::ObjectStoreRegistry;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, replace_children_if_necessary,
};
use deltalake::delta_datafusion::DeltaScanExec;
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::AsyncFileReader;
use deltalake::parquet::errors::{ParquetError, Result as ParquetResult};
use deltalake::parquet::file::metadata::ParquetMetaData;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use object_store::{ObjectMeta, ObjectStore};

/// See the module documentation. Holds the session's store registry: a scan's store is
/// the one its `object_store_url` names there, as when it executes.
#[derive(Debug)]
pub(crate) struct KeepStoreErrors {
    stores: Arc<dyn ObjectStoreRegistry>,
}

impl KeepStoreErrors {
    pub(crate) fn new(stores: Arc<dyn ObjectStoreRegistry>) -> Self {
        Self { stores }
    }

    /// `plan` with every Parquet scan's readers wrapped; a delta-rs scan that refuses
    /// changed Parquet sources instead under a [`KeepFooterErrorsExec`].
    fn rewrite(&self, plan: Arc<dyn ExecutionPlan>) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
        plan.transform_down(|node| {
            if let Some(scan) = self.wrapped(&node)? {
                return Ok(Transformed::yes(scan));
            }
            if node.downcast_ref::<DeltaScanExec>().is_none() {
                return Ok(Transformed::no(node));
            }
            // delta-rs's scan of files with deletion vectors accepts only the Parquet
            // sources it planned (it checks them by identity,
            // `DeltaScanExec::validate_dv_child_topology`): there its own readers stay,
            // and the node above it recovers a failed footer read's cause. Its other
            // scans take ours.
            let mut changed = false;
            let mut children = Vec::new();
            for child in node.children() {
                let child = self.rewrite(Arc::clone(child))?;
                changed |= child.transformed;
                children.push(child.data);
            }
            if !changed {
                return Ok(Transformed::new(node, false, TreeNodeRecursion::Jump));
            }
            let scan = match replace_children_if_necessary(Arc::clone(&node), children) {
                Ok(scan) => scan,
                Err(_) => {
                    let files = self.files(&node)?;
                    Arc::new(KeepFooterErrorsExec::new(node, files))
                }
            };
            Ok(Transformed::new(scan, true, TreeNodeRecursion::Jump))
        })
    }

    /// Every file the Parquet scans under `plan` read, with its store.
    fn files(&self, plan: &Arc<dyn ExecutionPlan>) -> Result<Vec<ScanFile>> {
        let mut files = Vec::new();
        plan.apply(|node| {
            if let Some(config) = node
                .downcast_ref::<DataSourceExec>()
                .and_then(|exec| exec.data_source().downcast_ref::<FileScanConfig>())
            {
                let store = self.stores.get_store(config.object_store_url.as_ref())?;
                for file in config.file_groups.iter().flat_map(|g| g.iter()) {
                    files.push(ScanFile {
                        meta: file.object_meta.clone(),
                        store: Arc::clone(&store),
                    });
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(files)
    }

    /// A Parquet scan with its reader factory wrapped in [`Factory`]; `None` for any other
    /// node.
    fn wrapped(&self, node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(exec) = node.downcast_ref::<DataSourceExec>() else {
            return Ok(None);
        };
        let Some(config) = exec.data_source().downcast_ref::<FileScanConfig>() else {
            return Ok(None);
        };
        let Some(parquet) = config.file_source().downcast_ref::<ParquetSource>() else {
            return Ok(None);
        };
        let store = self.stores.get_store(config.object_store_url.as_ref())?;
        // A source without a factory of its own reads through DataFusion's default.
        let inner = parquet
            .parquet_file_reader_factory()
            .cloned()
            .unwrap_or_else(|| Arc::new(DefaultParquetFileReaderFactory::new(Arc::clone(&store))));
        let source = parquet
            .clone()
            .with_parquet_file_reader_factory(Arc::new(Factory { inner, store }));
        let config = FileScanConfigBuilder::from(config.clone())
            .with_source(Arc::new(source))
            .build();
        Ok(Some(Arc::new(
            exec.clone().with_data_source(Arc::new(config)),
        )))
    }
}

impl PhysicalOptimizerRule for KeepStoreErrors {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.rewrite(plan).data()
    }

    fn name(&self) -> &str {
        "keep_store_errors"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A scan's reader factory, its readers wrapped in [`Reader`].
#[derive(Debug)]
struct Factory {
    inner: Arc<dyn ParquetFileReaderFactory>,
    store: Arc<dyn ObjectStore>,
}

impl ParquetFileReaderFactory for Factory {
    fn create_reader(
        &self,
        partition_index: usize,
        partitioned_file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let file = partitioned_file.object_meta.clone();
        let inner = self.inner.create_reader(
            partition_index,
            partitioned_file,
            metadata_size_hint,
            metrics,
        )?;
        Ok(Box::new(Reader {
            inner,
            store: Arc::clone(&self.store),
            file,
            metadata_size_hint,
        }))
    }
}

/// The scan's own reader, except when its footer read fails (see the module
/// documentation).
struct Reader {
    inner: Box<dyn AsyncFileReader + Send>,
    store: Arc<dyn ObjectStore>,
    file: ObjectMeta,
    metadata_size_hint: Option<usize>,
}

impl AsyncFileReader for Reader {
    fn get_bytes(&mut self, range: std::ops::Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        self.inner.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, ParquetResult<Vec<Bytes>>> {
        self.inner.get_byte_ranges(ranges)
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
        async move {
            if let Ok(metadata) = self.inner.get_metadata(options).await {
                return Ok(metadata);
            }
            // The scan's reader failed and kept only text: read the footer again, as it
            // does (the same page index policy), to answer with the cause.
            DFParquetMetadata::new(self.store.as_ref(), &self.file)
                .with_metadata_size_hint(self.metadata_size_hint)
                .with_page_index_policy(options.map(|o| o.column_index_policy()))
                .fetch_metadata()
                .await
                .map_err(|source| {
                    ParquetError::External(Box::new(FooterUnread {
                        path: self.file.location.clone(),
                        source,
                    }))
                })
        }
        .boxed()
    }
}

/// A footer that could not be read, with the cause as its source.
#[derive(Debug, thiserror::Error)]
#[error("Failed to fetch metadata for file {path}: {source}")]
struct FooterUnread {
    path: object_store::path::Path,
    source: DataFusionError,
}

/// A file a scan reads, and the store it reads it from.
#[derive(Debug, Clone)]
struct ScanFile {
    meta: ObjectMeta,
    store: Arc<dyn ObjectStore>,
}

/// Above a scan whose readers cannot be wrapped: its stream, except that a failed footer
/// read (DataFusion's text "Failed to fetch metadata for file {path}: …" naming one of
/// `files`) is answered with a second read's cause. The stream has ended by then, so a
/// second read that succeeds still fails the statement, as a store failure that went away
/// (transient).
#[derive(Debug)]
pub(crate) struct KeepFooterErrorsExec {
    input: Arc<dyn ExecutionPlan>,
    files: Arc<[ScanFile]>,
}

impl KeepFooterErrorsExec {
    fn new(input: Arc<dyn ExecutionPlan>, files: Vec<ScanFile>) -> Self {
        Self {
            input,
            files: files.into(),
        }
    }
}

impl DisplayAs for KeepFooterErrorsExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "KeepFooterErrorsExec")
    }
}

impl ExecutionPlan for KeepFooterErrorsExec {
    fn name(&self) -> &str {
        "KeepFooterErrorsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(Self {
                input,
                files: Arc::clone(&self.files),
            })),
            _ => datafusion::common::internal_err!("KeepFooterErrorsExec has one child"),
        }
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        match input_stats.first() {
            Some(stats) => Ok(Arc::clone(stats)),
            None => Ok(Arc::new(Statistics::new_unknown(&self.schema()))),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let files = Arc::clone(&self.files);
        let stream = self.input.execute(partition, context)?.then(move |batch| {
            let files = Arc::clone(&files);
            async move {
                match batch {
                    Err(e) => Err(footer_cause(e, &files).await),
                    ok => ok,
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            stream,
        )))
    }
}

/// `e`, or when it is a failed footer read of one of `files` that lost its cause, the
/// cause of a second read (see [`KeepFooterErrorsExec`]).
async fn footer_cause(e: DataFusionError, files: &[ScanFile]) -> DataFusionError {
    if deltalite::error::is_transient(&e) {
        return e;
    }
    let text = e.to_string();
    let Some(file) = files.iter().find(|f| {
        text.contains(&format!(
            "Failed to fetch metadata for file {}: ",
            f.meta.location
        ))
    }) else {
        return e;
    };
    let cause = match DFParquetMetadata::new(file.store.as_ref(), &file.meta)
        .fetch_metadata()
        .await
    {
        Err(source) => source,
        // The footer reads now: the failure was the store's, and it went away.
        Ok(_) => DataFusionError::ObjectStore(Box::new(object_store::Error::Generic {
            store: "footer",
            source: text.into(),
        })),
    };
    DataFusionError::External(Box::new(FooterUnread {
        path: file.meta.location.clone(),
        source: cause,
    }))
}
