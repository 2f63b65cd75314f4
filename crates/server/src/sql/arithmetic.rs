//! DuckDB's arithmetic where DataFusion's silently gives other numbers: division, and
//! casts to integers.
//!
//! **Division.** `/` divides as DOUBLE whatever the numbers (`7 / 2` is 3.5, `7 / 0`
//! is infinity); `//` divides integers as integers (truncating: `-7 // 2` is -3) and
//! anything else as `/` does. DataFusion's `/` truncates on integers and it plans no `//`,
//! so a ratio written for DuckDB would come out silently truncated.
//!
//! `a // b` is parsed into `__deltalite_integer_divide(a / b)` ([`INTEGER_DIVIDE`], by
//! `sql/normalize.rs`): a marker that passes its argument through. Then an analyzer rule
//! ([`DuckdbArithmetic`], before type coercion, when the operands' types are known)
//! makes every `/` of integers or decimals a DOUBLE division, except directly under the
//! marker when both operands are integers; it drops the markers.
//!
//! **Integer arithmetic fails on overflow** (DuckDB's `Out of Range Error`), where
//! DataFusion's `+`, `-` and `*` wrap (`9e18::BIGINT * 2` was negative). A rule after
//! type coercion ([`CheckedIntegers`], when both operands have their common type) makes
//! each such operation on integers [`CHECKED`]'s call, which runs Arrow's checked
//! kernels.
//!
//! **An integer literal takes the type of the integer it meets** (DuckDB's integer
//! literals), when its value fits: `k + 1`, `k * 2`, `k = 1` of an INTEGER `k` are
//! INTEGERs (DataFusion's literals are BIGINTs, so each was a BIGINT, and `CREATE TABLE
//! … AS SELECT k + 1` made a BIGINT column where DuckDB makes an INTEGER one); `ti + 1` of
//! a TINYINT is a TINYINT; beside a DECIMAL it is an INTEGER when it fits, so `d + 1` of
//! a DECIMAL(10,2) is a DECIMAL(13,2) as in DuckDB (a product still takes DataFusion's
//! precision, one more than the sum of both). The same rule, first, before the divisions
//! ([`literal_type`]). So do the literals among the arguments of `coalesce`, `nullif`,
//! `greatest`, `least` and a list, and the results of a `CASE`, an INTEGER among
//! literals only (`CASE WHEN … THEN 1 ELSE 0 END`, `[1, 2]`) ([`sibling_literals`]).
//! Arithmetic of literals only (`24 * 60`) is INTEGER arithmetic when each step fits
//! ([`literal_arithmetic`]; else BIGINT, where DuckDB fails with an overflow).
//!
//! **A truth test of a number is of the number cast to BOOLEAN** (DuckDB's `k IS TRUE`,
//! true for any non-zero `k`); DataFusion refused it ("Cannot infer common argument type
//! for comparison operation Int64 IS DISTINCT FROM Boolean"). The same rule, first
//! ([`truth_test`]).
//!
//! **Casts to integers round** (DuckDB), where Arrow's cast truncates: a DECIMAL half away
//! from zero (`CAST(2.5 AS INTEGER)` is 3, `-2.5` is -3), a DOUBLE or REAL half to even
//! (`2.5::DOUBLE` is 2, `3.5::DOUBLE` is 4). The same rule, after the divisions (whose
//! results are DOUBLEs by then), puts [`ROUND_TO_INTEGER`] under every `CAST`/`TRY_CAST`
//! of such a number to an integer type; the write paths round the values they cast into
//! an integer column with [`round_to_integer`] (`sql/mod.rs::assign_types`).
//!
//! **A DATE plus or minus an INTERVAL is a TIMESTAMP** (DuckDB), where DataFusion keeps a
//! DATE and drops the interval's time (`DATE '2024-01-01' + INTERVAL 90 MINUTE` was
//! `2024-01-01`). The same rule, first, casts the date to a TIMESTAMP ([`date_interval`]);
//! a comparison of a DATE column with such a bound is compared as dates again by
//! `sql/date_bounds.rs`, so it still prunes.
//!
//! **A DATE meeting a TIMESTAMP becomes that TIMESTAMP** (its type, its unit, its zone),
//! where DataFusion makes both nanoseconds without a zone, which end in 2262:
//! `valid_to < DATE '9999-12-31'`, `coalesce(valid_to, DATE '9999-12-31')` (dbt's
//! snapshots with `dbt_valid_to_current`), a `CASE`, an `IN` list or a `UNION` with both
//! failed. The same rule, first ([`date_interval`], [`dates_as_timestamps`],
//! [`union_dates`]).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Decimal128Type, Decimal256Type, Float32Type, Float64Type, i256};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{BinaryExpr, Case, Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, Projection, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Union, Volatility, cast,
};
use datafusion::optimizer::AnalyzerRule;

