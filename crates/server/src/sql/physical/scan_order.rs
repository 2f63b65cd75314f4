//! A scan's rows as one stream per partition, in the order they are stored.
//!
//! DataFusion spreads a scan with fewer partitions than the session's target over the
//! cores with a round-robin repartition, which interleaves its batches: `SELECT * FROM t`
//! on a table under `repartition_file_min_size` (one partition) came back in batches of
//! 8192 rows in shuffled order, and a rewrite of such a table wrote them back so. DuckDB
//! gives a table's rows in the order they were written. [`ScansInOrder`] drops a
//! round-robin repartition whose input is a scan (files or batches in memory, `VALUES`);
//! one elsewhere, above a `range()` or after a single-partition operator, keeps spreading
//! its work. A scan large enough is still split into partitions by file and byte range.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct ScansInOrder;

impl PhysicalOptimizerRule for ScansInOrder {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(repartition) = node.downcast_ref::<RepartitionExec>() else {
                return Ok(Transformed::no(node));
            };
            let spreads_a_scan =
                matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_))
                    && repartition
                        .input()
                        .downcast_ref::<DataSourceExec>()
                        .is_some();
            if !spreads_a_scan {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(Arc::clone(repartition.input())))
        })
        .data()
    }

    fn name(&self) -> &str {
        "scans_in_order"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
