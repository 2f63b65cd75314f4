//! DuckDB's `sum` of integers: a HUGEINT, which Arrow carries as `DECIMAL(38,0)` (DuckDB's
//! own Arrow results do). DataFusion's sums a `BIGINT` into a `BIGINT` and wraps on
//! overflow: `sum` of `i64::MAX` and 5 was a large negative number, silently.
//!
//! `sum` is replaced, under its name, by DataFusion's own for every other type, and for
//! integers (`count_if` is one, `sql/normalize.rs`) by accumulators of our own that add
//! the `BIGINT`s (or `UBIGINT`s) DataFusion's coercion gives into 128 bits: grouped,
//! whole, over a sliding window frame, and `DISTINCT`. 128 bits hold the sum of 2^64
//! `BIGINT`s. Casting the argument to `DECIMAL(38,0)` for DataFusion's decimal sum gave
//! the same answers at 1.3-1.8x the time of a `BIGINT` sum.
//!
//! A sum of DECIMAL(p,s)s is DuckDB's DECIMAL(38,s) (DataFusion's: DECIMAL(p+10,s)): the
//! argument is coerced to DECIMAL(38,s), whose DataFusion sum is one.

use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DECIMAL128_MAX_PRECISION, DataType, Decimal128Type, Field, FieldRef,
    Int64Type, UInt64Type,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, Expr, GroupsAccumulator,
    Operator, ReversedUDAF, SetMonotonicity, Signature, Volatility,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::accumulate::NullState;

use super::{DistinctValues, kept};

/// The type a sum of integers has: DuckDB's HUGEINT as Arrow carries it.
const HUGEINT: DataType = DataType::Decimal128(DECIMAL128_MAX_PRECISION, 0);

/// `sum`, replacing DataFusion's under its name.
pub(super) fn sum_udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(IntegerSums {
        inner: AggregateUDF::new_from_impl(Sum::new()),
        signature: Signature::user_defined(Volatility::Immutable),
    })
}

/// DataFusion's `sum`, with integers summed into a HUGEINT.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerSums {
    inner: AggregateUDF,
    /// Ours: DataFusion's coercion, and `NULL` to a `BIGINT` ([`Self::coerce_types`]).
    signature: Signature,
}

/// The integer types DataFusion's coercion hands a sum: every signed one becomes a
/// `BIGINT`, every unsigned one a `UBIGINT`.
#[derive(Clone, Copy)]
enum Integers {
    Signed,
    Unsigned,
}

impl Integers {
    fn of(arg: &DataType) -> Option<Self> {
        match arg {
            DataType::Int64 => Some(Self::Signed),
            DataType::UInt64 => Some(Self::Unsigned),
            _ => None,
        }
    }
}

/// The integer argument of a sum whose accumulators are ours (`None`: DataFusion's).
fn integers(args: &AccumulatorArgs) -> Option<Integers> {
    match args.expr_fields {
        [arg] => Integers::of(arg.data_type()),
        _ => None,
    }
}