/// The marker `a // b` of two integers is planned as, around `a / b`.
pub(super) const INTEGER_DIVIDE: &str = "__deltalite_integer_divide";

/// The marker: its argument, unchanged (what `//` of two integers is, planned by
/// DataFusion's `/`). The analyzer rule removes it; were it left, it would still be right.
/// An unaliased `a // b` is named so, as `a / b` is named `a / b`.
pub(super) fn integer_divide_udf() -> ScalarUDF {
    super::udf::marker(
        INTEGER_DIVIDE,
        |a| Ok(Arc::clone(a)),
        None,
        |arg| match arg {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Divide,
                right,
            }) => format!("{} // {}", left.schema_name(), right.schema_name()),
            other => other.schema_name().to_string(),
        },
    )
}

/// The rule; it goes before type coercion (`sql/mod.rs::analyzer_rules`).
#[derive(Debug, Default)]
pub(super) struct DuckdbArithmetic;

impl AnalyzerRule for DuckdbArithmetic {
    fn name(&self) -> &str {
        "duckdb_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        // Not in `VALUES` rows: their schema was fixed from BIGINT literals.
        let plan = super::analyzer::rewrite_expressions_but_values(plan, |e, schema| {
            e.transform_up(|e| sibling_literals(e, schema))
        })?;
        let plan = super::analyzer::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| date_interval(e, schema))?
                .transform_parent(|e| e.transform_up(|e| dates_as_timestamps(e, schema)))?
                .transform_parent(|e| e.transform_up(|e| truth_test(e, schema)))?
                .transform_parent(|e| e.transform_down(literal_arithmetic))?
                .transform_parent(|e| e.transform_up(|e| literal_type(e, schema)))?
                .transform_parent(|e| e.transform_down(|e| divide(e, schema)))?
                .transform_parent(|e| e.transform_up(|e| round_cast(e, schema)))
        })?;
        // After the expressions: a `coalesce` of a DATE and a TIMESTAMP under a union is a
        // TIMESTAMP only once rewritten.
        Ok(plan.transform_up(union_dates)?.data)
    }
}

/// The functions whose arguments are coerced to one type, which is the result's.
const ALIKE_ARGUMENTS: [&str; 6] = ["coalesce", "nullif", "greatest", "least", "nvl", "ifnull"];

/// A `CASE`'s results: each `THEN`, and the `ELSE`.
fn results(case: &Case) -> Vec<&Expr> {
    case.when_then_expr
        .iter()
        .map(|(_, then)| then.as_ref())
        .chain(case.else_expr.as_deref())
        .collect()
}

/// `case` with `f` applied to each of its [`results`].
fn map_results(mut case: Case, f: impl Fn(Expr) -> Result<Expr>) -> Result<Case> {
    for (_, then) in &mut case.when_then_expr {
        let value = std::mem::replace(then.as_mut(), Expr::Literal(ScalarValue::Null, None));
        **then = f(value)?;
    }
    if let Some(other) = case.else_expr.take() {
        case.else_expr = Some(Box::new(f(*other)?));
    }
    Ok(case)
}

