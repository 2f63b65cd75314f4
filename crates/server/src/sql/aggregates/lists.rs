//! DuckDB's list aggregates: `list_sum(l)`, `list_avg(l)`, `list_count(l)`, … — the
//! session's aggregate of that name over each list's elements, one value per row (NULL
//! for a NULL list; an empty list answers what the aggregate answers for no rows: NULL,
//! or 0 for `count`). DuckDB's `list_aggregate(l, 'sum')` (also `list_aggr`,
//! `array_aggregate`, `array_aggr`) is written as `list_sum(l)` by `sql/normalize.rs`.
//!
//! Each is the session's own aggregate, so a list's values add up as a column's do (a
//! `sum` of integers is DuckDB's HUGEINT, [`super::sums`]). `list_min` and `list_max` are
//! DataFusion's `array_min` and `array_max`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::logical_expr::{
    AggregateUDF, ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::prelude::SessionContext;

/// DuckDB's `list_<name>` functions and the aggregate each runs.
const LIST_AGGREGATES: [(&str, &str); 20] = [
    ("list_sum", "sum"),
    ("list_avg", "avg"),
    ("list_count", "count"),
    ("list_product", "product"),
    ("list_median", "median"),
    ("list_mode", "mode"),
    ("list_first", "first_value"),
    ("list_last", "last_value"),
    ("list_any_value", "any_value"),
    ("list_bool_and", "bool_and"),
    ("list_bool_or", "bool_or"),
    ("list_bit_and", "bit_and"),
    ("list_bit_or", "bit_or"),
    ("list_bit_xor", "bit_xor"),
    ("list_stddev_samp", "stddev_samp"),
    ("list_stddev_pop", "stddev_pop"),
    ("list_var_samp", "var_samp"),
    ("list_var_pop", "var_pop"),
    ("list_entropy", "entropy"),
    ("list_approx_count_distinct", "approx_distinct"),
];

/// The `list_<name>` function `list_aggregate(l, 'name')` stands for, if DuckDB has one.
pub(in crate::sql) fn list_function(aggregate: &str) -> Option<&'static str> {
    let aggregate = aggregate.trim().to_ascii_lowercase();
    let name = match aggregate.as_str() {
        "min" => "array_min",
        "max" => "array_max",
        "first" => "list_first",
        "last" => "list_last",
        "stddev" => "list_stddev_samp",
        "variance" => "list_var_samp",
        "approx_count_distinct" => "list_approx_count_distinct",
        other => LIST_AGGREGATES
            .iter()
            .find(|(_, of)| *of == other)
            .map(|(name, _)| *name)?,
    };
    Some(name)
}

/// Register a `list_<name>` function for each of [`LIST_AGGREGATES`] the session has
/// (after the session's aggregates are registered).
pub(super) fn register(ctx: &SessionContext) {
    for (name, aggregate) in LIST_AGGREGATES {
        if let Ok(aggregate) = ctx.udaf(aggregate) {
            ctx.register_udf(ScalarUDF::new_from_impl(ListAggregate {
                name,
                aggregate,
                signature: Signature::any(1, Volatility::Immutable),
            }));
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ListAggregate {
    name: &'static str,
    aggregate: Arc<AggregateUDF>,
    signature: Signature,
}

impl ListAggregate {
    /// The field the aggregate takes a list of `list`'s elements as (after its coercion).
    fn input(&self, list: &DataType) -> Result<FieldRef> {
        let element = match list {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                f.data_type().clone()
            }
            DataType::Null => DataType::Null,
            other => {
                return plan_err!(
                    "No function matches the given name and argument types '{}({other})'",
                    self.name
                );
            }
        };
        let field: FieldRef = Arc::new(Field::new("x", element, true));
        let [coerced] = fields_with_udf(&[field], self.aggregate.as_ref())?
            .try_into()
            .map_err(|_| {
                datafusion::error::DataFusionError::Plan(format!(
                    "{} takes one argument",
                    self.aggregate.name()
                ))
            })?;
        Ok(coerced)
    }
}

impl ScalarUDFImpl for ListAggregate {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [list] => Ok(self
                .aggregate
                .return_field(&[self.input(list)?])?
                .data_type()
                .clone()),
            _ => plan_err!("{} takes one list", self.name),
        }
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [list] = args.arg_fields else {
            return plan_err!("{} takes one list", self.name);
        };
        let returned = self
            .aggregate
            .return_field(&[self.input(list.data_type())?])?;
        Ok(Arc::new(Field::new(
            self.name,
            returned.data_type().clone(),
            true,
        )))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = matches!(args.args.as_slice(), [ColumnarValue::Scalar(_)]);
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [lists] = arrays.as_slice() else {
            return exec_err!("{} takes one list", self.name);
        };
        let input = self.input(lists.data_type())?;
        let returned = self.aggregate.return_field(&[Arc::clone(&input)])?;
        let schema = Schema::new(vec![input.as_ref().clone()]);
        let exprs: [Arc<dyn PhysicalExpr>; 1] = [Arc::new(Column::new("x", 0))];
        let fields = [Arc::clone(&input)];
        let aggregate = |values: ArrayRef| -> Result<ScalarValue> {
            let mut accumulator = self.aggregate.accumulator(AccumulatorArgs {
                return_field: Arc::clone(&returned),
                schema: &schema,
                ignore_nulls: false,
                order_bys: &[],
                is_reversed: false,
                name: self.name,
                is_distinct: false,
                exprs: &exprs,
                expr_fields: &fields,
            })?;
            let values = arrow::compute::cast(&values, input.data_type())?;
            accumulator.update_batch(&[values])?;
            accumulator.evaluate()
        };
        let row = |i: usize| -> Result<ScalarValue> {
            if lists.is_null(i) {
                return ScalarValue::try_from(args.return_field.data_type());
            }
            match lists.data_type() {
                DataType::List(_) => aggregate(lists.as_list::<i32>().value(i)),
                DataType::LargeList(_) => aggregate(lists.as_list::<i64>().value(i)),
                DataType::FixedSizeList(..) => aggregate(lists.as_fixed_size_list().value(i)),
                _ => ScalarValue::try_from(args.return_field.data_type()),
            }
        };
        let values = (0..lists.len()).map(row).collect::<Result<Vec<_>>>()?;
        let out = if values.is_empty() {
            arrow::array::new_empty_array(args.return_field.data_type())
        } else {
            ScalarValue::iter_to_array(values)?
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}
