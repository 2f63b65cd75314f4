//! Rewriting one target file: stream it a slice at a time, drop the rows the source
//! wins, hand the rest to a streaming Parquet writer and the winning rows after them.
//! Nothing here holds more than one decoded slice, the writer's open row group and the
//! file's replacing rows (at most the source partition's rows).

use std::sync::Arc;

use arrow::array::UInt32Array;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{concat_batches, take};
use deltalake::kernel::Add;
use futures::TryStreamExt;
use object_store::ObjectStore;

use crate::error::{DeltaLiteError, Result};
use crate::io::dv::Deleted;
use crate::io::read::stream_file_windowed;
use crate::io::writer::WriterFactory;
use crate::io::writer::abort;
use crate::ops::upsert::outcome::{Decider, Outcome, Outcomes};
use crate::ops::upsert::source::{Layout, SourcePartition};
use crate::options::OmittedColumns;
use crate::table::files::TargetFile;

/// Row counts of one rewrite.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RewriteCounts {
    pub updated: usize,
    pub copied: usize,
    /// Stored rows removed by a delete-marked source row.
    pub deleted: usize,
}

/// Everything a rewrite of one partition's files shares.
pub(crate) struct RewriteContext<'a> {
    pub store: &'a Arc<dyn ObjectStore>,
    pub layout: &'a Layout,
    pub part: &'a SourcePartition,
    pub decider: &'a Decider,
    pub outcomes: &'a Outcomes,
    pub carried: &'a [bool],
    pub omitted: OmittedColumns,
    pub read_batch_size: usize,
    /// Compressed bytes of pages fetched at a time while streaming a file.
    pub read_window_bytes: usize,
    pub writers: &'a WriterFactory,
    /// Where `u` and `p` deletion vectors of the files are found.
    pub table_url: &'a url::Url,
}

/// A stored row that the source replaces: its position among all rows of the file (row
/// groups in file order) and the source row that takes its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replacement {
    pub position: u64,
    pub source_row: u32,
}

/// A file to rewrite and the stored rows the probe found it replaces (ascending by
/// position; `None` without a probe: then every stored row is decided here, as
/// `PruneStrategy::None` and `Stats` have no probe).
pub(crate) type Candidate = (TargetFile, Option<Vec<Replacement>>);

/// What the rewrite of a group of files produced.
pub(crate) struct Rewritten {
    pub adds: Vec<Add>,
    pub counts: RewriteCounts,
    /// The replacing rows, when the caller writes them (`isolate_source_rows`); empty
    /// otherwise, as they went to the group's files after the copied rows.
    pub replacements: Vec<RecordBatch>,
}

/// Rewrite `group` (files of one partition) into new files of that partition, through one
/// writer: the files' kept rows in order, then the rows that replace the others (unless
/// `isolate`, which hands them back). The files are read one after the other, so memory
/// is one read window, one open row group and the replacing rows, as for one file; and a
/// partition of many small files comes out as few files of about the target size.
pub(crate) async fn rewrite_group(
    ctx: &RewriteContext<'_>,
    group: &[Candidate],
    isolate: bool,
) -> Result<Rewritten> {
    let mut writer = None;
    let mut counts = RewriteCounts::default();
    let mut replacements: Vec<RecordBatch> = Vec::new();
    let result: Result<()> = async {
        for (file, known) in group {
            // Rows a deletion vector removed are neither decided nor copied.
            let deleted = Deleted::of(ctx.store, ctx.table_url, file).await?;
            let (stored_layout, mut stream) = stream_file_windowed(
                Arc::clone(ctx.store),
                file,
                ctx.read_batch_size,
                ctx.read_window_bytes,
            )
            .await?;
            let writer = match &mut writer {
                Some(w) => w,
                // Encodings are learned from the group's first file (files of one
                // partition usually come from the same writer).
                None => writer.insert(
                    ctx.writers
                        .partition_writer_like(&ctx.part.key, &stored_layout)?,
                ),
            };
            // The stream yields every row of the file in order, so a running count is
            // each batch's first position.
            let mut start = 0u64;
            let mut remaining = known.as_deref();
            while let Some(batch) = stream.try_next().await? {
                let stored =
                    crate::schema::conform::conform_stored(&batch, &ctx.layout.data_schema)?;
                let end = start + stored.num_rows() as u64;
                let gone = deleted
                    .as_ref()
                    .map(|d| d.within(start, stored.num_rows()))
                    .unwrap_or_default();
                let split = match remaining.as_mut() {
                    Some(rest) => split_batch(
                        ctx,
                        &stored,
                        start,
                        take_before(rest, end),
                        &gone,
                        &mut counts,
                    )?,
                    None => {
                        let decided = decide_batch(ctx, &stored, start, &gone)?;
                        split_batch(ctx, &stored, start, &decided, &gone, &mut counts)?
                    }
                };
                for kept in &split.kept {
                    writer.write(kept).await?;
                }
                replacements.extend(split.replacements);
                start = end;
            }
            if let Some(&[first, ..]) = remaining {
                // The probe saw a row this read did not: the two reads disagree on the file.
                return Err(DeltaLiteError::Other(format!(
                    "{}: the probe replaces row {} but the file has {start} rows",
                    file.path, first.position
                )));
            }
        }
        if !isolate && let (Some(writer), Some(first)) = (writer.as_mut(), replacements.first()) {
            writer
                .write(&concat_batches(&first.schema(), &replacements)?)
                .await?;
            replacements.clear();
        }
        Ok(())
    }
    .await;
    match (result, writer) {
        (Ok(()), Some(writer)) => Ok(Rewritten {
            adds: writer.close().await?,
            counts,
            replacements,
        }),
        (Ok(()), None) => Ok(Rewritten {
            adds: Vec::new(),
            counts,
            replacements,
        }),
        (Err(e), Some(writer)) => {
            abort(writer).await;
            Err(e)
        }
        (Err(e), None) => Err(e),
    }
}