/// The arguments of `coalesce`, `nullif`, `greatest`, `least`, the results of a `CASE`,
/// and an `IN` list's value and items, where DATEs meet a TIMESTAMP: the DATEs cast to
/// the first TIMESTAMP's type.
fn dates_as_timestamps(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let date = |e: &Expr| -> Result<bool> {
        Ok(matches!(
            e.get_type(schema)?,
            DataType::Date32 | DataType::Date64
        ))
    };
    let target = |values: &[&Expr]| -> Result<Option<DataType>> {
        let mut timestamp = None;
        let mut dates = false;
        for v in values {
            match v.get_type(schema)? {
                t @ DataType::Timestamp(..) if timestamp.is_none() => timestamp = Some(t),
                DataType::Date32 | DataType::Date64 => dates = true,
                _ => {}
            }
        }
        Ok(timestamp.filter(|_| dates))
    };
    let widen = |e: Expr, to: &DataType| -> Result<Expr> {
        Ok(if date(&e)? { cast(e, to.clone()) } else { e })
    };
    match e {
        Expr::ScalarFunction(ScalarFunction { func, args })
            if ALIKE_ARGUMENTS.contains(&func.name()) =>
        {
            let Some(to) = target(&args.iter().collect::<Vec<_>>())? else {
                return Ok(Transformed::no(Expr::ScalarFunction(ScalarFunction {
                    func,
                    args,
                })));
            };
            let args = args
                .into_iter()
                .map(|a| widen(a, &to))
                .collect::<Result<_>>()?;
            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction {
                func,
                args,
            })))
        }
        Expr::Case(case) => {
            let Some(to) = target(&results(&case))? else {
                return Ok(Transformed::no(Expr::Case(case)));
            };
            Ok(Transformed::yes(Expr::Case(map_results(case, |e| {
                widen(e, &to)
            })?)))
        }
        Expr::InList(mut in_list) => {
            let values: Vec<&Expr> = std::iter::once(in_list.expr.as_ref())
                .chain(in_list.list.iter())
                .collect();
            let Some(to) = target(&values)? else {
                return Ok(Transformed::no(Expr::InList(in_list)));
            };
            in_list.expr = Box::new(widen(*in_list.expr, &to)?);
            in_list.list = in_list
                .list
                .into_iter()
                .map(|v| widen(v, &to))
                .collect::<Result<_>>()?;
            Ok(Transformed::yes(Expr::InList(in_list)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// A `UNION` (`EXCEPT`, `INTERSECT`) whose column is a DATE in some inputs and a TIMESTAMP
/// in others: the DATEs cast to the first TIMESTAMP's type, under each such input; its
/// types taken again from its inputs where they changed.
fn union_dates(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Union(union) = plan else {
        return Ok(Transformed::no(plan));
    };
    let width = union.schema.fields().len();
    let mut timestamps: Vec<Option<DataType>> = vec![None; width];
    let mut dates = vec![false; width];
    for input in &union.inputs {
        for (i, field) in input.schema().fields().iter().enumerate().take(width) {
            match field.data_type() {
                t @ DataType::Timestamp(..) if timestamps[i].is_none() => {
                    timestamps[i] = Some(t.clone())
                }
                DataType::Date32 | DataType::Date64 => dates[i] = true,
                _ => {}
            }
        }
    }
    let target = |i: usize, t: &DataType| match (&timestamps[i], t) {
        (Some(to), DataType::Date32 | DataType::Date64) if dates[i] => Some(to.clone()),
        _ => None,
    };
    let widened = |input: &LogicalPlan| {
        let fields = input.schema().fields();
        (0..fields.len().min(width)).any(|i| target(i, fields[i].data_type()).is_some())
    };
    // The union's own types were taken when it was planned, from its inputs' types
    // then; the expressions under it may have been rewritten since.
    let stale = union.inputs.iter().any(|input| {
        let fields = input.schema().fields();
        (0..fields.len().min(width))
            .any(|i| fields[i].data_type() != union.schema.field(i).data_type())
    });
    if !stale && !union.inputs.iter().any(|i| widened(i)) {
        return Ok(Transformed::no(LogicalPlan::Union(union)));
    }
    let inputs = union
        .inputs
        .into_iter()
        .map(|input| {
            if !widened(&input) {
                return Ok(input);
            }
            let schema = Arc::clone(input.schema());
            let columns = schema.iter().enumerate().map(|(i, (qualifier, field))| {
                let column = Expr::Column(datafusion::common::Column::new(
                    qualifier.cloned(),
                    field.name(),
                ));
                match target(i, field.data_type()) {
                    Some(to) => cast(column, to).alias_qualified(qualifier.cloned(), field.name()),
                    None => column,
                }
            });
            Ok(Arc::new(LogicalPlan::Projection(Projection::try_new(
                columns.collect(),
                input,
            )?)))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Transformed::yes(LogicalPlan::Union(
        Union::try_new_with_loose_types(inputs)?,
    )))
}

/// `=`, `<>`, `<`, `<=`, `>`, `>=`, `IS [NOT] DISTINCT FROM`.
fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// `date ± interval` and `interval + date`: the date cast to a TIMESTAMP (microseconds,
/// DuckDB's), so the interval's time is kept; a date compared with a timestamp, cast to
/// the timestamp's type.
fn date_interval(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return Ok(Transformed::no(e));
    };
    let date = |t: &DataType| matches!(t, DataType::Date32 | DataType::Date64);
    let interval = |t: &DataType| matches!(t, DataType::Interval(_));
    let timestamp = |x: Box<Expr>| {
        Box::new(cast(
            *x,
            DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
        ))
    };
    if matches!(op, Operator::Plus | Operator::Minus) {
        let (l, r) = (left.get_type(schema)?, right.get_type(schema)?);
        if date(&l) && interval(&r) {
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left: timestamp(left),
                op,
                right,
            })));
        }
        if op == Operator::Plus && interval(&l) && date(&r) {
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left,
                op,
                right: timestamp(right),
            })));
        }
    }
    // A date compared with a timestamp: the date cast to the timestamp's type. DataFusion
    // casts both to nanoseconds, which end in 2262: `valid_to = DATE '9999-12-31'` (dbt's
    // snapshots, `dbt_valid_to_current`) failed.
    if is_comparison(op) {
        let (l, r) = (left.get_type(schema)?, right.get_type(schema)?);
        if date(&l) && matches!(r, DataType::Timestamp(..)) {
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left: Box::new(cast(*left, r)),
                op,
                right,
            })));
        }
        if matches!(l, DataType::Timestamp(..)) && date(&r) {
            return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left,
                op,
                right: Box::new(cast(*right, l)),
            })));
        }
    }
    Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
        left,
        op,
        right,
    })))
}

