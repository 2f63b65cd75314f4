//! Which side of a semi, anti or mark join holds the hash table.
//!
//! DataFusion builds a hash join on its left input and swaps the inputs when statistics
//! say the right one is smaller. The left input of a `[NOT] IN` / `[NOT] EXISTS` join is
//! the outer query: for a `DELETE`, `UPDATE` or `MERGE`, the target table with every column
//! the statement reads. Its estimate is a guess as soon as a filter or a join sits under it
//! (a join estimates rows only, and rows are then compared as if both sides were equally
//! wide), so the whole target could become the hash table: the real `dlt-altertable`
//! 0.2.2's child-table `DELETE … WHERE "_dlt_root_id" IN (…) AND "_dlt_id" NOT IN (…)`
//! asked for more than the 1 GiB query pool at 4M rows, and a hash table does not spill.
//!
//! [`BuildOnSubquery`] runs right after DataFusion's join selection and builds every
//! partitioned semi, anti or mark join on its subquery's side (the keys the statement
//! names, usually a staged batch) while the outer side streams through it, as DuckDB
//! does; memory then follows the subquery's keys, not the table's rows. Only an outer side
//! whose byte estimate is a small fraction of the subquery's stays the build side.
//! Null-aware anti joins (a bare `NOT IN`) keep their required sides.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{ExecutionPlan, StatisticsArgs, StatisticsContext};

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct BuildOnSubquery;

impl PhysicalOptimizerRule for BuildOnSubquery {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !config.optimizer.join_reordering {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            let outer_side_join = matches!(
                join.join_type(),
                JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
            );
            if !outer_side_join
                || join.null_aware
                || *join.partition_mode() != PartitionMode::Partitioned
                || outer_side_much_smaller(join.left().as_ref(), join.right().as_ref())?
            {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(
                join.swap_inputs(PartitionMode::Partitioned)?,
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "build_on_subquery"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// How much smaller an outer side's estimate must be to be built on: estimates of filtered
/// and joined inputs are guesses, so only a clear margin overrides the rule (Presto
/// swaps join sides at the same factor).
const MARGIN: usize = 8;

/// Whether the outer side's byte estimate is known and a small fraction of the subquery
/// side's. A row count alone does not do: the outer side's rows carry every column the
/// statement reads, the subquery's only its keys.
fn outer_side_much_smaller(
    outer: &dyn ExecutionPlan,
    subquery: &dyn ExecutionPlan,
) -> Result<bool> {
    let bytes = |plan: &dyn ExecutionPlan| -> Result<Option<usize>> {
        let stats = StatisticsContext::new().compute(plan, &StatisticsArgs::new())?;
        Ok(stats.total_byte_size.get_value().copied())
    };
    Ok(match (bytes(outer)?, bytes(subquery)?) {
        (Some(outer), Some(subquery)) => outer.saturating_mul(MARGIN) <= subquery,
        _ => false,
    })
}
