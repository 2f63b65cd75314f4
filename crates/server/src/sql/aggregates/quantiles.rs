//! DuckDB's `quantile_disc(x, q)` (and `quantile`, its other name), which DataFusion
//! lacks: the value at position `max(1, n - floor(n - q·n))` of the `n` non-NULL values
//! in order, as DuckDB picks it; NULL over none. `q` is a constant between 0 and 1.
//! (`quantile_cont` and `median` are DataFusion's.)

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{concat, filter, is_not_null, sort_to_indices, take};
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Signature, TypeSignature,
    Volatility,
};

/// `quantile_disc`, also named `quantile`.
pub(super) fn udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(QuantileDisc {
        aliases: vec!["quantile".to_string()],
        signature: Signature::one_of(vec![TypeSignature::Any(2)], Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct QuantileDisc {
    aliases: Vec<String>,
    signature: Signature,
}

impl AggregateUDFImpl for QuantileDisc {
    fn name(&self) -> &str {
        "quantile_disc"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let empty = RecordBatch::new_empty(Arc::new(Schema::empty()));
        let q = match args.exprs.get(1).map(|e| e.evaluate(&empty)) {
            Some(Ok(ColumnarValue::Scalar(q))) => q,
            _ => {
                return plan_err!(
                    "The \"quantile\" argument in function \"quantile_disc\" \
                     must be a constant expression"
                );
            }
        };
        let q = match q.cast_to(&DataType::Float64)? {
            ScalarValue::Float64(Some(q)) if (0.0..=1.0).contains(&q) => q,
            _ => {
                return plan_err!(
                    "QUANTILE can only take parameters in the range [0, 1], \
                     got {q}"
                );
            }
        };
        Ok(Box::new(Values {
            q,
            data_type: args.expr_fields[0].data_type().clone(),
            parts: Vec::new(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new_list(
            format_state_name(args.name, "values"),
            Field::new_list_field(args.input_fields[0].data_type().clone(), true),
            true,
        ))])
    }
}

/// The non-NULL values seen, in the batches they came in.
#[derive(Debug)]
struct Values {
    q: f64,
    data_type: DataType,
    parts: Vec<ArrayRef>,
}

impl Values {
    fn add(&mut self, values: &ArrayRef) -> Result<()> {
        let valid = filter(values, &is_not_null(values)?)?;
        if !valid.is_empty() {
            self.parts.push(valid);
        }
        Ok(())
    }

    fn all(&self) -> Result<Option<ArrayRef>> {
        if self.parts.is_empty() {
            return Ok(None);
        }
        let parts: Vec<&dyn Array> = self.parts.iter().map(|p| p.as_ref()).collect();
        Ok(Some(concat(&parts)?))
    }
}

impl Accumulator for Values {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        for part in states[0].as_list::<i32>().iter().flatten() {
            self.add(&part)?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let all = match self.all()? {
            Some(all) => all,
            None => arrow::array::new_empty_array(&self.data_type),
        };
        Ok(vec![ScalarValue::List(Arc::new(
            arrow::array::ListArray::new(
                Arc::new(Field::new_list_field(self.data_type.clone(), true)),
                arrow::buffer::OffsetBuffer::from_lengths([all.len()]),
                all,
                None,
            ),
        ))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let Some(all) = self.all()? else {
            return ScalarValue::try_from(&self.data_type);
        };
        let n = all.len() as f64;
        let position = (n - (n - self.q * n).floor()).max(1.0) as usize - 1;
        let order = sort_to_indices(&all, None, None)?;
        let picked = take(&all, &order.slice(position, 1), None)?;
        ScalarValue::try_from_array(&picked, 0)
    }

    fn size(&self) -> usize {
        size_of::<Self>()
            + self
                .parts
                .iter()
                .map(|p| p.get_array_memory_size())
                .sum::<usize>()
    }
}