/// The arguments of `coalesce`, `nullif`, `greatest`, `least` and a list (`[1, 2]`), and
/// the results of a `CASE`: a BIGINT literal among them takes the type of the integers
/// beside it when its value fits, as [`literal_type`] gives it beside one integer, else
/// an INTEGER when it fits (also beside a DECIMAL, and among literals only: DuckDB's
/// `CASE WHEN … THEN 1 ELSE 0 END`, `coalesce(i, 0)` of an INTEGER `i` and `[1, 2]` are
/// INTEGERs, where DataFusion made each a BIGINT, and a `CREATE TABLE … AS` a BIGINT
/// column). Beside a BIGINT, a float or anything else, the literals are left as they are.
fn sibling_literals(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::ScalarFunction(ScalarFunction { func, args })
            if ALIKE_ARGUMENTS.contains(&func.name()) || func.name() == "make_array" =>
        {
            let Some(to) = literals_target(&args.iter().collect::<Vec<_>>(), schema)? else {
                return Ok(Transformed::no(Expr::ScalarFunction(ScalarFunction {
                    func,
                    args,
                })));
            };
            let args = args.into_iter().map(|a| narrow_literal(a, &to)).collect();
            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction {
                func,
                args,
            })))
        }
        Expr::Case(case) => {
            let Some(to) = literals_target(&results(&case), schema)? else {
                return Ok(Transformed::no(Expr::Case(case)));
            };
            Ok(Transformed::yes(Expr::Case(map_results(case, |e| {
                Ok(narrow_literal(e, &to))
            })?)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// The type [`sibling_literals`] gives the BIGINT literals among `values`, if any.
fn literals_target(values: &[&Expr], schema: &DFSchema) -> Result<Option<DataType>> {
    let literal = |v: &Expr| {
        matches!(
            v,
            Expr::Literal(ScalarValue::Int64(_) | ScalarValue::Null, _)
        )
    };
    if !values
        .iter()
        .any(|v| matches!(v, Expr::Literal(ScalarValue::Int64(Some(_)), _)))
    {
        return Ok(None);
    }
    let mut widest: Option<DataType> = None;
    for v in values.iter().filter(|v| !literal(v)) {
        let t = v.get_type(schema)?;
        let rank = |t: &DataType| match t {
            DataType::Int8 => 1,
            DataType::Int16 => 2,
            DataType::Int32 => 3,
            _ => 0,
        };
        match t {
            DataType::Int8 | DataType::Int16 | DataType::Int32 => {
                if widest.as_ref().is_none_or(|w| rank(w) < rank(&t)) {
                    widest = Some(t);
                }
            }
            // Beside a DECIMAL, an INTEGER (as beside one in `literal_type`).
            DataType::Decimal128(..) | DataType::Decimal256(..) => {
                widest = Some(DataType::Int32);
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(widest.unwrap_or(DataType::Int32)))
}

/// `e`, a BIGINT literal, as one of `to` when its value fits, else an INTEGER when it
/// fits one; anything else as it is.
fn narrow_literal(e: Expr, to: &DataType) -> Expr {
    let Expr::Literal(value @ ScalarValue::Int64(Some(_)), metadata) = &e else {
        return e;
    };
    let fits = |t: &DataType| value.cast_to(t).ok().filter(|v| !v.is_null());
    match fits(to).or_else(|| fits(&DataType::Int32)) {
        Some(v) => Expr::Literal(v, metadata.clone()),
        None => e,
    }
}

/// `x IS [NOT] TRUE`, `IS [NOT] FALSE`, `IS [NOT] UNKNOWN` of a number: of `x` cast to
/// BOOLEAN.
fn truth_test(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let numeric = |x: &Expr| -> Result<bool> { Ok(x.get_type(schema)?.is_numeric()) };
    let boolean = |x: Box<Expr>| Box::new(cast(*x, DataType::Boolean));
    Ok(match e {
        Expr::IsTrue(x) if numeric(&x)? => Transformed::yes(Expr::IsTrue(boolean(x))),
        Expr::IsFalse(x) if numeric(&x)? => Transformed::yes(Expr::IsFalse(boolean(x))),
        Expr::IsNotTrue(x) if numeric(&x)? => Transformed::yes(Expr::IsNotTrue(boolean(x))),
        Expr::IsNotFalse(x) if numeric(&x)? => Transformed::yes(Expr::IsNotFalse(boolean(x))),
        Expr::IsUnknown(x) if numeric(&x)? => Transformed::yes(Expr::IsUnknown(boolean(x))),
        Expr::IsNotUnknown(x) if numeric(&x)? => Transformed::yes(Expr::IsNotUnknown(boolean(x))),
        e => Transformed::no(e),
    })
}

/// The functions whose result has their first argument's type, so that a literal's type
/// shows: DuckDB's is an INTEGER.
const LITERAL_TYPED: [&str; 4] = ["abs", "round", "trunc", "typeof"];

/// Arithmetic of integer literals only (`1 + 1`, `24 * 60`, `-(7 % 2)`) as INTEGERs, as
/// DuckDB types it, when every step's value fits one; else it stays BIGINT arithmetic
/// (where DuckDB fails with an overflow, `65536 * 65536` is 4294967296 here). Each
/// literal becomes an INTEGER; the operations then run as INTEGER arithmetic, whose
/// values are known to fit.
fn literal_arithmetic(e: Expr) -> Result<Transformed<Expr>> {
    if let Expr::ScalarFunction(mut f) = e {
        // A struct's literal fields (`{'a': 1}`, `struct_pack(a := 1)`): INTEGERs.
        if f.func.name() == "named_struct" {
            let mut changed = false;
            for value in f.args.iter_mut().skip(1).step_by(2) {
                if let Expr::Literal(ScalarValue::Int64(Some(v)), _) = value
                    && let Ok(v) = i32::try_from(*v)
                {
                    *value = Expr::Literal(ScalarValue::Int32(Some(v)), None);
                    changed = true;
                }
            }
            return Ok(Transformed::new_transformed(
                Expr::ScalarFunction(f),
                changed,
            ));
        }
        // `abs(1)`, `round(1)`, `typeof(1)`: the literal as the INTEGER DuckDB reads it
        // (not INTEGER's least value, whose `abs` is a BIGINT's).
        let literal = match f.args.first() {
            Some(Expr::Literal(ScalarValue::Int64(Some(v)), _))
                if LITERAL_TYPED.contains(&f.func.name()) && *v > i64::from(i32::MIN) =>
            {
                i32::try_from(*v).ok()
            }
            _ => None,
        };
        return Ok(match literal {
            Some(v) => {
                f.args[0] = Expr::Literal(ScalarValue::Int32(Some(v)), None);
                Transformed::yes(Expr::ScalarFunction(f))
            }
            None => Transformed::no(Expr::ScalarFunction(f)),
        });
    }
    if !matches!(e, Expr::BinaryExpr(_) | Expr::Negative(_)) || integer_constant(&e).is_none() {
        return Ok(Transformed::no(e));
    }
    let narrowed = e.transform_up(|e| match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), metadata) => match i32::try_from(v) {
            Ok(v) => Ok(Transformed::yes(Expr::Literal(
                ScalarValue::Int32(Some(v)),
                metadata,
            ))),
            Err(_) => Ok(Transformed::no(Expr::Literal(
                ScalarValue::Int64(Some(v)),
                metadata,
            ))),
        },
        e => Ok(Transformed::no(e)),
    })?;
    // The whole tree is done: its literals are no BIGINTs any more.
    Ok(Transformed::new(
        narrowed.data,
        true,
        TreeNodeRecursion::Jump,
    ))
}

/// The value of `e` when it is `+`, `-`, `*`, `%` and negation of integer literals only,
/// each literal and each step's value an INTEGER's.
fn integer_constant(e: &Expr) -> Option<i32> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => i32::try_from(*v).ok(),
        Expr::Negative(e) => integer_constant(e)?.checked_neg(),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (l, r) = (integer_constant(left)?, integer_constant(right)?);
            match op {
                Operator::Plus => l.checked_add(r),
                Operator::Minus => l.checked_sub(r),
                Operator::Multiply => l.checked_mul(r),
                // DuckDB's `%` of integers is a remainder, as Rust's; by 0 it is NULL.
                Operator::Modulo => l.checked_rem(r),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A BIGINT literal beside an integer of a narrower type, in an arithmetic or comparison
/// operation, as a literal of that type when its value fits.
fn literal_type(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return Ok(Transformed::no(e));
    };
    let typed = op.is_numerical_operators()
        || is_comparison(op)
        || matches!(
            op,
            Operator::BitwiseAnd
                | Operator::BitwiseOr
                | Operator::BitwiseXor
                | Operator::BitwiseShiftLeft
                | Operator::BitwiseShiftRight
        );
    let narrowed = |literal: &Expr, other: &Expr| -> Result<Option<Expr>> {
        let Expr::Literal(value @ ScalarValue::Int64(Some(_)), metadata) = literal else {
            return Ok(None);
        };
        let t = other.get_type(schema)?;
        // Beside a DECIMAL, an INTEGER when it fits: DuckDB's `d + 1` of a DECIMAL(10,2)
        // is a DECIMAL(13,2), where a BIGINT made it a DECIMAL(23,2).
        if matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) {
            return Ok(value
                .cast_to(&DataType::Int32)
                .ok()
                .filter(|v| !v.is_null())
                .map(|v| Expr::Literal(v, metadata.clone())));
        }
        if !t.is_integer() || t == DataType::Int64 {
            return Ok(None);
        }
        // A value that does not fit is an INTEGER if it fits one (`ti + 1000` of a
        // TINYINT), else stays a BIGINT.
        let fits = |t: &DataType| value.cast_to(t).ok().filter(|v| !v.is_null());
        Ok(fits(&t)
            .or_else(|| {
                matches!(
                    t,
                    DataType::Int8 | DataType::Int16 | DataType::UInt8 | DataType::UInt16
                )
                .then(|| fits(&DataType::Int32))
                .flatten()
            })
            .map(|v| Expr::Literal(v, metadata.clone())))
    };
    let (l, r) = match typed {
        true => (narrowed(&left, &right)?, narrowed(&right, &left)?),
        false => (None, None),
    };
    let changed = l.is_some() || r.is_some();
    let e = Expr::BinaryExpr(BinaryExpr {
        left: l.map_or(left, Box::new),
        op,
        right: r.map_or(right, Box::new),
    });
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

/// One expression's division, before its children (whose types are still the ones
/// written).
fn divide(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
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
                    let left = left.transform_down(|e| divide(e, schema))?.data;
                    let right = right.transform_down(|e| divide(e, schema))?.data;
                    let divide = Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(left),
                        Operator::Divide,
                        Box::new(right),
                    ));
                    Ok(Transformed::new(divide, true, TreeNodeRecursion::Jump))
                }
                // Anything else divides as `/` does (the marker is gone either way).
                other => Ok(Transformed::yes(divide(other, schema)?.data)),
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

