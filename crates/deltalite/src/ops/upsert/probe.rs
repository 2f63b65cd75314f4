//! The exact probe: read only the key (and cursor) columns of a candidate file, after
//! skipping row groups by their statistics and bloom filters, and decide per matched
//! source row what the upsert will do with it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array};
use arrow::compute::and;
use arrow::datatypes::DataType;
use deltalake::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use deltalake::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use deltalake::parquet::bloom_filter::Sbbf;
use futures::TryStreamExt;
use object_store::ObjectStore;

use crate::error::{DeltaLiteError, Result};
use crate::io::dv::Deleted;
use crate::io::read::{
    open_with_row_numbers, present_roots, row_numbers, row_numbers_are_positions, sparse_columns,
    stream_projected,
};
use crate::ops::upsert::outcome::{Decider, Outcome};
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
    let mut builder = open_with_row_numbers(store, file).await?;
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
    let mut candidates: Vec<Option<BooleanArray>> = vec![None; row_group_count];
    let live: BooleanArray = part.null_key.iter().map(|n| Some(!n)).collect();
    for rg in candidates.iter_mut() {
        *rg = Some(live.clone());
    }
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
        for (rg, mask) in candidates.iter_mut().enumerate() {
            let Some(current) = mask.as_ref() else {
                continue;
            };
            let bound = |a: &ArrayRef| (a.is_valid(rg)).then(|| a.slice(rg, 1));
            let m = within_bounds(
                part.batch.column(k),
                bound(&mins).as_ref(),
                bound(&maxes).as_ref(),
            )?;
            let next = and(current, &m)?;
            *mask = (next.true_count() > 0).then_some(next);
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
            for (rg, mask) in candidates.iter_mut().enumerate() {
                let Some(current) = mask.as_ref() else {
                    continue;
                };
                let Some(filter) = builder.get_row_group_column_bloom_filter(rg, leaf).await?
                else {
                    continue;
                };
                let Some(next) = bloom_mask(&filter, part.batch.column(*k), current) else {
                    continue;
                };
                *mask = (next.true_count() > 0).then_some(next);
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
    // Keys are collected only from a read of every row: a skipped row group or page
    // would leave keys out, and the cache must know all of a file's keys or none.
    let mut keys: Option<Vec<u64>> =
        (collect_keys && selected.len() == row_group_count && result.pages_skipped == 0)
            .then(Vec::new);
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
    let trusted = row_numbers_are_positions(&metadata);
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
            && stored.extend_hashes(all).is_none()
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
    result.keys = keys.map(FileKeys::new);
    Ok(result)
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
    candidates: &[Option<BooleanArray>],
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
            Some(mask) => admitted_pages(keys, mask, &mins, &maxes, page..page + pages)?,
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
/// `keys` that `mask` keeps. The candidates are sorted once and each page is a binary
/// search, so a file of many small pages costs pages x log(keys) comparisons, not
/// pages x keys.
fn admitted_pages(
    keys: &ArrayRef,
    mask: &BooleanArray,
    mins: &ArrayRef,
    maxes: &ArrayRef,
    range: std::ops::Range<usize>,
) -> Result<Vec<bool>> {
    use std::cmp::Ordering;

    let candidates = arrow::compute::filter(keys, mask)?;
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

/// Narrow `current` to source keys the bloom filter may hold; `None` if the key type
/// has no bloom representation we can check.
fn bloom_mask(filter: &Sbbf, keys: &ArrayRef, current: &BooleanArray) -> Option<BooleanArray> {
    use arrow::array::AsArray;
    let check = |i: usize| -> bool {
        match keys.data_type() {
            DataType::Int64 => {
                filter.check(&keys.as_primitive::<arrow::datatypes::Int64Type>().value(i))
            }
            DataType::Int32 => {
                filter.check(&keys.as_primitive::<arrow::datatypes::Int32Type>().value(i))
            }
            DataType::Utf8 => filter.check(keys.as_string::<i32>().value(i)),
            DataType::Binary => filter.check(keys.as_binary::<i32>().value(i)),
            _ => true,
        }
    };
    if !matches!(
        keys.data_type(),
        DataType::Int64 | DataType::Int32 | DataType::Utf8 | DataType::Binary
    ) {
        return None;
    }
    Some(
        (0..current.len())
            .map(|i| Some(current.value(i) && current.is_valid(i) && check(i)))
            .collect(),
    )
}
