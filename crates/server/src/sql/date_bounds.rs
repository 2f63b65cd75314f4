//! A DATE compared with a TIMESTAMP constant, compared as dates again, so partition
//! pruning and file statistics read the column.
//!
//! `day >= DATE '2024-01-08' - INTERVAL 7 DAY` compares a DATE with a TIMESTAMP (a date
//! plus an interval is one, `sql/arithmetic.rs`), and so does `day < now()`. DataFusion
//! plans `CAST(day AS TIMESTAMP) >= <constant>`, which no pruning reads, and its own
//! unwrapping of casts in comparisons leaves a date widened to a timestamp alone (the
//! cast invents a midnight, so the bound cannot be cast back as it is).
//!
//! The bound can be moved to a day instead. For a day `d` (its midnight) and an instant
//! `t` in day `t_d`: `d > t` ⇔ `d > t_d`; `d <= t` ⇔ `d <= t_d`; `d >= t` ⇔ `d >= t_d`
//! when `t` is a midnight, else `d > t_d`; `d < t` ⇔ `d < t_d` when it is, else
//! `d <= t_d`; `d = t` (and `<>`, `IS [NOT] DISTINCT FROM`) ⇔ the same of `t_d` when it
//! is, and is left alone when it is not. A NULL day compares NULL on both sides.
//!
//! An optimizer rule at the end of DataFusion's list ([`DateBounds`]): by then the
//! simplifier has folded the bound into a constant; a filter the rule rewrites is pushed
//! into the scan in the optimizer's next pass, and one already pushed is rewritten there.

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{BinaryExpr, Cast};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Operator, lit};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The rule; `sql/mod.rs::SqlSession::new` appends it to DataFusion's.
#[derive(Debug, Default)]
pub(super) struct DateBounds;

impl OptimizerRule for DateBounds {
    fn name(&self) -> &str {
        "date_bounds"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let schema = super::analyzer::columns_read(&plan)?;
        plan.map_expressions(|e| e.transform_up(|e| Ok(bound(e, &schema))))
    }
}

/// One comparison of `CAST(<date> AS TIMESTAMP)` with a timestamp constant, as a
/// comparison of the date with a date constant where that is exact.
fn bound(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else {
        return Transformed::no(e);
    };
    let (date, op, instant) = match (widened_date(left, schema), widened_date(right, schema)) {
        (Some(date), None) => (date, *op, &**right),
        (None, Some(date)) => match op.swap() {
            Some(op) => (date, op, &**left),
            None => return Transformed::no(e),
        },
        _ => return Transformed::no(e),
    };
    let Some((day, midnight)) = day_of(instant) else {
        return Transformed::no(e);
    };
    let op = match (op, midnight) {
        (Operator::Gt | Operator::LtEq, _) => op,
        (Operator::GtEq, false) => Operator::Gt,
        (Operator::Lt, false) => Operator::LtEq,
        (
            Operator::GtEq
            | Operator::Lt
            | Operator::Eq
            | Operator::NotEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom,
            true,
        ) => op,
        _ => return Transformed::no(e),
    };
    Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
        Box::new(date.clone()),
        op,
        Box::new(lit(ScalarValue::Date32(Some(day)))),
    )))
}

/// The DATE under `CAST(… AS TIMESTAMP)`.
fn widened_date<'a>(e: &'a Expr, schema: &DFSchema) -> Option<&'a Expr> {
    let Expr::Cast(Cast { expr, field }) = e else {
        return None;
    };
    let widened = matches!(field.data_type(), DataType::Timestamp(..))
        && expr.get_type(schema).ok() == Some(DataType::Date32);
    widened.then_some(&**expr)
}

/// The day a timestamp constant falls in (days since 1970-01-01, as a DATE's value is),
/// and whether it is that day's midnight. A cast of a date to a timestamp, with or
/// without a zone, is the date's midnight in UTC, so the instant's own value is read.
fn day_of(instant: &Expr) -> Option<(i32, bool)> {
    let Expr::Literal(value, _) = instant else {
        return None;
    };
    let (value, unit) = match value {
        ScalarValue::TimestampSecond(Some(v), _) => (*v, TimeUnit::Second),
        ScalarValue::TimestampMillisecond(Some(v), _) => (*v, TimeUnit::Millisecond),
        ScalarValue::TimestampMicrosecond(Some(v), _) => (*v, TimeUnit::Microsecond),
        ScalarValue::TimestampNanosecond(Some(v), _) => (*v, TimeUnit::Nanosecond),
        _ => return None,
    };
    let per_day: i64 = 86_400
        * match unit {
            TimeUnit::Second => 1,
            TimeUnit::Millisecond => 1_000,
            TimeUnit::Microsecond => 1_000_000,
            TimeUnit::Nanosecond => 1_000_000_000,
        };
    let day = i32::try_from(value.div_euclid(per_day)).ok()?;
    Some((day, value.rem_euclid(per_day) == 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::{binary_expr, cast, col};

    fn schema() -> DFSchema {
        DFSchema::try_from(Schema::new(vec![Field::new("d", DataType::Date32, true)])).unwrap()
    }

    fn widened() -> Expr {
        cast(col("d"), DataType::Timestamp(TimeUnit::Nanosecond, None))
    }

    fn at(nanos: i64) -> Expr {
        lit(ScalarValue::TimestampNanosecond(Some(nanos), None))
    }

    fn day(d: i32) -> Expr {
        lit(ScalarValue::Date32(Some(d)))
    }

    const DAY: i64 = 86_400_000_000_000;

    #[test]
    fn bounds_move_to_the_day_they_fall_in() {
        let s = schema();
        let cases = [
            // Midnight of day 10: the same comparison of day 10.
            (Operator::GtEq, 10 * DAY, Some((Operator::GtEq, 10))),
            (Operator::Lt, 10 * DAY, Some((Operator::Lt, 10))),
            (Operator::Eq, 10 * DAY, Some((Operator::Eq, 10))),
            // An hour into day 10: a day is at or after it only from day 11 on.
            (Operator::GtEq, 10 * DAY + 3600, Some((Operator::Gt, 10))),
            (Operator::Gt, 10 * DAY + 3600, Some((Operator::Gt, 10))),
            (Operator::Lt, 10 * DAY + 3600, Some((Operator::LtEq, 10))),
            (Operator::LtEq, 10 * DAY + 3600, Some((Operator::LtEq, 10))),
            // No day equals an instant that is not a midnight: left alone.
            (Operator::Eq, 10 * DAY + 3600, None),
            // Before 1970: the day below, not the one towards zero.
            (Operator::GtEq, -DAY / 2, Some((Operator::Gt, -1))),
        ];
        for (op, nanos, expected) in cases {
            let e = binary_expr(widened(), op, at(nanos));
            let out = bound(e.clone(), &s);
            match expected {
                Some((op, d)) => assert_eq!(out.data, binary_expr(col("d"), op, day(d))),
                None => assert!(!out.transformed && out.data == e, "{e}"),
            }
        }
    }

    #[test]
    fn a_constant_on_the_left_is_turned_around() {
        let e = binary_expr(at(10 * DAY + 1), Operator::Gt, widened());
        assert_eq!(
            bound(e, &schema()).data,
            binary_expr(col("d"), Operator::LtEq, day(10))
        );
    }
}
