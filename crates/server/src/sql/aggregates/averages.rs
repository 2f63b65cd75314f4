//! DuckDB's `avg` of a DECIMAL: a DOUBLE, the exact sum divided by the count. DataFusion's
//! is a DECIMAL with four more digits of scale, truncated: `avg` of 1.0, 2.0 and 2.0 was
//! 1.66666 where DuckDB answers 1.6666666666666667, so a price's average silently lost
//! its digits.
//!
//! `avg` (and its alias `mean`) is replaced, under its name, by DataFusion's own for every
//! other type, and for a `DECIMAL(p, s)` by accumulators of ours that add the unscaled
//! values into 128 bits and divide once at the end, `sum / (count * 10^s)` in DOUBLEs, as
//! DuckDB does: grouped, whole, over a sliding window frame, and `DISTINCT`.

use std::mem::size_of;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, PrimitiveArray, UInt64Array,
};
use arrow::datatypes::{
    DECIMAL128_MAX_PRECISION, DataType, Decimal128Type, Field, FieldRef, UInt64Type,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_aggregate::average::Avg;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{AggregateOrderSensitivity, format_state_name};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, SetMonotonicity, Signature,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::accumulate::NullState;

use super::{DistinctValues, kept};

/// `avg`, replacing DataFusion's under its name.
pub(super) fn avg_udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(DecimalAverages {
        inner: AggregateUDF::new_from_impl(Avg::new()),
    })
}

/// DataFusion's `avg`, with DECIMALs averaged into a DOUBLE.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DecimalAverages {
    inner: AggregateUDF,
}

/// The scale of a DECIMAL argument whose average is ours (`None`: DataFusion's).
fn scale_of(arg: &DataType) -> Option<i8> {
    match arg {
        DataType::Decimal128(_, scale) => Some(*scale),
        _ => None,
    }
}

fn decimal_scale(args: &AccumulatorArgs) -> Option<i8> {
    match args.expr_fields {
        [arg] => scale_of(arg.data_type()),
        _ => None,
    }
}

/// The sum's type in a partial state: its digits unbounded but for Arrow's 38.
fn sum_type(scale: i8) -> DataType {
    DataType::Decimal128(DECIMAL128_MAX_PRECISION, scale)
}

/// `sum / (count * 10^scale)`, as DuckDB's decimal average finishes.
fn mean(sum: i128, count: u64, scale: i8) -> f64 {
    sum as f64 / (count as f64 * 10f64.powi(i32::from(scale)))
}

