//! The exact probe: read only the key (and cursor) columns of a candidate file, after
//! skipping row groups by their statistics and bloom filters, and decide per matched
//! source row what the upsert will do with it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::DataType;
use deltalake::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use deltalake::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use futures::TryStreamExt;
use object_store::ObjectStore;

use crate::error::{DeltaLiteError, Result};
use crate::io::bloom;
use crate::io::dv::Deleted;
use crate::io::read::{
    open_with_row_numbers, present_roots, row_numbers, row_numbers_are_positions, sparse_columns,
    stream_projected,
};
use crate::ops::upsert::outcome::{Decider, Outcome, StoredKeys};
use crate::ops::upsert::rewrite::Replacement;
use crate::ops::upsert::source::{Layout, SourcePartition};
use crate::ops::upsert::target::{prunable, within_bounds};
use crate::runtime::probe_cache::FileKeys;
use crate::table::files::TargetFile;

/// What probing one file found.
#[derive(Debug, Default)]
pub(crate) struct ProbeResult {
    /// The file has a stored row that the upsert changes: it must be rewritten.
    pub rewrite: bool,
    /// Decisions for matched source rows.
    pub outcomes: Vec<(u32, Outcome)>,
    /// The stored rows the source replaces, ascending by position, so that the rewrite
    /// need not look keys up again; `None` if the file's row numbers cannot be trusted.
    pub replaced: Option<Vec<Replacement>>,
    /// Row groups read / skipped, for tracing.
    pub row_groups_read: usize,
    pub row_groups_skipped: usize,
    /// Pages of the first key column skipped by the page index, in read row groups.
    pub pages_skipped: usize,
    /// The hashes of every non-NULL key of the file, when asked for, the probe read all
    /// of them (no row group or page skipped) and the file stays (no rewrite): what the
    /// probe cache keeps.
    pub keys: Option<FileKeys>,
}

