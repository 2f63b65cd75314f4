//! Byte encodings of key and cursor tuples (Arrow's row format), so that composite keys
//! of any orderable type hash and compare as plain bytes.
//!
//! - Keys: equality of encodings is equality of tuples; floats compare by total order
//!   (`-0.0 != 0.0`, `NaN == NaN`), as delta-rs MERGE does.
//! - Cursors: ascending with NULL first, so a byte-wise `>` between two encodings is
//!   exactly the contract's "strictly newer" rule, position by position.
//! - Key lookups ([`KeyIndex`]): a key of one integer column is looked up by its value,
//!   without encoding; the probe looks up every stored key, so this is its inner loop.
//! - The empty tuple: when every key (or cursor) column is a partition column, nothing
//!   varies within a partition and the tuple has no columns. Arrow's row format cannot
//!   encode zero columns (it yields no rows at all), so that tuple has its own form
//!   ([`Tuples::Unit`]): every row holds the same, non-NULL, empty tuple.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use arrow::row::{RowConverter, Rows, SortField};
use foldhash::fast::RandomState;

use crate::error::{DeltaLiteError, Result};

/// Encodes a fixed list of columns of a batch into comparable bytes.
pub(crate) struct TupleEncoder {
    /// `None` for the empty tuple (no columns).
    converter: Option<RowConverter>,
    columns: Vec<usize>,
    /// Whether the tuple is one integer column, looked up by value (fixed by the
    /// schema, so the source's index and the stored keys always agree on the form).
    int_key: bool,
}

/// Encoded tuples of a batch's rows: byte strings that compare as the tuples do.
pub(crate) enum Tuples {
    Rows(Rows),
    /// The empty tuple in every row (see the module documentation).
    Unit,
}

impl Tuples {
    /// The encoding of `row`'s tuple (empty for [`Tuples::Unit`]).
    pub(crate) fn row(&self, row: usize) -> &[u8] {
        match self {
            Tuples::Rows(rows) => rows.row(row).data(),
            Tuples::Unit => &[],
        }
    }
}

/// Key -> source row. Seeded per process (foldhash's `RandomState`), so crafted keys
/// cannot aim at collisions; much cheaper per stored row than SipHash.
pub(crate) enum KeyIndex {
    Int {
        index: HashMap<i64, u32, RandomState>,
        /// The same keys ascending, for batches whose stored keys ascend.
        sorted: Vec<(i64, u32)>,
    },
    Encoded(EncodedIndex),
    /// The empty key: the one source row holding it, if any (deduplication leaves at most
    /// one); it matches every stored row of the partition.
    Unit(Option<u32>),
}

/// Encoded keys -> source row, without a copy of each key: the table holds source row
/// numbers and hashes and compares through the source's own encoded rows (a `Box<[u8]>`
/// per key made a 4M-row string-key source spend a quarter of its upsert in malloc).
pub(crate) struct EncodedIndex {
    rows: Rows,
    table: hashbrown::HashTable<u32>,
    hasher: RandomState,
}

impl EncodedIndex {
    /// Index `rows` at the given row numbers; a key seen again points at its later row.
    fn new(rows: Rows, at: impl Iterator<Item = usize>, capacity: usize) -> Self {
        let hasher = RandomState::default();
        let mut table = hashbrown::HashTable::with_capacity(capacity);
        for row in at {
            let key = rows.row(row).data();
            let hash = hasher.hash_one(key);
            let entry = table.entry(
                hash,
                |&r: &u32| rows.row(r as usize).data() == key,
                |&r: &u32| hasher.hash_one(rows.row(r as usize).data()),
            );
            match entry {
                hashbrown::hash_table::Entry::Occupied(mut e) => *e.get_mut() = row as u32,
                hashbrown::hash_table::Entry::Vacant(e) => {
                    e.insert(row as u32);
                }
            }
        }
        Self {
            rows,
            table,
            hasher,
        }
    }

    fn get(&self, key: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&r| self.rows.row(r as usize).data() == key)
            .copied()
    }

    fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.table.iter().map(|&r| self.rows.row(r as usize).data())
    }
}

/// A batch's keys in the form [`KeyIndex::matches`] looks up.
pub(crate) enum LookupKeys {
    Int64(Int64Array),
    Int32(Int32Array),
    Encoded(Rows),
    /// The empty key in every row.
    Unit,
}