/// Groups of files rewritten through one writer each: consecutive files while their
/// stored bytes stay within `target` (a file at or above it is a group of its own), so
/// the output is about as many target-size files as the input holds, not one or more per
/// input file. Groups run concurrently (`max_parallel_files`).
pub(crate) fn groups(files: Vec<Candidate>, target: u64) -> Vec<Vec<Candidate>> {
    let mut out: Vec<Vec<Candidate>> = Vec::new();
    let mut bytes = 0u64;
    for candidate in files {
        let size = candidate.0.size;
        match out.last_mut() {
            Some(group) if !group.is_empty() && bytes.saturating_add(size) <= target => {
                bytes += size;
                group.push(candidate);
            }
            _ => {
                bytes = size;
                out.push(vec![candidate]);
            }
        }
    }
    out
}

/// Split off the leading replacements positioned before `end`.
fn take_before<'a>(rest: &mut &'a [Replacement], end: u64) -> &'a [Replacement] {
    let (here, after) = rest.split_at(rest.partition_point(|r| r.position < end));
    *rest = after;
    here
}

/// Decide every row of a stored batch that starts at file position `start`, except the
/// `gone` ones (deleted by vector; ascending offsets): record each match's outcome and
/// return the rows the source replaces.
fn decide_batch(
    ctx: &RewriteContext<'_>,
    stored: &RecordBatch,
    start: u64,
    gone: &[u32],
) -> Result<Vec<Replacement>> {
    let rows = stored.num_rows();
    let keys = ctx.decider.encode(stored.columns(), rows)?;
    let mut replaced = Vec::new();
    ctx.decider
        .for_each_match(ctx.part, &keys, |row, source_row, outcome| {
            if gone.binary_search(&(row as u32)).is_ok() {
                return Ok(());
            }
            ctx.outcomes.record(source_row, outcome);
            if outcome == Outcome::Updated {
                replaced.push(Replacement {
                    position: start + row as u64,
                    source_row,
                });
            }
            Ok(())
        })?;
    Ok(replaced)
}

/// A stored batch split for writing: the rows the source does not replace, as zero-copy
/// slices of the batch, and the rows that replace the others (few, rebuilt by `take`).
/// The replacements are written after the file's kept rows: row order within a file
/// carries no meaning in Delta, and slicing instead of interleaving saves copying every
/// stored row once more (~1 GB for a 16M-row rewrite).
struct Split {
    kept: Vec<RecordBatch>,
    replacements: Option<RecordBatch>,
}

