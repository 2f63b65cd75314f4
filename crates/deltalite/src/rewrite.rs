//! Rewriting one target file: stream it a slice at a time, replace the rows the source
//! wins, and hand the result to a streaming Parquet writer. Nothing here holds more than
//! one decoded slice plus the writer's open row group.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::interleave;
use deltalake::datafile::writer::PartitionWriter;
use deltalake::kernel::Add;
use futures::TryStreamExt;
use object_store::ObjectStore;

use crate::error::{DeltaLiteError, Result};
use crate::options::OmittedColumns;
use crate::outcome::{Decider, Outcome, Outcomes};
use crate::read::stream_file_windowed;
use crate::source::{Layout, SourcePartition};
use crate::target::TargetFile;
use crate::writer::WriterFactory;

/// Row counts of one rewrite.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RewriteCounts {
    pub updated: usize,
    pub copied: usize,
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
}

/// A stored row that the source replaces: its position among all rows of the file (row
/// groups in file order) and the source row that takes its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replacement {
    pub position: u64,
    pub source_row: u32,
}

/// Rewrite `file` into new files of the same partition. `known` holds the replacements the
/// probe already decided (ascending by position); without it every stored row is decided
/// here, as `PruneStrategy::None` has no probe.
pub(crate) async fn rewrite_file(
    ctx: &RewriteContext<'_>,
    file: &TargetFile,
    known: Option<&[Replacement]>,
) -> Result<(Vec<Add>, RewriteCounts)> {
    let (stored_layout, mut stream) = stream_file_windowed(
        Arc::clone(ctx.store),
        file,
        ctx.read_batch_size,
        ctx.read_window_bytes,
    )
    .await?;
    let mut writer = ctx
        .writers
        .partition_writer_like(&ctx.part.key, &stored_layout)?;
    let mut counts = RewriteCounts::default();
    let result: Result<()> = async {
        // The stream yields every row of the file in order, so a running count is each
        // batch's first position.
        let mut start = 0u64;
        let mut remaining = known;
        while let Some(batch) = stream.try_next().await? {
            let stored = crate::conform::conform_stored(&batch, &ctx.layout.data_schema)?;
            let end = start + stored.num_rows() as u64;
            let merged = match remaining.as_mut() {
                Some(rest) => {
                    merge_batch(ctx, &stored, start, take_before(rest, end), &mut counts)?
                }
                None => {
                    let decided = decide_batch(ctx, &stored, start)?;
                    merge_batch(ctx, &stored, start, &decided, &mut counts)?
                }
            };
            writer.write(&merged).await?;
            start = end;
        }
        if let Some(&[first, ..]) = remaining {
            // The probe saw a row this read did not: the two reads disagree on the file.
            return Err(DeltaLiteError::Other(format!(
                "{}: the probe replaces row {} but the file has {start} rows",
                file.path, first.position
            )));
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok((writer.close().await?, counts)),
        Err(e) => {
            abort(writer).await;
            Err(e)
        }
    }
}

/// Split off the leading replacements positioned before `end`.
fn take_before<'a>(rest: &mut &'a [Replacement], end: u64) -> &'a [Replacement] {
    let (here, after) = rest.split_at(rest.partition_point(|r| r.position < end));
    *rest = after;
    here
}

pub(crate) async fn abort(writer: PartitionWriter) {
    if let Err(e) = writer.abort().await {
        tracing::warn!(error = %e, "failed to abort a partial upload");
    }
}

/// Decide every row of a stored batch that starts at file position `start`: record each
/// match's outcome and return the rows the source replaces.
fn decide_batch(
    ctx: &RewriteContext<'_>,
    stored: &RecordBatch,
    start: u64,
) -> Result<Vec<Replacement>> {
    let rows = stored.num_rows();
    let keys = ctx.decider.encode(stored.columns(), rows)?;
    let mut replaced = Vec::new();
    for row in 0..rows {
        if let Some((source_row, outcome)) = ctx.decider.decide(ctx.part, &keys, row) {
            ctx.outcomes.record(source_row, outcome);
            if outcome == Outcome::Updated {
                replaced.push(Replacement {
                    position: start + row as u64,
                    source_row,
                });
            }
        }
    }
    Ok(replaced)
}

/// Replace the stored rows named by `replaced` (positions within the batch that starts
/// at file position `start`); everything else is copied.
fn merge_batch(
    ctx: &RewriteContext<'_>,
    stored: &RecordBatch,
    start: u64,
    replaced: &[Replacement],
    counts: &mut RewriteCounts,
) -> Result<RecordBatch> {
    let rows = stored.num_rows();
    if replaced.is_empty() {
        counts.copied += rows;
        return Ok(stored.clone());
    }
    let picks = picks(rows, start, replaced)?;
    counts.updated += replaced.len();
    counts.copied += rows - replaced.len();
    let columns = stored
        .columns()
        .iter()
        .enumerate()
        .map(|(i, stored_col)| {
            if ctx.omitted == OmittedColumns::Keep && !ctx.carried[i] {
                return Ok(Arc::clone(stored_col));
            }
            let source_col = ctx.part.batch.column(i);
            Ok(interleave(
                &[stored_col.as_ref(), source_col.as_ref()],
                &picks,
            )?)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(stored.schema(), columns)?)
}

/// The `interleave` indices of a batch of `rows` stored rows starting at file position
/// `start`: (0, i) keeps stored row i, (1, j) takes source row j. A replacement outside
/// the batch, or a row replaced twice, means the caller lost track of positions.
fn picks(rows: usize, start: u64, replaced: &[Replacement]) -> Result<Vec<(usize, usize)>> {
    let mut picks: Vec<(usize, usize)> = (0..rows).map(|row| (0, row)).collect();
    for r in replaced {
        let pick = r
            .position
            .checked_sub(start)
            .and_then(|row| usize::try_from(row).ok())
            .and_then(|row| picks.get_mut(row))
            .filter(|pick| pick.0 == 0)
            .ok_or_else(|| {
                DeltaLiteError::Other(format!(
                    "replacement of row {} does not fit the batch of rows {start}..{}",
                    r.position,
                    start + rows as u64
                ))
            })?;
        *pick = (1, r.source_row as usize);
    }
    Ok(picks)
}
