//! DuckDB's aggregates where DataFusion's answer otherwise: `sum` of integers a HUGEINT
//! ([`sums`]), `avg` of DECIMALs a DOUBLE ([`averages`]), each replacing DataFusion's
//! function under its name and computing only the types it changes (what the two share
//! is here); DuckDB's aggregates DataFusion lacks ([`moments`], [`frequencies`],
//! [`quantiles`]); DuckDB's names for DataFusion's aggregates; and DuckDB's list
//! aggregates, each of the session's aggregates over a list's elements ([`lists`]).

mod averages;
mod frequencies;
mod lists;
mod moments;
mod quantiles;
mod sums;

use std::collections::HashMap;
use std::mem::size_of;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Decimal128Type};
use datafusion::common::ScalarValue;
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::SessionContext;

/// Register the session's aggregates: ours, and DuckDB's names for DataFusion's
/// (`variance`, `list`, `group_concat` and `listagg`, `first`, `last`).
pub(super) fn register(ctx: &SessionContext) {
    ctx.register_udaf(sums::sum_udaf());
    ctx.register_udaf(averages::avg_udaf());
    ctx.register_udaf(quantiles::udaf());
    for f in moments::udafs().into_iter().chain(frequencies::udafs()) {
        ctx.register_udaf(f);
    }
    let aliases: [(&str, &[&'static str]); 5] = [
        ("var_samp", &["variance"]),
        ("array_agg", &["list"]),
        ("string_agg", &["group_concat", "listagg"]),
        ("first_value", &["first"]),
        ("last_value", &["last"]),
    ];
    for (name, aliases) in aliases {
        if let Ok(f) = ctx.udaf(name) {
            ctx.register_udaf(f.as_ref().clone().with_aliases(aliases.iter().copied()));
        }
    }
    lists::register(ctx);
}

pub(super) use lists::list_function;

/// The rows an aggregate takes: valid in `nulls` and kept by `filter` (`None`: all).
fn kept(nulls: Option<&NullBuffer>, filter: Option<&BooleanArray>) -> Option<NullBuffer> {
    let filtered = filter.map(|f| {
        let kept = match f.nulls() {
            Some(nulls) => nulls.inner() & f.values(),
            None => f.values().clone(),
        };
        NullBuffer::from(kept)
    });
    NullBuffer::union(nulls, filtered.as_ref())
}

/// The distinct values of a `DISTINCT` aggregate, in 128 bits, each with how often it is
/// in a window's frame so that the frame can retract it.
#[derive(Debug, Default)]
struct DistinctValues {
    counts: HashMap<i128, u64>,
}

impl DistinctValues {
    fn add(&mut self, values: impl Iterator<Item = Option<i128>>) {
        for v in values.flatten() {
            *self.counts.entry(v).or_default() += 1;
        }
    }

    fn retract(&mut self, values: impl Iterator<Item = Option<i128>>) {
        for v in values.flatten() {
            if let Some(n) = self.counts.get_mut(&v) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&v);
                }
            }
        }
    }

    /// Add partial states: each part's distinct values, a list of DECIMALs.
    fn merge(&mut self, state: &ArrayRef) {
        for part in state.as_list::<i32>().iter().flatten() {
            self.add(part.as_primitive::<Decimal128Type>().iter());
        }
    }

    /// The partial state: the values as a list of `decimal` (a `Decimal128` type).
    fn state(&self, decimal: &DataType) -> ScalarValue {
        let DataType::Decimal128(precision, scale) = decimal else {
            return ScalarValue::Null;
        };
        let values: Vec<ScalarValue> = self
            .counts
            .keys()
            .map(|&v| ScalarValue::Decimal128(Some(v), *precision, *scale))
            .collect();
        ScalarValue::List(ScalarValue::new_list_nullable(&values, decimal))
    }

    /// The values' sum and how many there are (`None`: there are none).
    fn sum(&self) -> Option<(i128, u64)> {
        (!self.counts.is_empty()).then(|| {
            let sum = self.counts.keys().fold(0i128, |a, &v| a.wrapping_add(v));
            (sum, self.counts.len() as u64)
        })
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.counts.capacity() * (size_of::<i128>() + size_of::<u64>())
    }
}