impl AggregateUDFImpl for DecimalAverages {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [arg] if scale_of(arg).is_some() => Ok(DataType::Float64),
            _ => self.inner.return_type(arg_types),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(match (decimal_scale(&args), args.is_distinct) {
            (Some(scale), false) => Box::new(Whole {
                sum: 0,
                count: 0,
                scale,
            }),
            (Some(scale), true) => Box::new(Distinct {
                values: DistinctValues::default(),
                scale,
            }),
            (None, _) => self.inner.accumulator(args)?,
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let Some(scale) = args
            .input_fields
            .first()
            .and_then(|f| scale_of(f.data_type()))
        else {
            return self.inner.state_fields(args);
        };
        Ok(if args.is_distinct {
            vec![Arc::new(Field::new_list(
                format_state_name(args.name, "avg distinct"),
                Field::new_list_field(sum_type(scale), true),
                false,
            ))]
        } else {
            vec![
                Arc::new(Field::new(
                    format_state_name(args.name, "count"),
                    DataType::UInt64,
                    true,
                )),
                Arc::new(Field::new(
                    format_state_name(args.name, "sum"),
                    sum_type(scale),
                    true,
                )),
            ]
        })
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(match decimal_scale(&args) {
            Some(scale) => Box::new(Grouped {
                sums: Vec::new(),
                counts: Vec::new(),
                nulls: NullState::new(),
                scale,
            }),
            None => self.inner.create_groups_accumulator(args)?,
        })
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        // Ours retract.
        match decimal_scale(&args) {
            Some(_) => self.accumulator(args),
            None => self.inner.create_sliding_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        // An average is its own reverse; this function, not DataFusion's, is that.
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
}

/// The unscaled sum of an array's non-null DECIMALs, and how many there were.
fn add_up(values: &ArrayRef) -> (i128, u64) {
    let values = values.as_primitive::<Decimal128Type>();
    let raw = values.values();
    match values.nulls().filter(|n| n.null_count() > 0) {
        None => (
            raw.iter().fold(0i128, |a, &v| a.wrapping_add(v)),
            raw.len() as u64,
        ),
        Some(nulls) => (
            nulls
                .valid_indices()
                .fold(0i128, |a, i| a.wrapping_add(raw[i])),
            (raw.len() - nulls.null_count()) as u64,
        ),
    }
}

/// One average (no `GROUP BY`, or a window's frame, which it retracts from).
#[derive(Debug)]
struct Whole {
    sum: i128,
    count: u64,
    scale: i8,
}

impl Accumulator for Whole {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (sum, count) = add_up(&values[0]);
        self.sum = self.sum.wrapping_add(sum);
        self.count += count;
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (sum, count) = add_up(&values[0]);
        self.sum = self.sum.wrapping_sub(sum);
        self.count -= count;
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let counts = states[0].as_primitive::<UInt64Type>();
        self.count += counts.iter().flatten().sum::<u64>();
        self.sum = self.sum.wrapping_add(add_up(&states[1]).0);
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.count)),
            ScalarValue::Decimal128(Some(self.sum), DECIMAL128_MAX_PRECISION, self.scale),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(
            (self.count > 0).then(|| mean(self.sum, self.count, self.scale)),
        ))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

/// `avg(DISTINCT …)`.
#[derive(Debug)]
struct Distinct {
    values: DistinctValues,
    scale: i8,
}

impl Accumulator for Distinct {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values
            .add(values[0].as_primitive::<Decimal128Type>().iter());
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values
            .retract(values[0].as_primitive::<Decimal128Type>().iter());
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
        Ok(vec![self.values.state(&sum_type(self.scale))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(
            self.values
                .sum()
                .map(|(sum, count)| mean(sum, count, self.scale)),
        ))
    }

