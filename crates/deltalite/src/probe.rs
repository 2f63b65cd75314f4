//! The exact probe: read only the key (and cursor) columns of a candidate file, after
//! skipping row groups by their statistics and bloom filters, and decide per matched
//! source row what the upsert will do with it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::compute::and;
use arrow::datatypes::DataType;
use deltalake::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use deltalake::parquet::bloom_filter::Sbbf;
use futures::TryStreamExt;
use object_store::ObjectStore;

use crate::error::Result;
use crate::outcome::{Decider, Outcome};
use crate::read::{open, present_roots, sparse_columns, stream_projected};
use crate::source::{Layout, SourcePartition};
use crate::target::{TargetFile, prunable, within_bounds};

/// What probing one file found.
#[derive(Debug, Default)]
pub(crate) struct ProbeResult {
    /// The file has a stored row that the upsert changes: it must be rewritten.
    pub rewrite: bool,
    /// Decisions for matched source rows.
    pub outcomes: Vec<(u32, Outcome)>,
    /// Row groups read / skipped, for tracing.
    pub row_groups_read: usize,
    pub row_groups_skipped: usize,
}

/// Probe `file` for the keys of `part`.
pub(crate) async fn probe_file(
    store: Arc<dyn ObjectStore>,
    file: &TargetFile,
    part: &SourcePartition,
    layout: &Layout,
    decider: &Decider,
    read_batch_size: usize,
) -> Result<ProbeResult> {
    let mut builder = open(store, file).await?;
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

    let root_indices: Vec<usize> = roots.iter().map(|(_, r)| *r).collect();
    let mut stream = stream_projected(builder, &root_indices, selected, read_batch_size)?;
    while let Some(batch) = stream.try_next().await? {
        let columns = sparse_columns(&batch, &layout.data_schema, &wanted)?;
        let stored = decider.encode(&columns, batch.num_rows())?;
        for row in 0..batch.num_rows() {
            if let Some((source_row, outcome)) = decider.decide(part, &stored, row) {
                if outcome == Outcome::Updated {
                    result.rewrite = true;
                }
                result.outcomes.push((source_row, outcome));
            }
        }
    }
    Ok(result)
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
