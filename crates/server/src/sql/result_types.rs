//! DuckDB's result types where DataFusion's functions answer narrower integers: a date
//! part (`extract(year FROM d)`, `date_part`, `year(d)`, `dayofweek(d)`, …), `length`
//! (`char_length`), `octet_length`, `strpos` (`instr`, `position`) and `array_length`
//! are BIGINTs in DuckDB, INTEGERs (an unsigned BIGINT for `array_length`) in
//! DataFusion; so a dbt model's `extract(year FROM ordered_at) AS order_year` made an
//! INTEGER column where DuckDB makes a BIGINT one.
//!
//! An analyzer rule ahead of type coercion ([`DuckdbResultTypes`], first, so that
//! coercion and DuckDB's arithmetic meet a BIGINT: `length(s) = i` of an INTEGER `i`)
//! casts each such call that answers an integer other than BIGINT to BIGINT (a date
//! part that answers a DOUBLE, `epoch`, is left as it is). The select item keeps its
//! name (`sql/analyzer.rs::rewrite_expressions`).

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, cast};
use datafusion::optimizer::AnalyzerRule;

/// DataFusion's names of the functions DuckDB answers a BIGINT from.
const BIGINT_RESULTS: [&str; 5] = [
    "date_part",
    "character_length",
    "octet_length",
    "strpos",
    "array_length",
];

/// The rule; it goes first (`sql/mod.rs::analyzer_rules`).
#[derive(Debug, Default)]
pub(super) struct DuckdbResultTypes;

impl AnalyzerRule for DuckdbResultTypes {
    fn name(&self) -> &str {
        "duckdb_result_types"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        super::analyzer::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| widened(e, schema))
        })
    }
}

/// A call of [`BIGINT_RESULTS`] that answers another integer, cast to BIGINT.
fn widened(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::ScalarFunction(f) = &e else {
        return Ok(Transformed::no(e));
    };
    if !BIGINT_RESULTS.contains(&f.func.name()) {
        return Ok(Transformed::no(e));
    }
    // Before coercion a call's arguments may not have its types yet: what cannot be
    // typed is left to coercion's own error.
    let Ok(t) = e.get_type(schema) else {
        return Ok(Transformed::no(e));
    };
    if !t.is_integer() || t == DataType::Int64 {
        return Ok(Transformed::no(e));
    }
    Ok(Transformed::yes(cast(e, DataType::Int64)))
}