/// Probe `file` for the keys of `part`; with `collect_keys`, also return every key of the
/// file (see [`ProbeResult::keys`]). Rows of `deleted` (the file's deletion vector) are
/// not in the table and match nothing; their keys may still be collected (a superset of
/// a file's keys only costs the cache a read).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn probe_file(
    store: Arc<dyn ObjectStore>,
    file: &TargetFile,
    deleted: Option<&Deleted>,
    part: &SourcePartition,
    layout: &Layout,
    decider: &Decider,
    read_batch_size: usize,
    collect_keys: bool,
) -> Result<ProbeResult> {
    let builder = open_with_row_numbers(Arc::clone(&store), file).await?;
    let wanted: Vec<usize> = layout
        .key_columns
        .iter()
        .chain(&layout.cursor_columns)
        .copied()
        .collect();
    let roots = present_roots(&builder, &layout.data_schema, &wanted);
    let has_all_keys = layout
        .key_columns
        .iter()
        .all(|k| roots.iter().any(|(i, _)| i == k));
    let mut result = ProbeResult::default();
    if !has_all_keys {
        // The key was added to the table after this file was written: every stored key
        // here has a NULL and never matches.
        result.keys = collect_keys.then(FileKeys::default);
        return Ok(result);
    }

    let metadata = Arc::clone(builder.metadata());
    let row_group_count = metadata.num_row_groups();
    let file_schema = Arc::clone(builder.schema());
    // Per row group, the source rows whose keys it may hold (`None`: none): kept as a
    // list, so that narrowing costs what is left, not the partition's size per file; for
    // a key of one integer column ascending by key, narrowed by binary search.
    let sorted = part.index.sorted_ints();
    let all: Vec<u32> = match sorted {
        Some(sorted) => sorted.iter().map(|&(_, row)| row).collect(),
        None => (0..part.null_key.len() as u32)
            .filter(|&row| !part.null_key[row as usize])
            .collect(),
    };
    let mut candidates: Vec<Option<Vec<u32>>> = vec![Some(all); row_group_count];
    // Row-group statistics.
    for &k in &layout.key_columns {
        let field = layout.data_schema.field(k);
        if !prunable(field.data_type()) {
            continue;
        }
        let Ok(converter) =
            StatisticsConverter::try_new(field.name(), &file_schema, builder.parquet_schema())
        else {
            continue;
        };
        let groups = metadata.row_groups().iter();
        let (Ok(mins), Ok(maxes)) = (
            converter.row_group_mins(groups.clone()),
            converter.row_group_maxes(groups),
        ) else {
            continue;
        };
        let (Ok(mins), Ok(maxes)) = (
            arrow::compute::cast(&mins, field.data_type()),
            arrow::compute::cast(&maxes, field.data_type()),
        ) else {
            continue;
        };
        let int_bounds = sorted.and_then(|_| Some((as_i64s(&mins)?, as_i64s(&maxes)?)));
        for (rg, rows) in candidates.iter_mut().enumerate() {
            let Some(current) = rows.as_ref() else {
                continue;
            };
            let next = match (sorted, &int_bounds) {
                (Some(sorted), Some((mins, maxes))) => {
                    let lo = mins[rg].map_or(0, |min| sorted.partition_point(|&(k, _)| k < min));
                    let hi = maxes[rg].map_or(sorted.len(), |max| {
                        sorted.partition_point(|&(k, _)| k <= max)
                    });
                    sorted[lo..hi.max(lo)].iter().map(|&(_, row)| row).collect()
                }
                _ => {
                    let bound = |a: &ArrayRef| (a.is_valid(rg)).then(|| a.slice(rg, 1));
                    let values = take(
                        part.batch.column(k),
                        &UInt32Array::from(current.clone()),
                        None,
                    )?;
                    let m = within_bounds(&values, bound(&mins).as_ref(), bound(&maxes).as_ref())?;
                    current
                        .iter()
                        .zip(m.values().iter())
                        .filter_map(|(&row, keep)| keep.then_some(row))
                        .collect::<Vec<u32>>()
                }
            };
            *rows = (!next.is_empty()).then_some(next);
        }
    }
    // Bloom filters, for single-column keys whose file type matches the table's.
    if let [k] = layout.key_columns.as_slice() {
        let field = layout.data_schema.field(*k);
        let same_type = file_schema
            .field_with_name(field.name())
            .map(|f| f.data_type() == field.data_type())
            .unwrap_or(false);
        let leaf =
            StatisticsConverter::try_new(field.name(), &file_schema, builder.parquet_schema())
                .ok()
                .and_then(|c| c.parquet_column_index());
        if let (true, Some(leaf)) = (same_type, leaf) {
            for (rg, rows) in candidates.iter_mut().enumerate() {
                let Some(current) = rows.as_ref() else {
                    continue;
                };
                let column = metadata.row_group(rg).column(leaf);
                let Some(next) =
                    bloom::may_hold(&store, &file.path, column, part.batch.column(*k), current)
                        .await?
                else {
                    continue;
                };
                *rows = (!next.is_empty()).then_some(next);
            }
        }
    }
    let selected: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter_map(|(rg, m)| m.as_ref().map(|_| rg))
        .collect();
    result.row_groups_skipped = row_group_count - selected.len();
    result.row_groups_read = selected.len();
    if selected.is_empty() {
        return Ok(result);
    }

    let pages = page_selection(&builder, layout, part, &candidates, &selected)?;
    if let Some((_, skipped)) = &pages {
        result.pages_skipped = *skipped;
    }
    let trusted = row_numbers_are_positions(&metadata);
    // Keys are collected only from a read of every row: a skipped row group or page
    // would leave keys out, and the cache must know all of a file's keys or none.
    let mut keys = (collect_keys && selected.len() == row_group_count && result.pages_skipped == 0)
        .then(|| Collected::new(layout, trusted));
    let root_indices: Vec<usize> = roots.iter().map(|(_, r)| *r).collect();
    let mut stream = match pages {
        Some((selection, _)) => {
            if !selection.selects_any() {
                return Ok(result);
            }
            stream_projected(
                builder.with_row_selection(selection),
                &root_indices,
                selected,
                read_batch_size,
            )?
        }
        None => stream_projected(builder, &root_indices, selected, read_batch_size)?,
    };
    if deleted.is_some() && !trusted {
        return Err(DeltaLiteError::UnsupportedTable(format!(
            "{} has a deletion vector but its row groups are not stored in order, so its \
             row positions are unknown",
            file.path
        )));
    }
    let mut replaced = trusted.then(Vec::new);
    while let Some(batch) = stream.try_next().await? {
        let columns = sparse_columns(&batch, &layout.data_schema, &wanted)?;
        let stored = decider.encode(&columns, batch.num_rows())?;
        let positions = row_numbers(&batch)?;
        if let Some(all) = keys.as_mut()
            && all.extend(&stored, positions).is_none()
        {
            keys = None;
        }
        decider.for_each_match(part, &stored, |row, source_row, outcome| {
            if let Some(deleted) = deleted
                && deleted.contains(position(positions, row)?)
            {
                return Ok(());
            }
            if outcome == Outcome::Updated {
                result.rewrite = true;
                if let Some(replaced) = replaced.as_mut() {
                    replaced.push(Replacement {
                        position: position(positions, row)?,
                        source_row,
                    });
                }
            }
            result.outcomes.push((source_row, outcome));
            Ok(())
        })?;
        if result.rewrite {
            // The file leaves the table with this upsert's commit: its keys are not
            // worth keeping (nor the memory to collect them).
            keys = None;
        }
    }
    if let Some(replaced) = replaced.as_mut() {
        // Read in file order already; the rewrite walks the list in step with its own
        // in-order read and would misplace rows if it were not sorted.
        if !replaced.is_sorted_by_key(|r| r.position) {
            replaced.sort_unstable_by_key(|r| r.position);
        }
    }
    result.replaced = replaced;
    result.keys = keys.map(Collected::finish);
    Ok(result)
}