/// Split a batch that starts at file position `start` around the stored rows named by
/// `replaced` (ascending positions within the batch); the `gone` rows (deleted by
/// vector, ascending offsets) are dropped.
fn split_batch(
    ctx: &RewriteContext<'_>,
    stored: &RecordBatch,
    start: u64,
    replaced: &[Replacement],
    gone: &[u32],
    counts: &mut RewriteCounts,
) -> Result<Split> {
    let rows = stored.num_rows();
    let local = batch_rows(rows, start, replaced)?;
    // A stored row whose replacing source row is marked deleted is dropped: not kept,
    // and nothing written in its place.
    let (written, removed): (Vec<(u32, &Replacement)>, Vec<_>) = local
        .iter()
        .copied()
        .zip(replaced)
        .partition(|(_, r)| !ctx.part.is_deleted(r.source_row as usize));
    counts.updated += written.len();
    counts.deleted += removed.len();
    counts.copied += rows - local.len() - gone.len();
    if local.is_empty() && gone.is_empty() {
        return Ok(Split {
            kept: vec![stored.clone()],
            replacements: None,
        });
    }
    let mut skipped = local.clone();
    skipped.extend_from_slice(gone);
    skipped.sort_unstable();
    let kept = kept_ranges(rows, &skipped)
        .map(|(offset, len)| stored.slice(offset, len))
        .collect();
    if written.is_empty() {
        return Ok(Split {
            kept,
            replacements: None,
        });
    }
    let stored_rows: UInt32Array = written.iter().map(|(row, _)| *row).collect();
    let source_rows: UInt32Array = written.iter().map(|(_, r)| r.source_row).collect();
    let columns = stored
        .columns()
        .iter()
        .enumerate()
        .map(|(i, stored_col)| {
            // `keep`: a column the batch does not carry keeps the stored value.
            if ctx.omitted == OmittedColumns::Keep && !ctx.carried[i] {
                return Ok(take(stored_col.as_ref(), &stored_rows, None)?);
            }
            Ok(take(ctx.part.batch.column(i).as_ref(), &source_rows, None)?)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(Split {
        kept,
        replacements: Some(RecordBatch::try_new(stored.schema(), columns)?),
    })
}

/// Rows within a batch of `rows` rows starting at file position `start` of the
/// replacements, which must ascend strictly and fall inside the batch: anything else
/// means the caller lost track of positions.
fn batch_rows(rows: usize, start: u64, replaced: &[Replacement]) -> Result<Vec<u32>> {
    let mut local: Vec<u32> = Vec::with_capacity(replaced.len());
    for r in replaced {
        let row = r
            .position
            .checked_sub(start)
            .filter(|&row| row < rows as u64)
            .and_then(|row| u32::try_from(row).ok())
            .filter(|&row| local.last().is_none_or(|&last| row > last))
            .ok_or_else(|| {
                DeltaLiteError::Other(format!(
                    "replacement of row {} does not fit the batch of rows {start}..{}",
                    r.position,
                    start + rows as u64
                ))
            })?;
        local.push(row);
    }
    Ok(local)
}

/// The `(offset, len)` runs of a batch of `rows` rows between the ascending `skipped`
/// rows.
fn kept_ranges(rows: usize, skipped: &[u32]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let ends = skipped
        .iter()
        .map(|&row| row as usize)
        .chain(std::iter::once(rows));
    let starts = std::iter::once(0).chain(skipped.iter().map(|&row| row as usize + 1));
    starts
        .zip(ends)
        .filter(|(from, to)| to > from)
        .map(|(from, to)| (from, to - from))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replacements(positions: &[u64]) -> Vec<Replacement> {
        positions
            .iter()
            .map(|&position| Replacement {
                position,
                source_row: 0,
            })
            .collect()
    }

    #[test]
    fn kept_rows_are_the_runs_between_replaced_rows() {
        let runs = |rows, skipped: &[u32]| kept_ranges(rows, skipped).collect::<Vec<_>>();
        assert_eq!(runs(10, &[]), vec![(0, 10)]);
        assert_eq!(runs(10, &[0, 1, 9]), vec![(2, 7)]);
        assert_eq!(runs(10, &[3, 5]), vec![(0, 3), (4, 1), (6, 4)]);
        assert_eq!(runs(2, &[0, 1]), Vec::<(usize, usize)>::new());
    }

    #[test]
    fn replacements_must_ascend_inside_their_batch() {
        assert_eq!(
            batch_rows(10, 100, &replacements(&[100, 104, 109])).expect("fits"),
            vec![0, 4, 9]
        );
        for bad in [&[99][..], &[110], &[104, 104], &[105, 104]] {
            assert!(batch_rows(10, 100, &replacements(bad)).is_err(), "{bad:?}");
        }
    }
}
