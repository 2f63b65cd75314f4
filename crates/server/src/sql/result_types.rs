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
//!
//! The same rule gives DECIMAL arithmetic DuckDB's result types ([`decimal_result`]),
//! where DataFusion's are one digit wider or more: a product of DECIMAL(p1,s1) and
//! DECIMAL(p2,s2) is a DECIMAL(p1+p2, s1+s2) (DataFusion: p1+p2+1), at most 18 digits
//! when both fit 18 (so DECIMAL(10,2) times an INTEGER is a DECIMAL(18,2), as in DuckDB;
//! a product that does not fit fails as DuckDB's does); a BIGINT meets a DECIMAL as a
//! DECIMAL(19,0) (DataFusion: 20), so `d + v` of a DECIMAL(10,2) and a BIGINT is a
//! DECIMAL(22,2); `ceil`, `floor` and `trunc` of a DECIMAL(p,s) are DECIMAL(p,0)s, as DuckDB's
//! (DataFusion kept the scale: `ceil(1.25)` was `2.00`). An integer literal counts as
//! the INTEGER DuckDB reads it as. `trunc` of an integer is that integer (DataFusion: a
//! DOUBLE).

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::BinaryExpr;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Operator, cast};
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
            e.transform_up(|e| widened(e, schema))?
                .transform_parent(|e| e.transform_up(|e| integer_trunc(e, schema)))?
                .transform_parent(|e| e.transform_up(|e| decimal_result(e, schema)))
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

/// `trunc` of an integer: the integer, as DuckDB's (DataFusion: a DOUBLE).
fn integer_trunc(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::ScalarFunction(mut f)
            if f.func.name() == "trunc"
                && f.args.len() == 1
                && f.args[0].get_type(schema).is_ok_and(|t| t.is_integer()) =>
        {
            Ok(Transformed::yes(f.args.remove(0)))
        }
        e => Ok(Transformed::no(e)),
    }
}

/// DuckDB's type of a DECIMAL `+`, `-`, `*`, `ceil`, `floor` or `trunc`, when DataFusion's
/// differs: the call cast to it.
fn decimal_result(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let duckdb = match &e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (Some(l), Some(r)) = (decimal_of(left, schema), decimal_of(right, schema)) else {
                return Ok(Transformed::no(e));
            };
            // Integers on both sides are integer arithmetic.
            if !(l.decimal || r.decimal) {
                return Ok(Transformed::no(e));
            }
            match op {
                Operator::Multiply => {
                    let scale = l.scale + r.scale;
                    let mut precision = l.precision + r.precision;
                    if precision > 18 && l.precision <= 18 && r.precision <= 18 {
                        precision = 18;
                    }
                    (precision <= 38 && scale <= precision).then_some((precision, scale))
                }
                Operator::Plus | Operator::Minus => {
                    let scale = l.scale.max(r.scale);
                    let digits = (l.precision - l.scale).max(r.precision - r.scale);
                    let precision = digits + scale + 1;
                    (precision <= 38).then_some((precision, scale))
                }
                _ => None,
            }
        }
        Expr::ScalarFunction(f)
            if matches!(f.func.name(), "ceil" | "floor" | "trunc") && f.args.len() == 1 =>
        {
            match f.args[0].get_type(schema) {
                Ok(DataType::Decimal128(p, s)) if s > 0 => Some((p, 0)),
                _ => None,
            }
        }
        _ => None,
    };
    let Some((precision, scale)) = duckdb else {
        return Ok(Transformed::no(e));
    };
    let to = DataType::Decimal128(precision, scale as i8);
    // What cannot be typed yet is left to coercion's own error.
    match e.get_type(schema) {
        Ok(t @ DataType::Decimal128(..)) if t != to => Ok(Transformed::yes(cast(e, to))),
        _ => Ok(Transformed::no(e)),
    }
}

/// An operand of DECIMAL arithmetic as DuckDB sees it.
struct DecimalOperand {
    precision: u8,
    scale: u8,
    decimal: bool,
}

/// `e` as a DECIMAL: a DECIMAL's own width, an integer's DuckDB gives it (a BIGINT's
/// 19 digits, an integer literal's INTEGER 10); `None` for anything else.
fn decimal_of(e: &Expr, schema: &DFSchema) -> Option<DecimalOperand> {
    let integer = |precision| {
        Some(DecimalOperand {
            precision,
            scale: 0,
            decimal: false,
        })
    };
    if let Expr::Literal(ScalarValue::Int64(Some(v)), _) = e {
        return integer(if i32::try_from(*v).is_ok() { 10 } else { 19 });
    }
    match e.get_type(schema).ok()? {
        DataType::Decimal128(precision, scale) if scale >= 0 => Some(DecimalOperand {
            precision,
            scale: scale as u8,
            decimal: true,
        }),
        DataType::Int8 | DataType::UInt8 => integer(3),
        DataType::Int16 | DataType::UInt16 => integer(5),
        DataType::Int32 | DataType::UInt32 => integer(10),
        DataType::Int64 => integer(19),
        DataType::UInt64 => integer(20),
        _ => None,
    }
}