/// A file's keys as a read collects them for the probe cache: with positions for a key
/// of one integer column in a file whose row numbers are its positions, else hashes.
enum Collected {
    Hashes(Vec<u64>),
    Ints(Vec<(i64, u32)>),
}

impl Collected {
    fn new(layout: &Layout, trusted: bool) -> Self {
        let int_key = matches!(
            layout.key_columns.as_slice(),
            [k] if matches!(layout.data_schema.field(*k).data_type(), DataType::Int64 | DataType::Int32)
        );
        if int_key && trusted {
            Collected::Ints(Vec::new())
        } else {
            Collected::Hashes(Vec::new())
        }
    }

    /// Add a read batch's keys; `None` when they cannot be collected (the empty key).
    fn extend(&mut self, stored: &StoredKeys, positions: &Int64Array) -> Option<()> {
        match self {
            Collected::Hashes(all) => stored.extend_hashes(all),
            Collected::Ints(all) => stored.extend_ints(positions, all),
        }
    }

    fn finish(self) -> FileKeys {
        match self {
            Collected::Hashes(all) => FileKeys::new(all),
            Collected::Ints(all) => FileKeys::ints(all),
        }
    }
}

/// Every key of `file`, read in full for the probe cache (a background fill); `None`
/// when the key cannot be cached (the empty key).
pub(crate) async fn read_keys(
    store: Arc<dyn ObjectStore>,
    file: &TargetFile,
    layout: &Layout,
    decider: &Decider,
    read_batch_size: usize,
) -> Result<Option<FileKeys>> {
    let builder = open_with_row_numbers(store, file).await?;
    let roots = present_roots(&builder, &layout.data_schema, &layout.key_columns);
    if !layout
        .key_columns
        .iter()
        .all(|k| roots.iter().any(|(i, _)| i == k))
    {
        // The key was added after this file was written: it holds no non-NULL key.
        return Ok(Some(FileKeys::default()));
    }
    let trusted = row_numbers_are_positions(builder.metadata());
    let groups = (0..builder.metadata().num_row_groups()).collect();
    let root_indices: Vec<usize> = roots.iter().map(|(_, r)| *r).collect();
    let mut stream = stream_projected(builder, &root_indices, groups, read_batch_size)?;
    let mut keys = Collected::new(layout, trusted);
    while let Some(batch) = stream.try_next().await? {
        let columns = sparse_columns(&batch, &layout.data_schema, &layout.key_columns)?;
        let stored = decider.encode_keys(&columns, batch.num_rows())?;
        if keys.extend(&stored, row_numbers(&batch)?).is_none() {
            return Ok(None);
        }
    }
    Ok(Some(keys.finish()))
}

