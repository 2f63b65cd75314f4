//! One spill writer for every repartition.
//!
//! When a `RepartitionExec` cannot reserve memory for a batch, DataFusion 55.2 writes it to
//! a spill pool shared by all of the operator's input tasks, and the reader waits on the
//! pool's oldest file. When two input tasks spill at once the pool holds two open files,
//! and the reader can wait on the older one while the batch it needs is in the newer one:
//! the query stops with no error and no CPU until the query timeout
//! (apache/datafusion#24883, fixed after the DataFusion that deltalake 1.1 pins). The real
//! `dlt-altertable` 0.2.2's child-table `DELETE` at 2M rows ran into it in the 1 GiB pool.
//!
//! [`OneSpillWriter`] gives every order-free repartition with several input partitions a
//! single input: a `CoalescePartitionsExec` that still runs each input partition in its own
//! task, so scans, filters and partial aggregates stay parallel, while hashing rows to
//! output partitions happens in one task and only one file is ever open in the pool.
//! Order-preserving repartitions already have one pool per input.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct OneSpillWriter;

impl PhysicalOptimizerRule for OneSpillWriter {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(repartition) = node.downcast_ref::<RepartitionExec>() else {
                return Ok(Transformed::no(node));
            };
            let input = repartition.input();
            if repartition.preserve_order() || input.output_partitioning().partition_count() <= 1 {
                return Ok(Transformed::no(node));
            }
            let single = Arc::new(CoalescePartitionsExec::new(Arc::clone(input)));
            Ok(Transformed::yes(Arc::new(RepartitionExec::try_new(
                single,
                repartition.partitioning().clone(),
            )?)))
        })
        .data()
    }

    fn name(&self) -> &str {
        "one_spill_writer"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::MemTable;
    use datafusion::error::DataFusionError;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::execution::memory_pool::FairSpillPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::RepartitionExec;

    const GROUPS: i64 = 2_000;

    /// `rows` rows in two partitions: a group key and a distinct string per row.
    fn table(rows: i64) -> MemTable {
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let half = |from: i64, to: i64| {
            (from..to)
                .step_by(8192)
                .map(|start| {
                    let ids = start..(start + 8192).min(to);
                    RecordBatch::try_new(
                        Arc::clone(&schema),
                        vec![
                            Arc::new(Int64Array::from_iter_values(
                                ids.clone().map(|i| i % GROUPS),
                            )),
                            Arc::new(StringArray::from_iter_values(ids.map(|i| {
                                format!("{:032x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15))
                            }))),
                        ],
                    )
                    .expect("batch")
                })
                .collect::<Vec<_>>()
        };
        MemTable::try_new(
            Arc::clone(&schema),
            vec![half(0, rows / 2), half(rows / 2, rows)],
        )
        .expect("table")
    }

    fn context(rows: i64, pool_bytes: usize) -> SessionContext {
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(pool_bytes)))
            .build_arc()
            .expect("runtime");
        let state = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(2))
            .with_runtime_env(Arc::clone(&runtime))
            .with_default_features()
            .with_physical_optimizer_rules(super::super::rules(Arc::clone(
                &runtime.object_store_registry,
            )))
            .build();
        let ctx = SessionContext::new_with_state(state);
        ctx.register_table("t", Arc::new(table(rows)))
            .expect("register");
        ctx
    }

    const QUERY: &str = "SELECT sum(n) FROM (SELECT g, count(DISTINCT s) AS n FROM t GROUP BY g)";

    fn hash_repartitions(plan: &Arc<dyn ExecutionPlan>, found: &mut Vec<usize>) {
        if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
            found.push(r.input().output_partitioning().partition_count());
        }
        for child in plan.children() {
            hash_repartitions(child, found);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_repartition_reads_one_input_and_the_answer_stays() {
        let rows = 100_000;
        let ctx = context(rows, 1 << 30);
        let plan = ctx
            .sql(QUERY)
            .await
            .expect("plan")
            .create_physical_plan()
            .await
            .expect("physical");
        let mut inputs = Vec::new();
        hash_repartitions(&plan, &mut inputs);
        // the distinct aggregate repartitions twice on its group keys; each reads one input
        assert_eq!(inputs, vec![1, 1]);
        let batches = ctx
            .sql(QUERY)
            .await
            .expect("plan")
            .collect()
            .await
            .expect("run");
        let sum = batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("sum");
        assert_eq!(sum.value(0), rows);
    }

    /// In a pool too small for the aggregate the repartitions spill. DataFusion 55.2's own
    /// plan then stopped for good in 1 of 5 attempts in a 3 MiB pool and 3 of 18 in a
    /// 6 MiB one (apache/datafusion#24883); with one spill writer, 0 of 8 and 0 of 16, each
    /// attempt ending with its answer or the pool's own error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spilling_repartition_ends() {
        const ROWS: i64 = 2_000_000;
        for attempt in 0..4 {
            let ctx = context(ROWS, 3 << 20);
            let run = async { ctx.sql(QUERY).await?.collect().await };
            match tokio::time::timeout(Duration::from_secs(60), run).await {
                Err(_) => panic!("attempt {attempt} stopped: no answer and no error in 60 s"),
                Ok(Ok(batches)) => {
                    let sum = batches[0].column(0).as_any().downcast_ref::<Int64Array>();
                    assert_eq!(sum.map(|s| s.value(0)), Some(ROWS), "attempt {attempt}");
                }
                Ok(Err(e)) => assert!(
                    matches!(e.find_root(), DataFusionError::ResourcesExhausted(_)),
                    "attempt {attempt}: {e}"
                ),
            }
        }
    }
}