impl AggregateUDFImpl for IntegerSums {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        // `sum(NULL)` is DuckDB's HUGEINT NULL (DataFusion refused it).
        if let [DataType::Null] = arg_types {
            return Ok(vec![DataType::Int64]);
        }
        let fields: Vec<FieldRef> = arg_types
            .iter()
            .map(|t| Arc::new(Field::new("", t.clone(), true)))
            .collect();
        Ok(fields_with_udf(&fields, &self.inner)?
            .iter()
            .map(|f| match f.data_type() {
                // DuckDB's sum of a DECIMAL(p,s) is a DECIMAL(38,s) (DataFusion's
                // p+10): summed as one, it is one.
                DataType::Decimal128(_, scale) => {
                    DataType::Decimal128(DECIMAL128_MAX_PRECISION, *scale)
                }
                t => t.clone(),
            })
            .collect())
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [arg] if Integers::of(arg).is_some() || arg == &DataType::Null => Ok(HUGEINT),
            _ => self.inner.return_type(arg_types),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(match (integers(&args), args.is_distinct) {
            (Some(Integers::Signed), false) => Box::new(Whole::<Int64Type>::default()),
            (Some(Integers::Unsigned), false) => Box::new(Whole::<UInt64Type>::default()),
            (Some(Integers::Signed), true) => Box::new(Distinct::<Int64Type>::default()),
            (Some(Integers::Unsigned), true) => Box::new(Distinct::<UInt64Type>::default()),
            (None, _) => self.inner.accumulator(args)?,
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        // DataFusion's: a sum, or a list of the distinct values, of the return type.
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(match integers(&args) {
            Some(Integers::Signed) => Box::new(Grouped::<Int64Type>::default()),
            Some(Integers::Unsigned) => Box::new(Grouped::<UInt64Type>::default()),
            None => self.inner.create_groups_accumulator(args)?,
        })
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        // Ours retract.
        match integers(&args) {
            Some(_) => self.accumulator(args),
            None => self.inner.create_sliding_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        // A sum is its own reverse; this function, not DataFusion's, is that.
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.inner().order_sensitivity()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.inner().set_monotonicity(data_type)
    }

    fn simplify_expr_op_literal(
        &self,
        agg_function: &AggregateFunction,
        arg: &Expr,
        op: Operator,
        lit: &Expr,
        arg_is_left: bool,
    ) -> Result<Option<Expr>> {
        self.inner
            .inner()
            .simplify_expr_op_literal(agg_function, arg, op, lit, arg_is_left)
    }
}

/// A HUGEINT value, `None` for NULL.
fn hugeint(sum: Option<i128>) -> ScalarValue {
    ScalarValue::Decimal128(sum, DECIMAL128_MAX_PRECISION, 0)
}

/// The sum of an array's non-null integers, and how many there were.
fn add_up<T>(values: &ArrayRef) -> (i128, u64)
where
    T: ArrowPrimitiveType,
    T::Native: Into<i128>,
{
    let values = values.as_primitive::<T>();
    let raw = values.values();
    match values.nulls().filter(|n| n.null_count() > 0) {
        None => (raw.iter().map(|&v| v.into()).sum(), raw.len() as u64),
        Some(nulls) => (
            nulls.valid_indices().map(|i| raw[i].into()).sum(),
            (raw.len() - nulls.null_count()) as u64,
        ),
    }
}

/// One sum of integers (no `GROUP BY`, or a window's frame, which it retracts from).
#[derive(Debug)]
struct Whole<T> {
    sum: i128,
    /// Values added and not retracted: none is NULL.
    count: u64,
    integers: PhantomData<fn() -> T>,
}

impl<T> Default for Whole<T> {
    fn default() -> Self {
        Self {
            sum: 0,
            count: 0,
            integers: PhantomData,
        }
    }
}

impl<T> Accumulator for Whole<T>
where
    T: ArrowPrimitiveType + std::fmt::Debug,
    T::Native: Into<i128>,
{
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (sum, count) = add_up::<T>(&values[0]);
        self.sum = self.sum.wrapping_add(sum);
        self.count += count;
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (sum, count) = add_up::<T>(&values[0]);
        self.sum = self.sum.wrapping_sub(sum);
        self.count -= count;
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        // Partial sums, NULL where a part saw no value.
        let (sum, count) = add_up::<Decimal128Type>(&states[0]);
        self.sum = self.sum.wrapping_add(sum);
        self.count += count;
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(hugeint((self.count > 0).then_some(self.sum)))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// `sum(DISTINCT …)` of integers.
#[derive(Debug)]
struct Distinct<T> {
    values: DistinctValues,
    integers: PhantomData<fn() -> T>,
}

impl<T> Default for Distinct<T> {
    fn default() -> Self {
        Self {
            values: DistinctValues::default(),
            integers: PhantomData,
        }
    }
}

impl<T> Accumulator for Distinct<T>
where
    T: ArrowPrimitiveType + std::fmt::Debug,
    T::Native: Into<i128>,
{
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_primitive::<T>();
        self.values.add(values.iter().map(|v| v.map(Into::into)));
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = values[0].as_primitive::<T>();
        self.values
            .retract(values.iter().map(|v| v.map(Into::into)));
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.values.merge(&states[0]);
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.values.state(&HUGEINT)])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(hugeint(self.values.sum().map(|(sum, _)| sum)))
    }

    fn size(&self) -> usize {
        self.values.size()
    }
}

/// The sums of a `GROUP BY`, one per group, as DataFusion's own grouped sum keeps them.
#[derive(Debug)]
struct Grouped<T> {
    sums: Vec<i128>,
    /// Which groups have seen a value (the others are NULL).
    nulls: NullState,
    integers: PhantomData<fn() -> T>,
}

impl<T> Default for Grouped<T> {
    fn default() -> Self {
        Self {
            sums: Vec::new(),
            nulls: NullState::new(),
            integers: PhantomData,
        }
    }
}

impl<T> Grouped<T> {
    fn add<V>(
        &mut self,
        values: &PrimitiveArray<V>,
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) where
        V: ArrowPrimitiveType + Send,
        V::Native: Into<i128>,
    {
        self.sums.resize(total_num_groups, 0);
        let sums = &mut self.sums;
        self.nulls.accumulate(
            group_indices,
            values,
            opt_filter,
            total_num_groups,
            |group, value| sums[group] = sums[group].wrapping_add(value.into()),
        );
    }
}

