//! Byte encodings of key and cursor tuples (Arrow's row format), so that composite keys
//! of any orderable type hash and compare as plain bytes.
//!
//! - Keys: equality of encodings is equality of tuples; floats compare by total order
//!   (`-0.0 != 0.0`, `NaN == NaN`), as delta-rs MERGE does.
//! - Cursors: ascending with NULL first, so a byte-wise `>` between two encodings is
//!   exactly the contract's "strictly newer" rule, position by position.

use arrow::array::{Array, ArrayRef};
use arrow::compute::SortOptions;
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, Rows, SortField};

use crate::error::Result;

/// Encodes a fixed list of columns of a batch into comparable bytes.
pub(crate) struct TupleEncoder {
    converter: RowConverter,
    columns: Vec<usize>,
}

impl TupleEncoder {
    /// Encoder over `columns` (indices into the data schema) of the given types.
    pub(crate) fn new(columns: Vec<usize>, types: Vec<DataType>) -> Result<Self> {
        let fields = types
            .into_iter()
            .map(|dt| {
                SortField::new_with_options(
                    dt,
                    SortOptions {
                        descending: false,
                        nulls_first: true,
                    },
                )
            })
            .collect();
        Ok(Self {
            converter: RowConverter::new(fields)?,
            columns,
        })
    }

    /// Whether the tuple is empty (no columns to compare).
    pub(crate) fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Encode the chosen columns of `columns` (a full row of the data schema).
    pub(crate) fn encode(&self, columns: &[ArrayRef]) -> Result<Rows> {
        let picked: Vec<ArrayRef> = self.columns.iter().map(|&i| columns[i].clone()).collect();
        Ok(self.converter.convert_columns(&picked)?)
    }

    /// Rows where any chosen column is NULL (such keys never match).
    pub(crate) fn any_null(&self, columns: &[ArrayRef], num_rows: usize) -> Vec<bool> {
        let mut out = vec![false; num_rows];
        for &i in &self.columns {
            let col = &columns[i];
            if col.null_count() == 0 {
                continue;
            }
            for (row, flag) in out.iter_mut().enumerate() {
                if col.is_null(row) {
                    *flag = true;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array};

    use super::*;

    #[test]
    fn float_keys_compare_by_total_order() {
        let enc = TupleEncoder::new(vec![0], vec![DataType::Float64]).unwrap();
        let col: ArrayRef = Arc::new(Float64Array::from(vec![0.0, -0.0, f64::NAN, f64::NAN]));
        let rows = enc.encode(&[col]).unwrap();
        assert_ne!(rows.row(0).as_ref(), rows.row(1).as_ref(), "-0.0 != 0.0");
        assert_eq!(rows.row(2).as_ref(), rows.row(3).as_ref(), "NaN == NaN");
    }

    #[test]
    fn cursor_order_ranks_null_lowest_position_by_position() {
        let enc = TupleEncoder::new(vec![0, 1], vec![DataType::Int64, DataType::Int64]).unwrap();
        let a: ArrayRef = Arc::new(Int64Array::from(vec![None, None, Some(1), None]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![Some(2), Some(1), Some(0), Some(9)]));
        let rows = enc.encode(&[a, b]).unwrap();
        // (NULL, 2) beats (NULL, 1)
        assert!(rows.row(0) > rows.row(1));
        // (1, 0) beats (NULL, 9): non-NULL beats NULL at the first position
        assert!(rows.row(2) > rows.row(3));
        // equal tuples are not strictly newer
        assert!(rows.row(0) <= rows.row(0));
    }
}
