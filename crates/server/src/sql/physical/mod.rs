//! The physical optimizer rules our sessions add to DataFusion's own.
//!
//! Two keep a statement inside the query memory pool the way DataFusion 55.2 cannot on
//! its own: [`join_order::BuildOnSubquery`] picks which side of a semi or anti join becomes
//! the hash table (a hash table does not spill), [`repartition::OneSpillWriter`] keeps a
//! spilling repartition from waiting forever. [`store_errors::KeepStoreErrors`] keeps a
//! failed footer read retryable when the store's failure is. [`scan_order::ScansInOrder`]
//! keeps a scan's rows in their stored order.

mod join_order;
mod repartition;
mod scan_order;
mod store_errors;

use std::sync::Arc;

use datafusion::execution::object_store::ObjectStoreRegistry;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;

/// DataFusion's default rules with ours in place: the join side right after join selection
/// (before distribution is enforced and dynamic filters are attached), the scans' order,
/// the repartition inputs and the scans' readers last, on the finished plan, before its
/// sanity check.
/// `stores` is the session's registry, where scans find their store.
pub(crate) fn rules(
    stores: Arc<dyn ObjectStoreRegistry>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    let after_join_selection = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .map_or(0, |i| i + 1);
    rules.insert(after_join_selection, Arc::new(join_order::BuildOnSubquery));
    let before_sanity_check = rules
        .iter()
        .position(|r| r.name() == "SanityCheckPlan")
        .unwrap_or(rules.len());
    rules.insert(before_sanity_check, Arc::new(scan_order::ScansInOrder));
    rules.insert(
        before_sanity_check + 1,
        Arc::new(repartition::OneSpillWriter),
    );
    rules.insert(
        before_sanity_check + 2,
        Arc::new(store_errors::KeepStoreErrors::new(stores)),
    );
    rules
}
