//! Compaction: bin-pack the small files of each partition into target-size files, in one
//! commit. The copying is `rearrange.rs`'s: memory is one decoded slice plus one open row
//! group, whatever the table size.

use std::collections::{BTreeMap, HashMap};

use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;

use crate::error::{DeltaLiteError, Result};
use crate::io::upload::MultipartPolicy;
use crate::ops::rearrange::{RearrangeSettings, Rearrangement};
use crate::options::MIB;
use crate::runtime::budget::EnvDefaults;
use crate::table::DeltaLiteTable;
use crate::table::files::{TargetFile, active_files, check_file_supported};
use crate::txn::{CommitSpec, ReadSet};

/// Options of a compaction.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Output file size target, and the size under which a file counts as small; `None`
    /// means the table's `delta.targetFileSize` (else 100 MiB).
    pub target_file_size: Option<u64>,
    /// Rows per decoded slice when streaming input files.
    pub read_batch_size: usize,
    /// Bytes the open output row group may hold.
    pub max_buffered_bytes: usize,
    /// Columns to write bloom filters for (the upsert keys, so later probes stay cheap).
    pub bloom_filter_columns: Vec<String>,
    /// Attempts delta-rs may rebase the commit over concurrent ones.
    pub commit_max_retries: usize,
    /// Extra key/values recorded in the commit info.
    pub commit_metadata: HashMap<String, serde_json::Value>,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            target_file_size: None,
            read_batch_size: 8192,
            max_buffered_bytes: 64 * MIB,
            bloom_filter_columns: Vec::new(),
            commit_max_retries: 15,
            commit_metadata: HashMap::new(),
        }
    }
}

impl CompactOptions {
    /// Reject values that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.read_batch_size == 0 || self.max_buffered_bytes == 0 {
            return Err(DeltaLiteError::invalid(
                "read_batch_size and max_buffered_bytes must be positive",
            ));
        }
        if self.target_file_size == Some(0) {
            return Err(DeltaLiteError::invalid("target_file_size must be positive"));
        }
        Ok(())
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Version committed (the current version when there was nothing to do).
    pub version: u64,
    /// Partitions that had files merged.
    pub partitions_compacted: usize,
    /// Small files replaced.
    pub files_removed: usize,
    /// Files written.
    pub files_added: usize,
    /// Rows streamed from the removed files into the new ones.
    pub rows_rewritten: u64,
}

/// Greedy bin-packing of one partition's small files (sorted by size): a bin closes when
/// the next file would push it past the target. Bins of one file are left alone.
fn bins(mut small: Vec<TargetFile>, target: u64) -> Vec<Vec<TargetFile>> {
    small.sort_by_key(|f| f.size);
    let mut out: Vec<Vec<TargetFile>> = Vec::new();
    let mut current: Vec<TargetFile> = Vec::new();
    let mut size = 0u64;
    for file in small {
        if !current.is_empty() && size + file.size > target {
            out.push(std::mem::take(&mut current));
            size = 0;
        }
        size += file.size;
        current.push(file);
    }
    out.push(current);
    out.retain(|bin| bin.len() > 1);
    out
}

impl DeltaLiteTable {
    /// Merge the small files of every partition into files of about the target size.
    /// One commit (`OPTIMIZE`, `dataChange = false`); the logical contents do not change.
    pub async fn compact(&mut self, options: &CompactOptions) -> Result<CompactStats> {
        options.validate()?;
        let table = self.delta_table();
        let state = table.snapshot()?;
        crate::schema::features::check_supported(state)?;
        let target = options
            .target_file_size
            .unwrap_or_else(|| state.table_config().target_file_size().get());
        let mut rearrangement = Rearrangement::new(
            table.object_store(),
            state,
            RearrangeSettings {
                table_schema: state.snapshot().arrow_schema(),
                target_file_size: target,
                read_batch_size: options.read_batch_size,
                max_buffered_bytes: options.max_buffered_bytes,
                bloom_filter_columns: options.bloom_filter_columns.clone(),
                // `CompactOptions` has no multipart knobs: the process defaults apply.
                compression: deltalake::parquet::basic::Compression::SNAPPY,
                multipart: MultipartPolicy::for_table(
                    table.table_url(),
                    EnvDefaults::get().multipart_threshold,
                    EnvDefaults::get().multipart_part_size,
                ),
            },
        )?;

        // Small files grouped by partition, in a stable order.
        let mut by_partition: BTreeMap<Vec<Option<String>>, Vec<TargetFile>> = BTreeMap::new();
        for file in active_files(state)? {
            check_file_supported(&file)?;
            if file.size < target {
                by_partition
                    .entry(file.partition.clone())
                    .or_default()
                    .push(file);
            }
        }

        let mut stats = CompactStats::default();
        for files in by_partition.into_values() {
            let groups = bins(files, target);
            if groups.is_empty() {
                continue;
            }
            stats.partitions_compacted += 1;
            for group in groups {
                stats.files_removed += group.len();
                match rearrangement.rewrite_group(group).await {
                    Ok(rows) => stats.rows_rewritten += rows,
                    Err(e) => {
                        rearrangement.abandon().await;
                        return Err(e);
                    }
                }
            }
        }
        stats.files_added = rearrangement.files_added();
        let operation = DeltaOperation::Optimize {
            predicate: None,
            target_size: target as i64,
        };
        let spec = CommitSpec::new(&options.commit_metadata, &None);
        // Compaction reads no rows' meaning: it rebases over concurrent data commits, but
        // not over one that removed a file it compacts (`txn::commit`'s own-remove rule).
        stats.version = match rearrangement
            .commit(
                self,
                Vec::new(),
                operation,
                &spec,
                options.commit_max_retries,
                ReadSet::nothing(),
            )
            .await?
        {
            Some(version) => version,
            None => self.version(),
        };
        Ok(stats)
    }
}