/// The stored rows of a file that match source keys, `(position, source_row)`, and what
/// each match yields, answered from the file's cached keys without reading it; `None`
/// when the entry cannot answer (hashes only, a cursor that compares stored values, or
/// a key the source does not index by integer). The file's deletion vector is applied
/// after ([`cached_result`]): a file without a match needs no vector read.
pub(crate) fn cached_matches(
    keys: &FileKeys,
    part: &SourcePartition,
    decider: &Decider,
) -> Option<(Vec<(u32, u32)>, Outcome)> {
    let outcome = decider.key_only_outcome()?;
    let source = part.index.sorted_ints()?;
    let mut matched: Vec<(u32, u32)> = Vec::new();
    keys.int_matches(source, |position, source_row| {
        matched.push((position, source_row))
    })?;
    matched.sort_unstable();
    Some((matched, outcome))
}

/// What the probe would have found for [`cached_matches`]: rows of `deleted` (the
/// file's deletion vector) are not in the table and match nothing, as in [`probe_file`].
pub(crate) fn cached_result(
    matched: Vec<(u32, u32)>,
    outcome: Outcome,
    deleted: Option<&Deleted>,
) -> ProbeResult {
    let live: Vec<(u32, u32)> = matched
        .into_iter()
        .filter(|&(position, _)| !deleted.is_some_and(|d| d.contains(u64::from(position))))
        .collect();
    let updated = outcome == Outcome::Updated;
    ProbeResult {
        rewrite: updated && !live.is_empty(),
        // Positions are the file's own: entries are only made from trusted row numbers.
        replaced: Some(if updated {
            live.iter()
                .map(|&(position, source_row)| Replacement {
                    position: u64::from(position),
                    source_row,
                })
                .collect()
        } else {
            Vec::new()
        }),
        outcomes: live
            .into_iter()
            .map(|(_, source_row)| (source_row, outcome))
            .collect(),
        ..ProbeResult::default()
    }
}

/// The file position of `row` of a probe batch.
fn position(positions: &Int64Array, row: usize) -> Result<u64> {
    let number = positions.value(row);
    u64::try_from(number)
        .map_err(|_| DeltaLiteError::Other(format!("negative row number {number} in a probe read")))
}

