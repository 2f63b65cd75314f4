//! What our analyzer rules share: rewriting every expression of a plan (its subqueries
//! too) with the schema its columns come from, each keeping the name it had.

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// `plan` with `rewrite` applied to each of its nodes' expressions (whole: `rewrite`
/// walks it as it needs), given the columns the node reads: its inputs' (a scan's, its
/// table's). A correlated subquery's outer columns carry their own types.
pub(super) fn rewrite_expressions(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    rewrite_nodes(plan, rewrite, false)
}

/// [`rewrite_expressions`], leaving `VALUES` rows alone: a `VALUES` node's schema is the
/// one it was built with, which a row retyped would contradict.
pub(super) fn rewrite_expressions_but_values(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    rewrite_nodes(plan, rewrite, true)
}

fn rewrite_nodes(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
    skip_values: bool,
) -> Result<LogicalPlan> {
    // A rewritten expression may have another type (a coalesce of a DATE and a
    // TIMESTAMP): from the first node rewritten on, every node's schema is taken again
    // (children come first, so every node above it is among them).
    let mut retype = false;
    plan.transform_up_with_subqueries(|node| {
        if skip_values && matches!(node, LogicalPlan::Values(_)) {
            return Ok(Transformed::no(node));
        }
        let schema = columns_read(&node)?;
        // A rewritten select item keeps the name it was written with.
        let names = NamePreserver::new(&node);
        let rewritten = node.map_expressions(|e| {
            let name = names.save(&e);
            let t = rewrite(e, &schema)?;
            // A lambda's parameters are typed by the list they range over, which the
            // rewrite may have retyped (`sql/lambdas`).
            let t = match t.transformed {
                true => t.transform_data(|e| super::lambdas::resolve(e, &schema))?,
                false => t,
            };
            Ok(t.update_data(|e| name.restore(e)))
        })?;
        retype |= rewritten.transformed;
        match retype {
            true => rewritten.map_data(|node| node.recompute_schema()),
            false => Ok(rewritten),
        }
    })
    .map(|t| t.data)
}

/// The columns a node's expressions read: its inputs', a scan's table's (its filters').
/// Also the optimizer rule's (`sql/date_bounds.rs`).
pub(super) fn columns_read(node: &LogicalPlan) -> Result<DFSchema> {
    let mut schema = merge_schema(&node.inputs());
    if let LogicalPlan::TableScan(scan) = node {
        schema.merge(&DFSchema::try_from_qualified_schema(
            scan.table_name.clone(),
            &scan.source.schema(),
        )?);
    }
    Ok(schema)
}
