//! DuckDB's aggregates over how often each value occurs, which DataFusion lacks: `mode`
//! (the most frequent value, NULL over none) and `entropy` (in bits, 0 over none), for
//! values of any type; NULLs are not counted.
//!
//! Decided: DuckDB breaks a tie for `mode` by its hash table's order, which no rule
//! reproduces; we answer the least of the tied values, the same however the rows were
//! split.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, UInt64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

/// The aggregates of this module.
pub(super) fn udafs() -> Vec<AggregateUDF> {
    [(Kind::Mode, "mode"), (Kind::Entropy, "entropy")]
        .into_iter()
        .map(|(kind, name)| {
            AggregateUDF::new_from_impl(Frequencies {
                kind,
                name,
                signature: Signature::any(1, Volatility::Immutable),
            })
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Mode,
    Entropy,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Frequencies {
    kind: Kind,
    name: &'static str,
    signature: Signature,
}

impl AggregateUDFImpl for Frequencies {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Mode => arg_types[0].clone(),
            Kind::Entropy => DataType::Float64,
        })
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Counts {
            kind: self.kind,
            data_type: args.expr_fields[0].data_type().clone(),
            counts: HashMap::new(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new_list(
                format_state_name(args.name, "values"),
                Field::new_list_field(args.input_fields[0].data_type().clone(), true),
                true,
            )),
            Arc::new(Field::new_list(
                format_state_name(args.name, "counts"),
                Field::new_list_field(DataType::UInt64, true),
                true,
            )),
        ])
    }
}

/// Each value seen, with how often.
#[derive(Debug)]
struct Counts {
    kind: Kind,
    data_type: DataType,
    counts: HashMap<ScalarValue, u64>,
}

impl Counts {
    fn add(&mut self, values: &ArrayRef, weights: impl Fn(usize) -> u64) -> Result<()> {
        for row in 0..values.len() {
            if values.is_null(row) {
                continue;
            }
            let value = ScalarValue::try_from_array(values, row)?;
            *self.counts.entry(value).or_default() += weights(row);
        }
        Ok(())
    }
}

impl Accumulator for Counts {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], |_| 1)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = &values[0];
        for row in 0..values.len() {
            if values.is_null(row) {
                continue;
            }
            let value = ScalarValue::try_from_array(values, row)?;
            if let Some(n) = self.counts.get_mut(&value) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&value);
                }
            }
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (values, counts) = (states[0].as_list::<i32>(), states[1].as_list::<i32>());
        for row in 0..values.len() {
            if values.is_null(row) {
                continue;
            }
            let part = counts.value(row);
            let part = part.as_primitive::<UInt64Type>();
            self.add(&values.value(row), |i| part.value(i))?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values: Vec<ScalarValue> = self.counts.keys().cloned().collect();
        let counts: Vec<ScalarValue> = values
            .iter()
            .map(|v| ScalarValue::UInt64(self.counts.get(v).copied()))
            .collect();
        Ok(vec![
            ScalarValue::List(ScalarValue::new_list_nullable(&values, &self.data_type)),
            ScalarValue::List(ScalarValue::new_list_nullable(&counts, &DataType::UInt64)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        match self.kind {
            Kind::Mode => {
                let best = self.counts.iter().max_by(|(a, m), (b, n)| {
                    // The higher count, then the lesser value.
                    m.cmp(n)
                        .then_with(|| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal))
                });
                match best {
                    Some((value, _)) => Ok(value.clone()),
                    None => ScalarValue::try_from(&self.data_type),
                }
            }
            Kind::Entropy => {
                let total: u64 = self.counts.values().sum();
                let total = total as f64;
                let bits: f64 = self
                    .counts
                    .values()
                    .map(|&c| (c as f64 / total) * (total / c as f64).log2())
                    // `sum` of no floats is -0.0.
                    .fold(0.0, |a, b| a + b);
                Ok(ScalarValue::Float64(Some(bits)))
            }
        }
    }

    fn size(&self) -> usize {
        size_of::<Self>()
            + self
                .counts
                .keys()
                .map(|k| k.size() + size_of::<u64>())
                .sum::<usize>()
    }
}