/// The function a cast's number is rounded by before the cast to an integer truncates it.
pub(super) const ROUND_TO_INTEGER: &str = "__deltalite_round_to_integer";

/// One expression's cast to an integer, after its children (their divisions done).
fn round_cast(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let round = |expr: Box<Expr>| Box::new(round_to_integer_udf().call(vec![*expr]));
    Ok(match e {
        Expr::Cast(Cast { expr, field })
            if field.data_type().is_integer() && rounds(&expr.get_type(schema)?) =>
        {
            Transformed::yes(Expr::Cast(Cast {
                expr: round(expr),
                field,
            }))
        }
        Expr::TryCast(TryCast { expr, field })
            if field.data_type().is_integer() && rounds(&expr.get_type(schema)?) =>
        {
            Transformed::yes(Expr::TryCast(TryCast {
                expr: round(expr),
                field,
            }))
        }
        other => Transformed::no(other),
    })
}

/// Numbers a cast to an integer rounds (Arrow's cast would truncate them).
pub(crate) fn rounds(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Decimal256(..)
    )
}

/// `array`'s numbers rounded to integers as DuckDB's casts round them, in the same type
/// (the cast to an integer follows); other arrays unchanged.
pub(crate) fn round_to_integer(array: &ArrayRef) -> Result<ArrayRef> {
    Ok(match array.data_type() {
        DataType::Float64 => Arc::new(
            array
                .as_primitive::<Float64Type>()
                .unary::<_, Float64Type>(f64::round_ties_even),
        ),
        DataType::Float32 => Arc::new(
            array
                .as_primitive::<Float32Type>()
                .unary::<_, Float32Type>(f32::round_ties_even),
        ),
        DataType::Decimal128(precision, scale) if *scale > 0 => {
            let unit = 10_i128.pow(u32::from(scale.unsigned_abs()));
            Arc::new(
                array
                    .as_primitive::<Decimal128Type>()
                    .unary::<_, Decimal128Type>(|v| {
                        let (whole, rest) = (v / unit, v % unit);
                        let away = if rest.abs() * 2 >= unit {
                            v.signum()
                        } else {
                            0
                        };
                        (whole + away) * unit
                    })
                    .with_precision_and_scale(*precision, *scale)?,
            )
        }
        DataType::Decimal256(precision, scale) if *scale > 0 => {
            let unit = i256::from_i128(10).wrapping_pow(u32::from(scale.unsigned_abs()));
            let two = i256::from_i128(2);
            Arc::new(
                array
                    .as_primitive::<Decimal256Type>()
                    .unary::<_, Decimal256Type>(|v| {
                        let (whole, rest) = (v / unit, v % unit);
                        let away = if rest.wrapping_abs() * two >= unit {
                            v.signum()
                        } else {
                            i256::ZERO
                        };
                        (whole + away) * unit
                    })
                    .with_precision_and_scale(*precision, *scale)?,
            )
        }
        _ => Arc::clone(array),
    })
}