/// The rows of the `selected` row groups worth reading, by the page index of the first
/// prunable key column: a page whose min/max admits none of the row group's candidate
/// keys is skipped (pages of different columns do not align, so one column decides).
/// Returns the selection and the pages skipped; `None` without a usable page index.
fn page_selection(
    builder: &crate::io::read::FileBuilder,
    layout: &Layout,
    part: &SourcePartition,
    candidates: &[Option<Vec<u32>>],
    selected: &[usize],
) -> Result<Option<(RowSelection, usize)>> {
    let metadata = builder.metadata();
    let (Some(column_index), Some(offset_index)) =
        (metadata.column_index(), metadata.offset_index())
    else {
        return Ok(None);
    };
    let Some(&k) = layout
        .key_columns
        .iter()
        .find(|&&k| prunable(layout.data_schema.field(k).data_type()))
    else {
        return Ok(None);
    };
    let field = layout.data_schema.field(k);
    let Ok(converter) =
        StatisticsConverter::try_new(field.name(), builder.schema(), builder.parquet_schema())
    else {
        return Ok(None);
    };
    let (Ok(mins), Ok(maxes), Ok(Some(rows))) = (
        converter.data_page_mins(column_index, offset_index, selected),
        converter.data_page_maxes(column_index, offset_index, selected),
        converter.data_page_row_counts(offset_index, metadata.row_groups(), selected),
    ) else {
        return Ok(None);
    };
    let (Ok(mins), Ok(maxes)) = (
        arrow::compute::cast(&mins, field.data_type()),
        arrow::compute::cast(&maxes, field.data_type()),
    ) else {
        return Ok(None);
    };
    // Pages per row group, in order: the candidate mask of a row group applies to its
    // pages.
    let mut pages_of: Vec<(usize, usize)> = Vec::with_capacity(selected.len());
    for &rg in selected {
        let pages = offset_index
            .get(rg)
            .and_then(|columns| columns.get(converter.parquet_column_index()?))
            .map_or(0, |column| column.page_locations().len());
        pages_of.push((rg, pages));
    }
    let total: usize = pages_of.iter().map(|(_, n)| n).sum();
    if total != rows.len() || mins.len() != rows.len() || maxes.len() != rows.len() {
        return Ok(None);
    }
    let keys = part.batch.column(k);
    let mut selectors: Vec<RowSelector> = Vec::with_capacity(rows.len());
    let mut skipped = 0;
    let mut page = 0;
    for (rg, pages) in pages_of {
        let admitted = match &candidates[rg] {
            Some(rows) => admitted_pages(keys, rows, &mins, &maxes, page..page + pages)?,
            None => vec![false; pages],
        };
        for (offset, admits) in admitted.into_iter().enumerate() {
            let count = rows.value(page + offset) as usize;
            if admits {
                selectors.push(RowSelector::select(count));
            } else {
                skipped += 1;
                selectors.push(RowSelector::skip(count));
            }
        }
        page += pages;
    }
    Ok(Some((RowSelection::from(selectors), skipped)))
}

/// Which of the pages `range` (bounds `mins`/`maxes`, NULL: unbounded) admit one of the
/// `keys` at source rows `rows`. The candidates are sorted once and each page is a binary
/// search, so a file of many small pages costs pages x log(keys) comparisons, not
/// pages x keys.
fn admitted_pages(
    keys: &ArrayRef,
    rows: &[u32],
    mins: &ArrayRef,
    maxes: &ArrayRef,
    range: std::ops::Range<usize>,
) -> Result<Vec<bool>> {
    use std::cmp::Ordering;

    let candidates = take(keys, &UInt32Array::from(rows.to_vec()), None)?;
    let candidates = arrow::compute::filter(
        &arrow::compute::sort(&candidates, None)?,
        &arrow::compute::is_not_null(&candidates)?,
    )?;
    let n = candidates.len();
    let options = arrow::compute::SortOptions::default();
    let above_min = arrow::array::make_comparator(candidates.as_ref(), mins.as_ref(), options)?;
    let below_max = arrow::array::make_comparator(candidates.as_ref(), maxes.as_ref(), options)?;
    let order: Vec<usize> = (0..n).collect();
    Ok(range
        .map(|page| {
            // The first candidate at or above the page's minimum; the page admits a key
            // if that candidate is also at or below its maximum.
            let first = if mins.is_valid(page) {
                order.partition_point(|&i| above_min(i, page) == Ordering::Less)
            } else {
                0
            };
            first < n && (maxes.is_null(page) || below_max(first, page) != Ordering::Greater)
        })
        .collect())
}

/// The values of an integer array as `i64`, NULL as `None`; `None` for other types.
fn as_i64s(values: &ArrayRef) -> Option<Vec<Option<i64>>> {
    let values = arrow::compute::cast(values, &DataType::Int64).ok()?;
    Some(
        values
            .as_any()
            .downcast_ref::<Int64Array>()?
            .iter()
            .collect(),
    )
}