impl LookupKeys {
    /// The probe cache's hash of `row`'s key (the same as [`KeyIndex::hashes`] makes of
    /// an equal source key); `None` for the empty key, which the cache does not hold.
    pub(crate) fn hash(&self, row: usize) -> Option<u64> {
        let hasher = crate::runtime::probe_cache::key_hasher();
        match self {
            LookupKeys::Int64(_) | LookupKeys::Int32(_) => {
                self.int(row).map(|k| hasher.hash_one(k))
            }
            LookupKeys::Encoded(rows) => Some(hasher.hash_one(rows.row(row).data())),
            LookupKeys::Unit => None,
        }
    }

    /// `row`'s key as an integer; `None` unless the key is one integer column.
    pub(crate) fn int(&self, row: usize) -> Option<i64> {
        match self {
            LookupKeys::Int64(a) => Some(a.value(row)),
            LookupKeys::Int32(a) => Some(i64::from(a.value(row))),
            LookupKeys::Encoded(_) | LookupKeys::Unit => None,
        }
    }
}

impl KeyIndex {
    /// The indexed keys with their source rows, ascending, for a key of one integer
    /// column (what the probe cache's integer entries are matched against).
    pub(crate) fn sorted_ints(&self) -> Option<&[(i64, u32)]> {
        match self {
            KeyIndex::Int { sorted, .. } => Some(sorted),
            KeyIndex::Encoded(_) | KeyIndex::Unit(_) => None,
        }
    }

    /// The probe cache's hashes of the indexed keys; `None` for the empty key.
    pub(crate) fn hashes(&self) -> Option<HashSet<u64, RandomState>> {
        let hasher = crate::runtime::probe_cache::key_hasher();
        match self {
            KeyIndex::Int { sorted, .. } => {
                Some(sorted.iter().map(|(k, _)| hasher.hash_one(*k)).collect())
            }
            KeyIndex::Encoded(index) => Some(index.keys().map(|k| hasher.hash_one(k)).collect()),
            KeyIndex::Unit(_) => None,
        }
    }

    /// Call `found(row, source_row)` for every row of `keys` whose key the index holds,
    /// in ascending row order, skipping rows whose key is NULL (`null_key[row]`).
    ///
    /// Stored integer keys often ascend within a batch (files written in key order);
    /// then each source key in the batch's range is found by binary search, and the
    /// batch costs one pass to check its order instead of one hash lookup per row.
    pub(crate) fn matches(
        &self,
        keys: &LookupKeys,
        null_key: &[bool],
        mut found: impl FnMut(usize, u32) -> Result<()>,
    ) -> Result<()> {
        match (self, keys) {
            (KeyIndex::Int { sorted, .. }, LookupKeys::Int64(values))
                if values.null_count() == 0 && ascending(values.values()) =>
            {
                matches_sorted(sorted, values.values(), found)
            }
            (KeyIndex::Int { sorted, .. }, LookupKeys::Int32(values))
                if values.null_count() == 0 && ascending(values.values()) =>
            {
                matches_sorted(sorted, values.values(), found)
            }
            (KeyIndex::Int { index, .. }, keys) => {
                for (row, _) in null_key.iter().enumerate().filter(|(_, null)| !**null) {
                    let key = keys.int(row).ok_or_else(mismatch)?;
                    if let Some(&source_row) = index.get(&key) {
                        found(row, source_row)?;
                    }
                }
                Ok(())
            }
            (KeyIndex::Encoded(index), LookupKeys::Encoded(rows)) => {
                for (row, _) in null_key.iter().enumerate().filter(|(_, null)| !**null) {
                    if let Some(source_row) = index.get(rows.row(row).data()) {
                        found(row, source_row)?;
                    }
                }
                Ok(())
            }
            (KeyIndex::Unit(source_row), LookupKeys::Unit) => {
                let Some(source_row) = *source_row else {
                    return Ok(());
                };
                for (row, _) in null_key.iter().enumerate().filter(|(_, null)| !**null) {
                    found(row, source_row)?;
                }
                Ok(())
            }
            (KeyIndex::Encoded(_) | KeyIndex::Unit(_), _) => Err(mismatch()),
        }
    }
}

/// Whether `values` never descend. No early exit, so the loop vectorizes.
fn ascending<T: Copy + PartialOrd>(values: &[T]) -> bool {
    values
        .iter()
        .zip(values.iter().skip(1))
        .fold(true, |ok, (a, b)| ok & (a <= b))
}

