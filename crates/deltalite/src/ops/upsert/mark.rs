//! Merge-on-read: instead of rewriting a file whose few stored rows the source replaces
//! or deletes, give the file a deletion vector naming them (merged with the one it has)
//! and write the replacing rows with the inserts. Chosen per file, on tables that write
//! deletion vectors: a file whose deleted share would pass
//! `Knobs::deletion_vector_max_share` is rewritten instead (which drops its vector).
//! The cost then follows the batch: one small vector file per partition the call touches
//! (every marked file's vector at its own offset), not one per file.

use std::sync::Arc;

use object_store::ObjectStore;
use url::Url;

use crate::error::{DeltaLiteError, Result};
use crate::io::dv::Deleted;
use crate::ops::upsert::rewrite::Replacement;
use crate::ops::upsert::source::SourcePartition;
use crate::table::files::TargetFile;

/// What marking one file decided; its vector is written with the partition's others
/// ([`crate::io::dv::write_for`]).
pub(crate) struct Marked {
    pub file: TargetFile,
    /// Every row the file's new vector deletes; `None` when that is all of its rows (the
    /// file leaves the table).
    pub vector: Option<Deleted>,
    /// Source rows that replace the marked stored rows (the caller writes them).
    pub written: Vec<u32>,
    /// Stored rows a delete-marked source row removed.
    pub deleted: usize,
}

/// Whether `file` is better marked than rewritten: the probe knows the positions of the
/// rows it replaces, the log knows its row count, and the share of deleted rows stays
/// at or under `max_share`.
pub(crate) fn worth_marking(
    file: &TargetFile,
    replaced: Option<&[Replacement]>,
    max_share: f64,
) -> bool {
    let (Some(replaced), Some(rows)) = (replaced, file.num_records) else {
        return false;
    };
    let already = file
        .deletion_vector
        .as_ref()
        .map_or(0, |dv| dv.cardinality.max(0) as usize);
    rows > 0 && (already + replaced.len()) as f64 <= max_share * rows as f64
}

/// The deletion vector of `file` with the rows of `replaced` added to the ones it has
/// (`known`: that vector as the probe read it; read here if not given).
pub(crate) async fn mark(
    store: &Arc<dyn ObjectStore>,
    table_url: &Url,
    file: TargetFile,
    known: Option<Deleted>,
    replaced: Vec<Replacement>,
    part: &SourcePartition,
) -> Result<Marked> {
    let before = match known {
        Some(known) => known,
        None => Deleted::of(store, table_url, &file)
            .await?
            .unwrap_or_default(),
    };
    let count = before.len();
    let deleted = before.with(replaced.iter().map(|r| r.position));
    if deleted.len() != count + replaced.len() as u64 {
        // The probe skips deleted rows and names each position once.
        return Err(DeltaLiteError::Other(format!(
            "{}: the upsert replaces a row its deletion vector already removed",
            file.path
        )));
    }
    let rows = file.num_records.unwrap_or(usize::MAX) as u64;
    let vector = (deleted.len() < rows).then_some(deleted);
    let (written, removed): (Vec<u32>, Vec<u32>) = replaced
        .iter()
        .map(|r| r.source_row)
        .partition(|&row| !part.is_deleted(row as usize));
    Ok(Marked {
        file,
        vector,
        written,
        deleted: removed.len(),
    })
}
