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

use crate::error::Result;
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

/// Rewrite `file` into new files of the same partition.
pub(crate) async fn rewrite_file(
    ctx: &RewriteContext<'_>,
    file: &TargetFile,
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
        while let Some(batch) = stream.try_next().await? {
            let stored = crate::conform::conform_stored(&batch, &ctx.layout.data_schema)?;
            let merged = merge_batch(ctx, &stored, &mut counts)?;
            writer.write(&merged).await?;
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

pub(crate) async fn abort(writer: PartitionWriter) {
    if let Err(e) = writer.abort().await {
        tracing::warn!(error = %e, "failed to abort a partial upload");
    }
}

/// Replace the stored rows that the source wins; everything else is copied.
fn merge_batch(
    ctx: &RewriteContext<'_>,
    stored: &RecordBatch,
    counts: &mut RewriteCounts,
) -> Result<RecordBatch> {
    let rows = stored.num_rows();
    let keys = ctx.decider.encode(stored.columns(), rows)?;
    // (0, i): stored row i; (1, j): source row j.
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(rows);
    let mut replaced = 0usize;
    for row in 0..rows {
        match ctx.decider.decide(ctx.part, &keys, row) {
            Some((source_row, outcome)) => {
                ctx.outcomes.record(source_row, outcome);
                if outcome == Outcome::Updated {
                    replaced += 1;
                    picks.push((1, source_row as usize));
                } else {
                    picks.push((0, row));
                }
            }
            None => picks.push((0, row)),
        }
    }
    counts.updated += replaced;
    counts.copied += rows - replaced;
    if replaced == 0 {
        return Ok(stored.clone());
    }
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
