//! A scalar subquery that aggregates the rows a correlated comparison other than `=`
//! selects (`(SELECT count(*) FROM u WHERE u.y <= t.x)`, `(SELECT max(ts) FROM e WHERE
//! e.ts < o.ts)`), which DuckDB answers and DataFusion cannot plan ("Physical plan does
//! not support logical expression ScalarSubquery"): its decorrelation pulls only
//! equalities up through an aggregate.
//!
//! Such a subquery is computed once per distinct value of the outer columns it reads (the
//! *domain*), then joined back:
//!
//! ```text
//! domain  = SELECT DISTINCT t.x AS __dl_c0 FROM <outer input>
//! values  = SELECT __dl_c0, <value> AS __dl_value, true AS __dl_present
//!           FROM domain JOIN <subquery input> ON <its filter, t.x read as __dl_c0>
//!           GROUP BY __dl_c0
//! outer input LEFT JOIN values ON t.x IS NOT DISTINCT FROM __dl_c0
//! ```
//!
//! and the subquery's place reads `__dl_value`, or, where no row matched
//! (`__dl_present` is NULL), the value over no rows: each aggregate's value over none
//! (`count` 0, the others NULL), as DataFusion's own decorrelation does.
//!
//! Only the shape `SELECT <value of aggregates> FROM … WHERE <filter>` without `GROUP
//! BY`, whose outer columns are read in the filter (and the value), is rewritten, and
//! only when the filter correlates by something other than `inner = outer` (DataFusion
//! decorrelates those itself). An optimizer rule ahead of DataFusion's
//! ([`ScalarSubqueries`]), while the subquery is as the SQL planner built it.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::expr::{AggregateFunction, Alias};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, Filter, JoinType, LogicalPlan, LogicalPlanBuilder, Operator,
    Projection, Subquery, cast, lit, when,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The rule; `sql/mod.rs::SqlSession::new` puts it ahead of DataFusion's.
#[derive(Debug, Default)]
pub(super) struct ScalarSubqueries;

impl OptimizerRule for ScalarSubqueries {
    fn name(&self) -> &str {
        "decorrelate_scalar_aggregates"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !matches!(plan, LogicalPlan::Projection(_) | LogicalPlan::Filter(_)) {
            return Ok(Transformed::no(plan));
        }
        let mut plan = plan;
        let mut changed = false;
        while let Some((subquery, shape)) = first_candidate(&plan) {
            plan = decorrelate(plan, &subquery, shape, config)?;
            changed = true;
        }
        Ok(if changed {
            Transformed::yes(plan)
        } else {
            Transformed::no(plan)
        })
    }
}

/// What a rewritable subquery is made of.
struct Shape {
    /// The subquery's one select item, over the aggregate's columns.
    value: Expr,
    /// The aggregates (no grouping).
    aggregates: Vec<Expr>,
    /// The filter under the aggregate, with the outer columns.
    filter: Expr,
    /// What the filter reads, with no outer columns.
    input: Arc<LogicalPlan>,
}

/// The first scalar subquery of the node's own expressions that has the shape (walked
/// in place: this runs for every projection and filter of every plan).
fn first_candidate(plan: &LogicalPlan) -> Option<(Subquery, Shape)> {
    let mut found = None;
    let _ = plan.apply_expressions(|e| {
        e.apply(|e| {
            if let Expr::ScalarSubquery(subquery) = e
                && let Some(shape) = shape_of(&subquery.subquery)
            {
                found = Some((subquery.clone(), shape));
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })
    });
    found
}

fn shape_of(plan: &LogicalPlan) -> Option<Shape> {
    let (value, aggregate) = match plan {
        LogicalPlan::Projection(Projection { expr, input, .. }) => match expr.as_slice() {
            [value] => (value.clone(), input.as_ref()),
            _ => return None,
        },
        _ => return None,
    };
    let LogicalPlan::Aggregate(aggregate) = aggregate else {
        return None;
    };
    if !aggregate.group_expr.is_empty() {
        return None;
    }
    let LogicalPlan::Filter(Filter {
        predicate, input, ..
    }) = aggregate.input.as_ref()
    else {
        return None;
    };
    let outer = |e: &Expr| {
        e.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..))))
            .ok()
    };
    let nested = |e: &Expr| e.exists(|e| Ok(is_subquery(e))).ok();
    // The outer columns only in the filter and the value; no subquery of its own below.
    if aggregate.aggr_expr.iter().any(|a| outer(a) != Some(false))
        || !input.all_out_ref_exprs().is_empty()
        || nested(predicate) != Some(false)
        || nested(&value) != Some(false)
        || has_subqueries(input)
    {
        return None;
    }
    // DataFusion decorrelates equalities of an inner expression and an outer column.
    let needs_us = split_conjunction(predicate).into_iter().any(|c| {
        outer(c) == Some(true)
            && !matches!(c, Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right })
                if outer(left) != outer(right))
    });
    needs_us.then(|| Shape {
        value,
        aggregates: aggregate.aggr_expr.clone(),
        filter: predicate.clone(),
        input: Arc::clone(input),
    })
}

fn is_subquery(e: &Expr) -> bool {
    matches!(
        e,
        Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
    )
}