/// [`KeyIndex::matches`] for ascending stored keys: binary search each source key that
/// falls within the batch's range (a key stored twice matches at every copy).
fn matches_sorted<T: Copy + Into<i64>>(
    sorted: &[(i64, u32)],
    values: &[T],
    mut found: impl FnMut(usize, u32) -> Result<()>,
) -> Result<()> {
    let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
        return Ok(());
    };
    let (first, last): (i64, i64) = (first.into(), last.into());
    let lo = sorted.partition_point(|(key, _)| *key < first);
    let hi = sorted.partition_point(|(key, _)| *key <= last);
    let mut from = 0;
    for &(key, source_row) in &sorted[lo..hi] {
        from += values[from..].partition_point(|v| (*v).into() < key);
        let mut row = from;
        while row < values.len() && values[row].into() == key {
            found(row, source_row)?;
            row += 1;
        }
    }
    Ok(())
}

fn mismatch() -> DeltaLiteError {
    DeltaLiteError::Other("keys encoded by two different key encoders".into())
}

impl TupleEncoder {
    /// Encoder over `columns` (indices into the data schema) of the given types.
    pub(crate) fn new(columns: Vec<usize>, types: Vec<DataType>) -> Result<Self> {
        let int_key = matches!(types.as_slice(), [DataType::Int64 | DataType::Int32]);
        if types.is_empty() {
            return Ok(Self {
                converter: None,
                columns,
                int_key,
            });
        }
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
            converter: Some(RowConverter::new(fields)?),
            columns,
            int_key,
        })
    }

    /// Whether the tuple is empty (no columns to compare).
    pub(crate) fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Encode the chosen columns of `columns` (a full row of the data schema).
    pub(crate) fn encode(&self, columns: &[ArrayRef]) -> Result<Tuples> {
        let Some(converter) = &self.converter else {
            return Ok(Tuples::Unit);
        };
        let picked: Vec<ArrayRef> = self.columns.iter().map(|&i| columns[i].clone()).collect();
        Ok(Tuples::Rows(converter.convert_columns(&picked)?))
    }

    /// The chosen columns of `columns` in the form a [`KeyIndex`] looks up.
    pub(crate) fn lookup_keys(&self, columns: &[ArrayRef]) -> Result<LookupKeys> {
        if self.int_key {
            let column = &columns[self.columns[0]];
            if let Some(a) = column.as_primitive_opt::<Int64Type>() {
                return Ok(LookupKeys::Int64(a.clone()));
            }
            if let Some(a) = column.as_primitive_opt::<Int32Type>() {
                return Ok(LookupKeys::Int32(a.clone()));
            }
            return Err(DeltaLiteError::Other(format!(
                "an integer key column arrived as {}",
                column.data_type()
            )));
        }
        Ok(match self.encode(columns)? {
            Tuples::Rows(rows) => LookupKeys::Encoded(rows),
            Tuples::Unit => LookupKeys::Unit,
        })
    }

    /// Index the rows of `columns` whose key has no NULL (`null_key[row]` false).
    pub(crate) fn index(&self, columns: &[ArrayRef], null_key: &[bool]) -> Result<KeyIndex> {
        let keys = self.lookup_keys(columns)?;
        let rows = null_key
            .iter()
            .enumerate()
            .filter(|(_, null)| !**null)
            .map(|(row, _)| row);
        Ok(match keys {
            // Deduplication left at most one row holding the empty key: the last such.
            LookupKeys::Unit => KeyIndex::Unit(rows.map(|row| row as u32).next_back()),
            LookupKeys::Encoded(encoded) => {
                KeyIndex::Encoded(EncodedIndex::new(encoded, rows, null_key.len()))
            }
            ints => {
                let mut sorted: Vec<(i64, u32)> = rows
                    .filter_map(|row| ints.int(row).map(|key| (key, row as u32)))
                    .collect();
                sorted.sort_unstable();
                let index = sorted.iter().copied().collect();
                KeyIndex::Int { index, sorted }
            }
        })
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

    use arrow::array::{Float64Array, Int32Array, Int64Array};

    use super::*;

    /// Every `(row, source_row)` the index reports for `stored`.
    fn all_matches(index: &KeyIndex, stored: &LookupKeys, rows: usize) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        index
            .matches(stored, &vec![false; rows], |row, source| {
                out.push((row, source));
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn ascending_and_unordered_integer_batches_find_the_same_matches() {
        let enc = TupleEncoder::new(vec![0], vec![DataType::Int64]).unwrap();
        let source: ArrayRef = Arc::new(Int64Array::from(vec![40, 7, 12, -3, 99, 5]));
        let index = enc.index(&[source], &[false; 6]).unwrap();
        // Ascending with a key stored twice (12), keys below and above the source's.
        let ascending = vec![-9, -3, 0, 5, 6, 12, 12, 13, 40, 41, 100];
        let mut unordered = ascending.clone();
        unordered.reverse();
        let lookup = |values: &Vec<i64>| {
            let column: ArrayRef = Arc::new(Int64Array::from(values.clone()));
            enc.lookup_keys(&[column]).unwrap()
        };
        let sorted_path = all_matches(&index, &lookup(&ascending), ascending.len());
        // Source rows: -3 is row 3, 5 is row 5, 12 is row 2, 40 is row 0.
        assert_eq!(sorted_path, vec![(1, 3), (3, 5), (5, 2), (6, 2), (8, 0)]);
        let n = unordered.len();
        let hashed: Vec<(usize, u32)> = all_matches(&index, &lookup(&unordered), n)
            .into_iter()
            .map(|(row, source)| (n - 1 - row, source))
            .rev()
            .collect();
        assert_eq!(hashed, sorted_path);
    }

    #[test]
    fn int32_keys_match_by_value_in_both_orders() {
        let enc = TupleEncoder::new(vec![0], vec![DataType::Int32]).unwrap();
        let source: ArrayRef = Arc::new(Int32Array::from(vec![3, -1]));
        let index = enc.index(&[source], &[false; 2]).unwrap();
        for (stored, expected) in [
            (vec![-1, 0, 3, 3], vec![(0, 1), (2, 0), (3, 0)]),
            (vec![3, 0, -1], vec![(0, 0), (2, 1)]),
        ] {
            let n = stored.len();
            let column: ArrayRef = Arc::new(Int32Array::from(stored));
            let keys = enc.lookup_keys(&[column]).unwrap();
            assert_eq!(all_matches(&index, &keys, n), expected);
        }
    }

    #[test]
    fn null_stored_keys_never_match() {
        let enc = TupleEncoder::new(vec![0], vec![DataType::Int64]).unwrap();
        let source: ArrayRef = Arc::new(Int64Array::from(vec![0, 1]));
        let index = enc.index(&[source], &[false; 2]).unwrap();
        // A NULL's value slot holds 0, which the source has: it must still not match.
        let stored: ArrayRef = Arc::new(Int64Array::from(vec![None, Some(1)]));
        let keys = enc.lookup_keys(std::slice::from_ref(&stored)).unwrap();
        let null_key = enc.any_null(&[stored], 2);
        let mut found = Vec::new();
        index
            .matches(&keys, &null_key, |row, source| {
                found.push((row, source));
                Ok(())
            })
            .unwrap();
        assert_eq!(found, vec![(1, 1)]);
    }

    #[test]
    fn the_empty_tuple_is_one_non_null_key_that_every_stored_row_holds() {
        let enc = TupleEncoder::new(vec![], vec![]).unwrap();
        let column: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3)]));
        let columns = [column];
        // Three rows, one encoding: the empty byte string (arrow's row format has none).
        let tuples = enc.encode(&columns).unwrap();
        assert_eq!((tuples.row(0), tuples.row(2)), (&[][..], &[][..]));
        assert_eq!(enc.any_null(&columns, 3), vec![false; 3]);
        // The index holds the last source row with the key; it matches every stored row
        // that is not marked NULL (a NULL partition value in the key).
        let index = enc.index(&columns, &[false, false, true]).unwrap();
        let keys = enc.lookup_keys(&columns).unwrap();
        let mut found = Vec::new();
        index
            .matches(&keys, &[false, true, false], |row, source| {
                found.push((row, source));
                Ok(())
            })
            .unwrap();
        assert_eq!(found, vec![(0, 1), (2, 1)]);
        let none = enc.index(&columns, &[true; 3]).unwrap();
        let mut any = false;
        none.matches(&keys, &[false; 3], |_, _| {
            any = true;
            Ok(())
        })
        .unwrap();
        assert!(!any, "an index of NULL keys only matches nothing");
    }

    #[test]
    fn float_keys_compare_by_total_order() {
        let enc = TupleEncoder::new(vec![0], vec![DataType::Float64]).unwrap();
        let col: ArrayRef = Arc::new(Float64Array::from(vec![0.0, -0.0, f64::NAN, f64::NAN]));
        let rows = enc.encode(&[col]).unwrap();
        assert_ne!(rows.row(0), rows.row(1), "-0.0 != 0.0");
        assert_eq!(rows.row(2), rows.row(3), "NaN == NaN");
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