/// [`ROUND_TO_INTEGER`]: named as its argument, so `CAST(x AS INTEGER)` stays `x`'s cast.
fn round_to_integer_udf() -> ScalarUDF {
    super::udf::marker(ROUND_TO_INTEGER, round_to_integer, None, |arg| {
        arg.schema_name().to_string()
    })
}

/// The functions integer `+`, `-` and `*` are checked by (`__deltalite_checked_add`, …).
const CHECKED: &str = "__deltalite_checked";

/// The rule; it goes after type coercion (`sql/mod.rs::analyzer_rules`).
#[derive(Debug, Default)]
pub(super) struct CheckedIntegers;

impl AnalyzerRule for CheckedIntegers {
    fn name(&self) -> &str {
        "checked_integers"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        super::analyzer::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| checked(e, schema))
        })
    }
}

/// One `a + b`, `a - b` or `a * b` of two integers of one type, as its checked call.
fn checked(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply)
                && same_integers(&left.get_type(schema)?, &right.get_type(schema)?) =>
        {
            let udf = ScalarUDF::new_from_impl(Checked {
                op,
                signature: Signature::any(2, Volatility::Immutable),
            });
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(Arc::new(udf), vec![*left, *right]),
            )))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Two operands of one integer type.
fn same_integers(left: &DataType, right: &DataType) -> bool {
    left.is_integer() && left == right
}

