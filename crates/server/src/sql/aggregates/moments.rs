//! DuckDB's aggregates of numbers that DataFusion lacks, each a DOUBLE: `product`,
//! `geomean` (`geometric_mean`), `skewness` and `kurtosis` (the sample's, bias-corrected,
//! as DuckDB's) and `kurtosis_pop`. Each is NULL over no values; `skewness` needs three
//! values, `kurtosis` four, `kurtosis_pop` two, and both NULL when all values are equal.
//!
//! The moments are kept as central moments, updated one value at a time (Welford's
//! method, extended to the third and fourth by Terriberry) and partial states combined by
//! Pébay's formulas: sums of powers cancel catastrophically (`kurtosis_pop` of 1, 2, 2
//! came out as -1.4999999999998666 from them; DuckDB answers -1.5).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, UInt64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type, UInt64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

/// The aggregates of this module.
pub(super) fn udafs() -> Vec<AggregateUDF> {
    [
        (Kind::Product, "product", &[][..]),
        (Kind::GeoMean, "geomean", &["geometric_mean"][..]),
        (Kind::Skewness, "skewness", &[][..]),
        (Kind::Kurtosis, "kurtosis", &[][..]),
        (Kind::KurtosisPop, "kurtosis_pop", &[][..]),
    ]
    .into_iter()
    .map(|(kind, name, aliases)| {
        AggregateUDF::new_from_impl(Moments {
            kind,
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            signature: Signature::numeric(1, Volatility::Immutable),
        })
    })
    .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Product,
    GeoMean,
    Skewness,
    Kurtosis,
    KurtosisPop,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Moments {
    kind: Kind,
    name: &'static str,
    aliases: Vec<String>,
    signature: Signature,
}

impl AggregateUDFImpl for Moments {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Moments4 {
            kind: self.kind,
            n: 0,
            first: if self.kind == Kind::Product { 1.0 } else { 0.0 },
            m2: 0.0,
            m3: 0.0,
            m4: 0.0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let mut fields = vec![Arc::new(Field::new(
            format_state_name(args.name, "count"),
            DataType::UInt64,
            true,
        ))];
        for part in ["first", "m2", "m3", "m4"] {
            fields.push(Arc::new(Field::new(
                format_state_name(args.name, part),
                DataType::Float64,
                true,
            )));
        }
        Ok(fields)
    }
}

/// What is kept of the values: their count; `first`, the running product of those not
/// zero (`product`, whose zeros `m2` counts), the sum of logarithms (`geomean`) or the
/// mean; and the sums of the deviations from the mean to the second, third and fourth
/// powers.
#[derive(Debug)]
struct Moments4 {
    kind: Kind,
    n: u64,
    first: f64,
    m2: f64,
    m3: f64,
    m4: f64,
}

impl Moments4 {
    fn add(&mut self, x: f64) {
        let n1 = self.n as f64;
        self.n += 1;
        match self.kind {
            // Zeros are counted apart, so that a window's frame can retract them.
            Kind::Product if x == 0.0 => self.m2 += 1.0,
            Kind::Product => self.first *= x,
            Kind::GeoMean => self.first += x.ln(),
            _ => {
                let n = self.n as f64;
                let delta = x - self.first;
                let delta_n = delta / n;
                let delta_n2 = delta_n * delta_n;
                let term1 = delta * delta_n * n1;
                self.first += delta_n;
                self.m4 += term1 * delta_n2 * (n * n - 3.0 * n + 3.0) + 6.0 * delta_n2 * self.m2
                    - 4.0 * delta_n * self.m3;
                self.m3 += term1 * delta_n * (n - 2.0) - 3.0 * delta_n * self.m2;
                self.m2 += term1;
            }
        }
    }

    /// Take `x` out again (a window's frame moving on): [`Self::add`] inverted.
    fn remove(&mut self, x: f64) {
        let n = self.n as f64;
        self.n -= 1;
        match self.kind {
            Kind::Product if x == 0.0 => self.m2 -= 1.0,
            Kind::Product => self.first /= x,
            Kind::GeoMean => self.first -= x.ln(),
            _ if self.n == 0 => (self.first, self.m2, self.m3, self.m4) = (0.0, 0.0, 0.0, 0.0),
            _ => {
                let n1 = n - 1.0;
                let mean = (n * self.first - x) / n1;
                let delta = x - mean;
                let delta_n = delta / n;
                let delta_n2 = delta_n * delta_n;
                let term1 = delta * delta_n * n1;
                let m2 = self.m2 - term1;
                let m3 = self.m3 - term1 * delta_n * (n - 2.0) + 3.0 * delta_n * m2;
                self.m4 =
                    self.m4 - term1 * delta_n2 * (n * n - 3.0 * n + 3.0) - 6.0 * delta_n2 * m2
                        + 4.0 * delta_n * m3;
                (self.first, self.m2, self.m3) = (mean, m2, m3);
            }
        }
    }

    /// Combine another part's state (Pébay, 2008).
    fn combine(&mut self, n_b: u64, first: f64, m2: f64, m3: f64, m4: f64) {
        if n_b == 0 {
            return;
        }
        let (na, nb) = (self.n as f64, n_b as f64);
        self.n += n_b;
        match self.kind {
            Kind::Product => (self.first, self.m2) = (self.first * first, self.m2 + m2),
            Kind::GeoMean => self.first += first,
            _ => {
                let n = self.n as f64;
                let delta = first - self.first;
                let (d2, d3, d4) = (delta * delta, delta.powi(3), delta.powi(4));
                let m4 = self.m4
                    + m4
                    + d4 * na * nb * (na * na - na * nb + nb * nb) / (n * n * n)
                    + 6.0 * d2 * (na * na * m2 + nb * nb * self.m2) / (n * n)
                    + 4.0 * delta * (na * m3 - nb * self.m3) / n;
                let m3 = self.m3
                    + m3
                    + d3 * na * nb * (na - nb) / (n * n)
                    + 3.0 * delta * (na * m2 - nb * self.m2) / n;
                self.m2 += m2 + d2 * na * nb / n;
                self.m3 = m3;
                self.m4 = m4;
                self.first += delta * nb / n;
            }
        }
    }

    fn result(&self) -> Option<f64> {
        let n = self.n as f64;
        match self.kind {
            _ if self.n == 0 => None,
            Kind::Product if self.m2 > 0.0 => Some(0.0),
            Kind::Product => Some(self.first),
            Kind::GeoMean => Some((self.first / n).exp()),
            Kind::Skewness => {
                if self.n <= 2 || self.m2 <= 0.0 {
                    return None;
                }
                let g1 = n.sqrt() * self.m3 / self.m2.powf(1.5);
                Some(g1 * (n * (n - 1.0)).sqrt() / (n - 2.0))
            }
            Kind::KurtosisPop => {
                (self.n >= 2 && self.m2 > 0.0).then(|| n * self.m4 / (self.m2 * self.m2) - 3.0)
            }
            Kind::Kurtosis => {
                if self.n <= 3 || self.m2 <= 0.0 {
                    return None;
                }
                let g2 = n * self.m4 / (self.m2 * self.m2);
                Some((n - 1.0) / ((n - 2.0) * (n - 3.0)) * ((n + 1.0) * g2 - 3.0 * (n - 1.0)))
            }
        }
    }
}

impl Accumulator for Moments4 {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = cast(&values[0], &DataType::Float64)?;
        for x in values.as_primitive::<Float64Type>().iter().flatten() {
            self.add(x);
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = cast(&values[0], &DataType::Float64)?;
        for x in values.as_primitive::<Float64Type>().iter().flatten() {
            self.remove(x);
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let counts: &UInt64Array = states[0].as_primitive::<UInt64Type>();
        let part = |i: usize, row: usize| -> f64 {
            let a: &Float64Array = states[i].as_primitive::<Float64Type>();
            a.value(row)
        };
        for row in 0..counts.len() {
            if counts.is_valid(row) {
                self.combine(
                    counts.value(row),
                    part(1, row),
                    part(2, row),
                    part(3, row),
                    part(4, row),
                );
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.n)),
            ScalarValue::Float64(Some(self.first)),
            ScalarValue::Float64(Some(self.m2)),
            ScalarValue::Float64(Some(self.m3)),
            ScalarValue::Float64(Some(self.m4)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.result()))
    }

    fn size(&self) -> usize {
        size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, Moments4};

    fn fresh(kind: Kind) -> Moments4 {
        Moments4 {
            kind,
            n: 0,
            first: if kind == Kind::Product { 1.0 } else { 0.0 },
            m2: 0.0,
            m3: 0.0,
            m4: 0.0,
        }
    }

    fn close(a: Option<f64>, b: Option<f64>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
            (a, b) => a == b,
        }
    }

    /// One pass, parts combined, and a sliding frame that added and removed values all
    /// agree, for every kind.
    #[test]
    fn parts_and_retractions_agree_with_one_pass() {
        let mut seed = 7u64;
        let values: Vec<f64> = (0..500)
            .map(|i| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (seed >> 33) as f64 / 2f64.powi(31) * 100.0 - 20.0;
                if i % 50 == 0 { 0.0 } else { v }
            })
            .collect();
        for kind in [
            Kind::Product,
            Kind::GeoMean,
            Kind::Skewness,
            Kind::Kurtosis,
            Kind::KurtosisPop,
        ] {
            // Products of 500 values overflow; take a few. Logarithms need positive values.
            let values: Vec<f64> = match kind {
                Kind::Product => values[..40].to_vec(),
                Kind::GeoMean => values.iter().map(|x| x.abs() + 1.0).collect(),
                _ => values.clone(),
            };
            let values = &values[..];
            let mut whole = fresh(kind);
            values.iter().for_each(|&x| whole.add(x));
            let mut combined = fresh(kind);
            for chunk in values.chunks(37) {
                let mut part = fresh(kind);
                chunk.iter().for_each(|&x| part.add(x));
                combined.combine(part.n, part.first, part.m2, part.m3, part.m4);
            }
            assert!(
                close(whole.result(), combined.result()),
                "{kind:?}: combined"
            );
            // A frame that saw 25 more values first, then let them go.
            let mut sliding = fresh(kind);
            let extra = match kind {
                Kind::GeoMean => [3.5, 0.5, 7.25, 12.0, 1.0].repeat(5),
                _ => [3.5, 0.0, -7.25, 12.0, 1.0].repeat(5),
            };
            extra.iter().for_each(|&x| sliding.add(x));
            values.iter().for_each(|&x| sliding.add(x));
            extra.iter().for_each(|&x| sliding.remove(x));
            assert!(close(whole.result(), sliding.result()), "{kind:?}: sliding");
        }
    }
}
