//! DuckDB's division. `/` divides as DOUBLE whatever the numbers (`7 / 2` is 3.5, `7 / 0`
//! is infinity); `//` divides integers as integers (truncating: `-7 // 2` is -3) and
//! anything else as `/` does. DataFusion's `/` truncates on integers and it plans no `//`,
//! so a ratio written for DuckDB would come out silently truncated.
//!
//! `a // b` is parsed into `__deltalite_integer_divide(a / b)` ([`INTEGER_DIVIDE`], by
//! `sql/normalize.rs`): a marker that passes its argument through. Then an analyzer rule
//! ([`DuckdbDivision`], before type coercion, when the operands' types are known)
//! makes every `/` of integers or decimals a DOUBLE division, except directly under the
//! marker when both operands are integers; it drops the markers.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::{BinaryExpr, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility, cast,
};
use datafusion::optimizer::AnalyzerRule;

/// The marker `a // b` of two integers is planned as, around `a / b`.
pub(super) const INTEGER_DIVIDE: &str = "__deltalite_integer_divide";

/// The marker: its argument, unchanged (what `//` of two integers is, planned by
/// DataFusion's `/`). The analyzer rule removes it; were it left, it would still be right.
pub(super) fn integer_divide_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(IntegerDivide {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerDivide {
    signature: Signature,
}

impl ScalarUDFImpl for IntegerDivide {
    fn name(&self) -> &str {
        INTEGER_DIVIDE
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args.first().cloned().unwrap_or(DataType::Null))
    }
    /// An unaliased `a // b` is named so, as `a / b` is named `a / b`.
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        Ok(match args {
            [
                Expr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Divide,
                    right,
                }),
            ] => format!("{} // {}", left.schema_name(), right.schema_name()),
            _ => format!("{INTEGER_DIVIDE}({})", args.len()),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        args.args.into_iter().next().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(format!("{INTEGER_DIVIDE}: no argument"))
        })
    }
}

#[derive(Debug, Default)]
struct DuckdbDivision;

impl AnalyzerRule for DuckdbDivision {
    fn name(&self) -> &str {
        "duckdb_division"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            // The columns a node's expressions read: its inputs' (a scan's, its table's).
            // A correlated subquery's outer columns carry their own types.
            let mut schema = merge_schema(&node.inputs());
            if let LogicalPlan::TableScan(scan) = &node {
                schema.merge(&DFSchema::try_from_qualified_schema(
                    scan.table_name.clone(),
                    &scan.source.schema(),
                )?);
            }
            // A rewritten select item keeps the name it was written with.
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let name = names.save(&e);
                e.transform_down(|e| rewrite(e, &schema))
                    .map(|t| t.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }
}

/// One expression, before its children (whose types are still the ones written).
fn rewrite(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == INTEGER_DIVIDE => {
            let Ok([arg]) = <[Expr; 1]>::try_from(args) else {
                return Err(datafusion::error::DataFusionError::Internal(format!(
                    "{INTEGER_DIVIDE} takes one argument"
                )));
            };
            match arg {
                Expr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Divide,
                    right,
                }) if left.get_type(schema)?.is_integer()
                    && right.get_type(schema)?.is_integer() =>
                {
                    // Integers: DataFusion's own division, its operands rewritten on
                    // their own (they may hold a `/`).
                    let left = left.transform_down(|e| rewrite(e, schema))?.data;
                    let right = right.transform_down(|e| rewrite(e, schema))?.data;
                    let divide = Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(left),
                        Operator::Divide,
                        Box::new(right),
                    ));
                    Ok(Transformed::new(divide, true, TreeNodeRecursion::Jump))
                }
                // Anything else divides as `/` does (the marker is gone either way).
                other => Ok(Transformed::yes(rewrite(other, schema)?.data)),
            }
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        }) if exact(&left.get_type(schema)?) && exact(&right.get_type(schema)?) => {
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(cast(*left, DataType::Float64)),
                Operator::Divide,
                Box::new(cast(*right, DataType::Float64)),
            ))))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// An integer or decimal (`NULL` too: `NULL / 2` is a DOUBLE null).
fn exact(t: &DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Decimal128(..) | DataType::Decimal256(..) | DataType::Null
        )
}

/// DataFusion's analyzer rules with this one first, before type coercion.
pub(super) fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Analyzer::new().rules;
    rules.insert(0, Arc::new(DuckdbDivision));
    rules
}