/// Keeps its scalar operands scalars (Arrow's kernels take a `Datum`), where
/// [`super::udf::elementwise`] would make them arrays of the batch's length.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    op: Operator,
    signature: Signature,
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        match self.op {
            Operator::Plus => "__deltalite_checked_add",
            Operator::Minus => "__deltalite_checked_sub",
            _ => "__deltalite_checked_mul",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args.first().cloned().unwrap_or(DataType::Null))
    }
    /// Named as the operation it checks (`a + b`).
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        Ok(match args {
            [l, r] => format!("{} {} {}", l.schema_name(), self.op, r.schema_name()),
            _ => format!("{CHECKED}({})", args.len()),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::compute::kernels::numeric::{add, mul, sub};
        let [l, r] = <[ColumnarValue; 2]>::try_from(args.args).map_err(|_| {
            datafusion::error::DataFusionError::Internal(format!("{CHECKED} takes two arguments"))
        })?;
        let scalar = matches!(
            (&l, &r),
            (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
        );
        let datum = |v: &ColumnarValue| -> Result<Box<dyn arrow::array::Datum>> {
            Ok(match v {
                ColumnarValue::Array(a) => Box::new(Arc::clone(a)),
                ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
            })
        };
        let (l, r) = (datum(&l)?, datum(&r)?);
        let result = match self.op {
            Operator::Plus => add(l.as_ref(), r.as_ref()),
            Operator::Minus => sub(l.as_ref(), r.as_ref()),
            _ => mul(l.as_ref(), r.as_ref()),
        }?;
        Ok(if scalar {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        Array, ArrayRef, AsArray, Decimal128Array, Decimal256Array, Float32Array, Float64Array,
    };
    use arrow::datatypes::{Decimal128Type, Decimal256Type, Float32Type, Float64Type, i256};

    use super::round_to_integer;

    #[test]
    fn decimals_round_half_away_from_zero_and_keep_their_type() {
        let values: ArrayRef = Arc::new(
            Decimal128Array::from(vec![
                Some(25),
                Some(-25),
                Some(24),
                Some(995),
                None,
                Some(-5),
            ])
            .with_precision_and_scale(3, 1)
            .expect("decimal"),
        );
        let rounded = round_to_integer(&values).expect("rounds");
        assert_eq!(rounded.data_type(), values.data_type());
        let rounded = rounded.as_primitive::<Decimal128Type>();
        let got: Vec<Option<i128>> = rounded.iter().collect();
        assert_eq!(
            got,
            [Some(30), Some(-30), Some(20), Some(1000), None, Some(-10)]
        );

        let wide: ArrayRef = Arc::new(
            Decimal256Array::from(vec![
                Some(i256::from_i128(-1250)),
                Some(i256::from_i128(1249)),
            ])
            .with_precision_and_scale(60, 3)
            .expect("decimal"),
        );
        let rounded = round_to_integer(&wide).expect("rounds");
        let got: Vec<Option<i256>> = rounded.as_primitive::<Decimal256Type>().iter().collect();
        assert_eq!(
            got,
            [Some(i256::from_i128(-1000)), Some(i256::from_i128(1000))]
        );
    }

    #[test]
    fn floats_round_half_to_even() {
        let doubles: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(2.5),
            Some(3.5),
            Some(-0.5),
            Some(-2.7),
            None,
        ]));
        let rounded = round_to_integer(&doubles).expect("rounds");
        let got: Vec<Option<f64>> = rounded.as_primitive::<Float64Type>().iter().collect();
        assert_eq!(got, [Some(2.0), Some(4.0), Some(-0.0), Some(-3.0), None]);

        let reals: ArrayRef = Arc::new(Float32Array::from(vec![1.5_f32, 0.5]));
        let rounded = round_to_integer(&reals).expect("rounds");
        let got: Vec<Option<f32>> = rounded.as_primitive::<Float32Type>().iter().collect();
        assert_eq!(got, [Some(2.0), Some(0.0)]);
    }
}
