//! Spool files: request bodies, results and downloads too large to hold in memory.

use std::path::Path;

use tempfile::NamedTempFile;

/// A new spool file in `dir` (the server's `--spool-dir`, by default `.spool` under a
/// local data root, so a stored upload moves into its table by a rename), else in the
/// system's temporary directory. Removed when dropped.
pub fn spool_file(dir: Option<&Path>) -> std::io::Result<NamedTempFile> {
    match dir {
        Some(d) => NamedTempFile::new_in(d),
        None => NamedTempFile::new(),
    }
}