impl<T> GroupsAccumulator for Grouped<T>
where
    T: ArrowPrimitiveType + Send + std::fmt::Debug,
    T::Native: Into<i128>,
{
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(
            values[0].as_primitive::<T>(),
            group_indices,
            opt_filter,
            total_num_groups,
        );
        Ok(())
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(
            values[0].as_primitive::<Decimal128Type>(),
            group_indices,
            None,
            total_num_groups,
        );
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let nulls = self.nulls.build(emit_to);
        Ok(Arc::new(
            PrimitiveArray::<Decimal128Type>::new(sums.into(), nulls).with_data_type(HUGEINT),
        ))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.evaluate(emit_to)?])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row its own group: its value, NULL where it is NULL or filtered out.
        let values = values[0].as_primitive::<T>();
        let nulls = kept(values.nulls(), opt_filter);
        let sums: Vec<i128> = values.values().iter().map(|&v| v.into()).collect();
        Ok(vec![Arc::new(
            PrimitiveArray::<Decimal128Type>::new(sums.into(), nulls).with_data_type(HUGEINT),
        )])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<i128>() + self.nulls.size()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// Every path of ours (grouped, with partial aggregation skipped, merged from
    /// partitions, whole, DISTINCT, over a sliding frame) against DataFusion's own sum of
    /// the values cast to `DECIMAL(38,0)`, over sums far past `BIGINT`'s range.
    #[tokio::test]
    async fn integer_sums_are_exact_on_every_path() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let part = |from: i64| {
            let rows = from..from + 500;
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from_iter_values(rows.clone())),
                    Arc::new(Int64Array::from_iter(
                        rows.clone().map(|i| (i % 11 != 0).then_some(i % 7)),
                    )),
                    Arc::new(Int64Array::from_iter(rows.map(|i| {
                        (i % 5 != 0).then_some(if i % 3 == 0 {
                            i64::MIN + i
                        } else {
                            i64::MAX - i
                        })
                    }))),
                ],
            )
            .expect("batch")
        };
        let table = MemTable::try_new(
            Arc::clone(&schema),
            vec![vec![part(0)], vec![part(500)], vec![part(1000)]],
        )
        .expect("table");
        let mut config = SessionConfig::new()
            .with_target_partitions(3)
            .with_batch_size(64);
        let execution = &mut config.options_mut().execution;
        // After the first rows, the partial aggregate passes each row on as its own state.
        execution.skip_partial_aggregation_probe_rows_threshold = 10;
        execution.skip_partial_aggregation_probe_ratio_threshold = 0.0;
        let ctx = SessionContext::new_with_config(config);
        ctx.register_udaf(super::sum_udaf());
        ctx.register_table("t", Arc::new(table)).expect("register");
        for (ours, theirs, from) in [
            ("sum(v)", "sum(d)", "t GROUP BY k"),
            (
                "sum(v) FILTER (WHERE i % 2 = 0)",
                "sum(d) FILTER (WHERE i % 2 = 0)",
                "t GROUP BY k",
            ),
            ("sum(v)", "sum(d)", "t"),
            (
                "sum(DISTINCT v % 1000000)",
                "sum(DISTINCT d % 1000000)",
                "t",
            ),
            ("sum(v)", "sum(d)", "t WHERE v IS NULL"),
            (
                "sum(v) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
                "sum(d) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
                "t",
            ),
        ] {
            let sql = format!(
                "SELECT count(*) AS n, count(*) FILTER (WHERE a IS DISTINCT FROM b) AS differ, \
                 count(*) FILTER (WHERE abs(a) > 9223372036854775807) AS past \
                 FROM (SELECT {ours} AS a, {theirs} AS b FROM {from})",
                from = from.replacen(
                    't',
                    "(SELECT *, CAST(v AS DECIMAL(38,0)) AS d FROM t) AS t",
                    1
                )
            );
            let batches = ctx
                .sql(&sql)
                .await
                .expect(&sql)
                .collect()
                .await
                .expect(&sql);
            let column = |i: usize| {
                batches[0]
                    .column(i)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(0)
            };
            let (n, differ, past) = (column(0), column(1), column(2));
            assert!(n > 0, "{sql}");
            assert_eq!(differ, 0, "{sql}");
            if !from.contains("IS NULL") && !ours.contains("DISTINCT") {
                assert!(past > 0, "no sum past BIGINT: {sql}");
            }
            let typed = ctx
                .sql(&format!("SELECT {ours} FROM {from}"))
                .await
                .expect(&sql);
            assert_eq!(
                typed.schema().field(0).data_type(),
                &super::HUGEINT,
                "{sql}"
            );
            assert!(batches[0].column(0).null_count() == 0);
        }
    }
}
