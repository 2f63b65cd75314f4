//! `EXCEPT ALL` and `INTERSECT ALL` with DuckDB's (and SQL's) multiplicities: a row the
//! left side has `l` times and the right `r` times is in `EXCEPT ALL` `max(l - r, 0)`
//! times and in `INTERSECT ALL` `min(l, r)` times. DataFusion plans both as an anti or
//! semi join of the whole rows, which keeps all `l` copies or none:
//! `(1), (1), (2) EXCEPT ALL (1)` answered `2` where DuckDB answers `1, 2`.
//!
//! An analyzer rule ([`MultisetOperations`], before type coercion) numbers the copies of
//! each row on both sides (`row_number() OVER (PARTITION BY every column)`) and joins on
//! the number too: the left's `k`-th copy meets the right's `k`-th, so the anti join
//! keeps the copies past the right's count and the semi join those up to it.
//!
//! Which joins are set operations: at analysis, only DataFusion's `EXCEPT` and
//! `INTERSECT` plan a semi or anti join whose keys match NULLs (a join's `ON` is still a
//! filter then, its keys are extracted by the optimizer, and `USING` keys never match
//! NULLs). Without `ALL` the left side is a `Distinct` under the join, each row once,
//! so the numbering would change nothing and is not added.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{JoinType, NullEquality, Result};
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::{
    Distinct, Expr, ExprFunctionExt, Join, LogicalPlan, LogicalPlanBuilder,
};
use datafusion::optimizer::AnalyzerRule;

/// Name of the copy number each side gets.
const COPY: &str = "__deltalite_copy";

#[derive(Debug, Default)]
pub(super) struct MultisetOperations;

impl AnalyzerRule for MultisetOperations {
    fn name(&self) -> &str {
        "multiset_operations"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(numbered).map(|t| t.data)
    }
}

/// `node` with its copies numbered, when it is an `EXCEPT ALL` or `INTERSECT ALL`.
fn numbered(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(join) = node else {
        return Ok(Transformed::no(node));
    };
    let set_operation = matches!(join.join_type, JoinType::LeftAnti | JoinType::LeftSemi)
        && join.null_equality == NullEquality::NullEqualsNull
        && join.filter.is_none()
        && !join.on.is_empty()
        && !matches!(join.left.as_ref(), LogicalPlan::Distinct(Distinct::All(_)));
    if !set_operation {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let Join {
        left,
        right,
        on,
        join_type,
        ..
    } = join;
    let row: Vec<Expr> = left
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let (left_keys, right_keys): (Vec<Expr>, Vec<Expr>) = on.into_iter().unzip();
    let copies = |side: Arc<LogicalPlan>, keys: Vec<Expr>, name: &str| {
        let copy = row_number().partition_by(keys).build()?.alias(name);
        LogicalPlanBuilder::from(Arc::unwrap_or_clone(side))
            .window(vec![copy])?
            .build()
    };
    let left_copy = format!("{COPY}_left");
    let right_copy = format!("{COPY}_right");
    let left = copies(left, left_keys.clone(), &left_copy)?;
    let right = copies(right, right_keys.clone(), &right_copy)?;
    let mut left_on = left_keys;
    left_on.push(Expr::Column(left_copy.into()));
    let mut right_on = right_keys;
    right_on.push(Expr::Column(right_copy.into()));
    let joined = LogicalPlanBuilder::from(left)
        .join_detailed(
            right,
            join_type,
            (
                left_on.iter().map(column).collect::<Result<Vec<_>>>()?,
                right_on.iter().map(column).collect::<Result<Vec<_>>>()?,
            ),
            None,
            NullEquality::NullEqualsNull,
        )?
        .project(row)?
        .build()?;
    Ok(Transformed::yes(joined))
}

/// A join key as the column it is (the set operations join on columns).
fn column(key: &Expr) -> Result<datafusion::common::Column> {
    match key {
        Expr::Column(c) => Ok(c.clone()),
        other => {
            datafusion::common::internal_err!("a set operation joins on columns, not on {other}")
        }
    }
}
