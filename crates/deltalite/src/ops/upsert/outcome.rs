//! The per-row decision of an upsert: does a stored row match a source row, and if so,
//! does the source row replace it (the cursor rule), leave it as it is, or lose?

use std::sync::atomic::{AtomicU8, Ordering};

use arrow::array::ArrayRef;

use crate::error::Result;
use crate::ops::upsert::keys::{LookupKeys, TupleEncoder, Tuples};
use crate::ops::upsert::source::SourcePartition;

/// What happened to a source row. Ordered so that the strongest outcome wins when a key
/// is stored more than once: an update anywhere means the row was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Outcome {
    /// Not matched (yet): will be inserted.
    Pending = 0,
    /// Matched a stored row with a newer-or-equal cursor: dropped.
    Lost = 1,
    /// Matched, and the match changes nothing (`keep` with a key-only batch).
    Unchanged = 2,
    /// Matched and replaced (part of) the stored row.
    Updated = 3,
}

impl Outcome {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Outcome::Lost,
            2 => Outcome::Unchanged,
            3 => Outcome::Updated,
            _ => Outcome::Pending,
        }
    }
}

/// Outcomes of one partition's source rows, shared by the tasks working on its files.
pub(crate) struct Outcomes(Vec<AtomicU8>);

impl Outcomes {
    pub(crate) fn new(rows: usize) -> Self {
        Self((0..rows).map(|_| AtomicU8::new(0)).collect())
    }

    pub(crate) fn record(&self, row: u32, outcome: Outcome) {
        self.0[row as usize].fetch_max(outcome as u8, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, row: usize) -> Outcome {
        Outcome::from_u8(self.0[row].load(Ordering::Relaxed))
    }
}

/// Encoded keys and cursors of a batch of stored rows.
pub(crate) struct StoredKeys {
    keys: LookupKeys,
    null_key: Vec<bool>,
    cursors: Option<Tuples>,
}

impl StoredKeys {
    /// Add the hash of every row whose key has no NULL to `out`, for the probe cache;
    /// `None` for the empty key, which the cache does not hold.
    pub(crate) fn extend_hashes(&self, out: &mut Vec<u64>) -> Option<()> {
        out.reserve(self.null_key.len());
        for (row, _) in self.null_key.iter().enumerate().filter(|(_, null)| !**null) {
            out.push(self.keys.hash(row)?);
        }
        Some(())
    }

    /// Add `(key, position)` of every row whose key has no NULL to `out` (`positions`:
    /// each row's position in its file), for the probe cache's integer entries; `None`
    /// unless the key is one integer column.
    pub(crate) fn extend_ints(
        &self,
        positions: &arrow::array::Int64Array,
        out: &mut Vec<(i64, u32)>,
    ) -> Option<()> {
        out.reserve(self.null_key.len());
        for (row, _) in self.null_key.iter().enumerate().filter(|(_, null)| !**null) {
            let position = u32::try_from(positions.value(row)).ok()?;
            out.push((self.keys.int(row)?, position));
        }
        Some(())
    }
}

/// Decides matches between stored rows and a partition's source rows.
pub(crate) struct Decider {
    keys: TupleEncoder,
    cursors: Option<TupleEncoder>,
    match_changes_row: bool,
}

impl Decider {
    pub(crate) fn new(
        keys: TupleEncoder,
        cursors: Option<TupleEncoder>,
        match_changes_row: bool,
    ) -> Self {
        Self {
            keys,
            cursors,
            match_changes_row,
        }
    }

    /// Encode a batch of stored rows (columns laid out by data-schema position).
    pub(crate) fn encode(&self, columns: &[ArrayRef], rows: usize) -> Result<StoredKeys> {
        Ok(StoredKeys {
            keys: self.keys.lookup_keys(columns)?,
            null_key: self.keys.any_null(columns, rows),
            cursors: match &self.cursors {
                Some(c) if !c.is_empty() => Some(c.encode(columns)?),
                _ => None,
            },
        })
    }

    /// Encode only the keys of a batch of stored rows (no cursor read).
    pub(crate) fn encode_keys(&self, columns: &[ArrayRef], rows: usize) -> Result<StoredKeys> {
        Ok(StoredKeys {
            keys: self.keys.lookup_keys(columns)?,
            null_key: self.keys.any_null(columns, rows),
            cursors: None,
        })
    }

    /// Call `decided(row, source_row, outcome)` for every stored row of the batch that
    /// matches a source row, in ascending row order.
    pub(crate) fn for_each_match(
        &self,
        part: &SourcePartition,
        stored: &StoredKeys,
        mut decided: impl FnMut(usize, u32, Outcome) -> Result<()>,
    ) -> Result<()> {
        part.index
            .matches(&stored.keys, &stored.null_key, |row, source_row| {
                decided(row, source_row, self.outcome(part, stored, row, source_row))
            })
    }

    /// What every match yields when the decision needs no stored value: no cursor, or
    /// one made only of partition columns (always equal, so the stored row wins); `None`
    /// when it compares stored cursors.
    pub(crate) fn key_only_outcome(&self) -> Option<Outcome> {
        match &self.cursors {
            None => Some(if self.match_changes_row {
                Outcome::Updated
            } else {
                Outcome::Unchanged
            }),
            Some(c) if c.is_empty() => Some(Outcome::Lost),
            Some(_) => None,
        }
    }

    /// What happens when stored row `row` matches `source_row`.
    fn outcome(
        &self,
        part: &SourcePartition,
        stored: &StoredKeys,
        row: usize,
        source_row: u32,
    ) -> Outcome {
        let wins = match &self.cursors {
            None => true,
            Some(_) => match (&stored.cursors, &part.cursors) {
                (Some(stored_c), Some(source_c)) => {
                    source_c.row(source_row as usize) > stored_c.row(row)
                }
                // A cursor made only of partition columns: always equal, never newer.
                _ => false,
            },
        };
        match (wins, self.match_changes_row) {
            (false, _) => Outcome::Lost,
            (true, true) => Outcome::Updated,
            (true, false) => Outcome::Unchanged,
        }
    }
}