    fn size(&self) -> usize {
        self.values.size()
    }
}

/// The averages of a `GROUP BY`, one sum and count per group.
#[derive(Debug)]
struct Grouped {
    sums: Vec<i128>,
    counts: Vec<u64>,
    /// Which groups have seen a value (the others are NULL).
    nulls: NullState,
    scale: i8,
}

impl Grouped {
    fn resize(&mut self, total_num_groups: usize) {
        self.sums.resize(total_num_groups, 0);
        self.counts.resize(total_num_groups, 0);
    }
}

impl GroupsAccumulator for Grouped {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.resize(total_num_groups);
        let (sums, counts) = (&mut self.sums, &mut self.counts);
        self.nulls.accumulate(
            group_indices,
            values[0].as_primitive::<Decimal128Type>(),
            opt_filter,
            total_num_groups,
            |group, value| {
                sums[group] = sums[group].wrapping_add(value);
                counts[group] += 1;
            },
        );
        Ok(())
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.resize(total_num_groups);
        let partial_counts = values[0].as_primitive::<UInt64Type>();
        for (&group, count) in group_indices.iter().zip(partial_counts.iter()) {
            self.counts[group] += count.unwrap_or(0);
        }
        let sums = &mut self.sums;
        self.nulls.accumulate(
            group_indices,
            values[1].as_primitive::<Decimal128Type>(),
            None,
            total_num_groups,
            |group, value| sums[group] = sums[group].wrapping_add(value),
        );
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        let nulls = self.nulls.build(emit_to);
        let means: Vec<f64> = sums
            .iter()
            .zip(&counts)
            .map(|(&sum, &count)| {
                if count == 0 {
                    0.0
                } else {
                    mean(sum, count, self.scale)
                }
            })
            .collect();
        Ok(Arc::new(Float64Array::new(means.into(), nulls)))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        let nulls = self.nulls.build(emit_to);
        Ok(vec![
            Arc::new(UInt64Array::from(counts)),
            Arc::new(
                PrimitiveArray::<Decimal128Type>::new(sums.into(), nulls)
                    .with_data_type(sum_type(self.scale)),
            ),
        ])
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row its own group: a count of 1 and its value, or 0 and NULL where it is
        // NULL or filtered out.
        let values = values[0].as_primitive::<Decimal128Type>();
        let nulls = kept(values.nulls(), opt_filter);
        let counts: UInt64Array = (0..values.len())
            .map(|i| u64::from(nulls.as_ref().is_none_or(|n| n.is_valid(i))))
            .map(Some)
            .collect();
        Ok(vec![
            Arc::new(counts),
            Arc::new(
                PrimitiveArray::<Decimal128Type>::new(values.values().clone(), nulls)
                    .with_data_type(sum_type(self.scale)),
            ),
        ])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<i128>()
            + self.counts.capacity() * size_of::<u64>()
            + self.nulls.size()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Decimal128Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// Every path of ours (grouped, with partial aggregation skipped, merged from
    /// partitions, whole, DISTINCT, over a sliding frame) against DataFusion's decimal
    /// sum and count of the same values, divided: a DOUBLE, equal to the last bits or
    /// within one rounding of them.
    #[tokio::test]
    async fn decimal_averages_are_doubles_of_the_exact_sum() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            Field::new("k", DataType::Int64, true),
            Field::new("d", DataType::Decimal128(12, 3), true),
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
                    Arc::new(
                        Decimal128Array::from_iter(rows.map(|i| {
                            (i % 5 != 0).then_some(i128::from(i) * 1_000_003 % 999_999_999 - 4_000)
                        }))
                        .with_precision_and_scale(12, 3)
                        .expect("decimal"),
                    ),
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
        execution.skip_partial_aggregation_probe_rows_threshold = 10;
        execution.skip_partial_aggregation_probe_ratio_threshold = 0.0;
        let ctx = SessionContext::new_with_config(config);
        ctx.register_udaf(super::avg_udaf());
        ctx.register_table("t", Arc::new(table)).expect("register");
        let exact = |sum: &str, count: &str| format!("CAST({sum} AS DOUBLE) / {count}");
        for (ours, theirs, from) in [
            ("avg(d)", exact("sum(d)", "count(d)"), "t GROUP BY k"),
            (
                "avg(d) FILTER (WHERE i % 2 = 0)",
                exact(
                    "sum(d) FILTER (WHERE i % 2 = 0)",
                    "count(d) FILTER (WHERE i % 2 = 0)",
                ),
                "t GROUP BY k",
            ),
            ("mean(d)", exact("sum(d)", "count(d)"), "t"),
            (
                "avg(DISTINCT d)",
                exact("sum(DISTINCT d)", "count(DISTINCT d)"),
                "t",
            ),
            ("avg(d)", exact("sum(d)", "count(d)"), "t WHERE d IS NULL"),
            (
                "avg(d) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
                exact(
                    "sum(d) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
                    "count(d) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
                ),
                "t",
            ),
        ] {
            let sql = format!(
                "SELECT count(*) AS n, count(*) FILTER (WHERE abs(a - b) > abs(b) * 1e-15 \
                 OR (a IS NULL) <> (b IS NULL)) AS differ, count(a) AS answered \
                 FROM (SELECT {ours} AS a, {theirs} AS b FROM {from})"
            );
            let batches = ctx
                .sql(&sql)
                .await
                .expect(&sql)
                .collect()
                .await
                .expect(&sql);
            let column = |i: usize| batches[0].column(i).as_primitive::<Int64Type>().value(0);
            let (n, differ, answered) = (column(0), column(1), column(2));
            assert!(n > 0, "{sql}");
            assert_eq!(differ, 0, "{sql}");
            assert_eq!(answered > 0, !from.contains("IS NULL"), "{sql}");
            let typed = ctx.sql(&format!("SELECT {ours} FROM t")).await.expect(&sql);
            assert_eq!(typed.schema().field(0).data_type(), &DataType::Float64);
        }
        // 1.0, 2.0, 2.0: DuckDB's 1.6666666666666667, not a truncated DECIMAL.
        let third = ctx
            .sql("SELECT avg(x) FROM (VALUES (1.0), (2.0), (2.0)) t(x)")
            .await
            .expect("plan")
            .collect()
            .await
            .expect("run");
        assert_eq!(
            third[0].column(0).as_primitive::<Float64Type>().value(0),
            5.0 / 3.0
        );
    }
}