fn has_subqueries(plan: &LogicalPlan) -> bool {
    plan.exists(|node| {
        let mut found = false;
        node.apply_expressions(|e| {
            found = e.exists(|e| Ok(is_subquery(e)))?;
            Ok(if found {
                TreeNodeRecursion::Stop
            } else {
                TreeNodeRecursion::Continue
            })
        })?;
        Ok(found)
    })
    .unwrap_or(true)
}

/// `plan` (a projection or filter) with `subquery` computed over its input's domain and
/// joined back.
fn decorrelate(
    plan: LogicalPlan,
    subquery: &Subquery,
    shape: Shape,
    config: &dyn OptimizerConfig,
) -> Result<LogicalPlan> {
    let input = plan.inputs()[0].clone();
    // The outer columns read, each a column of the domain.
    let mut outer: Vec<Column> = Vec::new();
    for e in [&shape.filter, &shape.value] {
        e.apply(|e| {
            if let Expr::OuterReferenceColumn(_, c) = e
                && !outer.contains(c)
            {
                outer.push(c.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
    }
    let aliases = config.alias_generator();
    let domain_name = aliases.next("__dl_domain");
    let values_name = aliases.next("__dl_values");
    let field = |i: usize| format!("__dl_c{i}");
    let domain = LogicalPlanBuilder::from(input.clone())
        .project(
            outer
                .iter()
                .enumerate()
                .map(|(i, c)| Expr::Column(c.clone()).alias(field(i))),
        )?
        .distinct()?
        .alias(domain_name.as_str())?
        .build()?;
    let in_domain = |i: usize| Expr::Column(Column::new(Some(domain_name.as_str()), field(i)));
    let read_domain = |e: Expr| -> Result<Expr> {
        e.transform(|e| match e {
            Expr::OuterReferenceColumn(f, c) => match outer.iter().position(|o| *o == c) {
                Some(i) => Ok(Transformed::yes(in_domain(i))),
                None => Ok(Transformed::no(Expr::OuterReferenceColumn(f, c))),
            },
            e => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
    };
    let groups: Vec<Expr> = (0..outer.len()).map(in_domain).collect();
    let values = LogicalPlanBuilder::from(domain)
        .join_on(
            shape.input.as_ref().clone(),
            JoinType::Inner,
            [read_domain(shape.filter.clone())?],
        )?
        .aggregate(groups.clone(), shape.aggregates.clone())?
        .project(
            groups
                .iter()
                .cloned()
                .chain([
                    read_domain(shape.value.clone())?.alias("__dl_value"),
                    lit(true).alias("__dl_present"),
                ])
                .collect::<Vec<_>>(),
        )?
        .alias(values_name.as_str())?
        .build()?;
    let in_values = |name: &str| Expr::Column(Column::new(Some(values_name.as_str()), name));
    let joined = LogicalPlanBuilder::from(input.clone())
        .join_on(
            values,
            JoinType::Left,
            outer.iter().enumerate().map(|(i, c)| {
                Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(Expr::Column(c.clone())),
                    Operator::IsNotDistinctFrom,
                    Box::new(in_values(&field(i))),
                ))
            }),
        )?
        .build()?;
    // The value over no rows: each aggregate's value over none.
    let mut empty: HashMap<String, Expr> = HashMap::new();
    for aggregate in &shape.aggregates {
        let name = aggregate.schema_name().to_string();
        let function = match aggregate {
            Expr::Alias(Alias { expr, .. }) => expr.as_ref(),
            other => other,
        };
        let Expr::AggregateFunction(AggregateFunction { func, .. }) = function else {
            return Err(datafusion::error::DataFusionError::Internal(format!(
                "an aggregate was expected, not {function}"
            )));
        };
        let t = aggregate.get_type(shape.input.schema())?;
        empty.insert(name, lit(func.default_value(&t)?));
    }
    let value_type = joined
        .schema()
        .field_with_qualified_name(&values_name.as_str().into(), "__dl_value")?
        .data_type()
        .clone();
    let over_none = shape
        .value
        .clone()
        .transform(|e| match e {
            Expr::Column(c) if c.relation.is_none() && empty.contains_key(&c.name) => {
                Ok(Transformed::yes(empty[&c.name].clone()))
            }
            e => Ok(Transformed::no(e)),
        })?
        .data;
    let replacement = when(
        in_values("__dl_present").is_null(),
        cast(over_none, value_type.clone()),
    )
    .otherwise(in_values("__dl_value"))?;
    let replace = |e: Expr| -> Result<Expr> {
        e.transform(|e| match e {
            Expr::ScalarSubquery(s) if s == *subquery => Ok(Transformed::yes(replacement.clone())),
            e => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
    };
    match plan {
        LogicalPlan::Projection(projection) => {
            let names = NamePreserver::new_for_projection();
            let exprs = projection
                .expr
                .into_iter()
                .map(|e| {
                    let name = names.save(&e);
                    replace(e).map(|e| name.restore(e))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(joined),
            )?))
        }
        LogicalPlan::Filter(filter) => {
            let filtered = Filter::try_new(replace(filter.predicate)?, Arc::new(joined))?;
            // The filter's own columns again, without the joined ones.
            let columns = input.schema().columns().into_iter().map(Expr::Column);
            LogicalPlanBuilder::from(LogicalPlan::Filter(filtered))
                .project(columns)?
                .build()
        }
        other => Ok(other),
    }
}
