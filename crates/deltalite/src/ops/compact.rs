//! Compaction: bin-pack the small files of each partition into target-size files, the way
//! delta-rs's `optimize.compact()` plans and writes them, so that the two are
//! interchangeable (same bins, same output layout, ZSTD pages, the same `OPTIMIZE` commit
//! with its operation metrics). Tables that write deletion vectors, which delta-rs does
//! not, differ in two ways: bins follow the upsert key (below) and pages are Snappy, as
//! their upserts write them. The copying is `rearrange.rs`'s: memory is one decoded
//! slice plus one open row group per bin in flight, whatever the table size.
//!
//! Planning (delta-rs's): per partition, files in the snapshot's order (a bin then copies
//! its files oldest first, so rows keep the order they were written); a file larger than
//! the target is skipped and splits the run; neighbours join a bin while the bin's bytes
//! stay within the target; bins of one file are dropped (nothing to merge). A file with a
//! deletion vector is always rewritten (compaction purges vectors), and in a partition
//! that has one, files are neighbours in the order of their smallest key, not the log's,
//! when the files carry an upsert key (a single unique column with a bloom filter, the
//! lookup layout): merge-on-read re-adds every file it marks, so the log's order no
//! longer follows the data, and bins of log neighbours would mix every key range into
//! every output file, which no lookup could then skip by the log's bounds. On top:
//! `partitions` limits the work to some partition values, `min_partition_removable_files`
//! leaves a partition alone unless compacting it removes that many files net, and
//! `max_bins_per_commit` commits in rounds. `dry_run` plans and stops.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use delta_kernel::expressions::Scalar;
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt;
use futures::stream::{self, StreamExt};
use indexmap::IndexMap;

use crate::error::{DeltaLiteError, Result};
use crate::io::upload::MultipartPolicy;
use crate::io::writer::WRITE_COMPRESSION;
use crate::ops::rearrange::{GroupRewrite, RearrangeSettings, Rearrangement};
use crate::options::EnvDefaults;
use crate::options::MIB;
use crate::schema::partition::normalize_raw;
use crate::table::DeltaLiteTable;
use crate::table::files::{TargetFile, active_files, field_of};
use crate::txn::{CommitSpec, ReadSet};

/// Options of a compaction.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Output file size target, and the size above which a file is left alone; `None`
    /// means the table's `delta.targetFileSize` (else 100 MiB).
    pub target_file_size: Option<u64>,
    /// Rows per decoded slice when streaming input files.
    pub read_batch_size: usize,
    /// Bytes the open output row groups may hold, shared by the bins in flight.
    pub max_buffered_bytes: usize,
    /// Columns to write bloom filters for (the upsert keys, so later probes stay cheap).
    pub bloom_filter_columns: Vec<String>,
    /// Lost commit races rebased over before giving up.
    pub commit_max_retries: usize,
    /// Extra key/values recorded in the commit info.
    pub commit_metadata: HashMap<String, serde_json::Value>,
    /// Compact only these values of the (single) partition column; `None` for all
    /// partitions (`Some(None)` in the list is the NULL partition).
    pub partitions: Option<Vec<Option<String>>>,
    /// Leave a partition alone unless compacting it removes at least this many files net
    /// (files merged minus files written).
    pub min_partition_removable_files: usize,
    /// Commit after this many bins (rounds of commits); `None` for one commit.
    pub max_bins_per_commit: Option<usize>,
    /// Bins rewritten concurrently.
    pub max_parallel_bins: usize,
    /// Plan only: report what would be done, write and commit nothing.
    pub dry_run: bool,
    /// Multipart upload threshold and part size on object stores; `None` for the process
    /// defaults (see `Knobs::multipart_threshold`).
    pub multipart_threshold: Option<usize>,
    pub multipart_part_size: Option<usize>,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            target_file_size: None,
            read_batch_size: 8192,
            max_buffered_bytes: 64 * MIB,
            bloom_filter_columns: Vec::new(),
            commit_max_retries: crate::options::DEFAULT_COMMIT_MAX_RETRIES,
            commit_metadata: HashMap::new(),
            partitions: None,
            min_partition_removable_files: 1,
            max_bins_per_commit: None,
            max_parallel_bins: 2,
            dry_run: false,
            multipart_threshold: None,
            multipart_part_size: None,
        }
    }
}

impl CompactOptions {
    /// Reject values that cannot work.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("read_batch_size", self.read_batch_size),
            ("max_buffered_bytes", self.max_buffered_bytes),
            ("max_parallel_bins", self.max_parallel_bins),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(DeltaLiteError::invalid(format!("{name} must be positive")));
            }
        }
        if self.target_file_size == Some(0) {
            return Err(DeltaLiteError::invalid("target_file_size must be positive"));
        }
        if self.max_bins_per_commit == Some(0) {
            return Err(DeltaLiteError::invalid(
                "max_bins_per_commit must be positive",
            ));
        }
        if self.multipart_part_size == Some(0) {
            return Err(DeltaLiteError::invalid(
                "multipart_part_size must be positive",
            ));
        }
        Ok(())
    }
}

/// What a compaction did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Version committed last (the current version when nothing was committed).
    pub version: u64,
    /// Files of the selected partitions looked at.
    pub files_considered: usize,
    /// Files left alone: larger than the target, alone in their bin, or in a partition
    /// below `min_partition_removable_files`.
    pub files_skipped: usize,
    /// Partitions that had files merged.
    pub partitions_compacted: usize,
    /// Bins planned (groups of files merged into about one file each).
    pub bins: usize,
    /// Files merged away.
    pub files_removed: usize,
    /// Files written.
    pub files_added: usize,
    /// Bytes of the files merged away.
    pub bytes_removed: u64,
    /// Bytes of the files written.
    pub bytes_added: u64,
    /// Rows streamed from the removed files into the new ones.
    pub rows_rewritten: u64,
    /// Record batches read.
    pub batches_read: u64,
    /// Bins rewritten concurrently (the knob in effect).
    pub parallel_bins: usize,
    /// Commits made.
    pub commits: usize,
    /// Files in the largest bin.
    pub largest_bin_files: usize,
    /// Whether this was a plan only.
    pub dry_run: bool,
    /// Planning, rewriting (all rounds), committing (all rounds).
    pub plan_time: Duration,
    pub rewrite_time: Duration,
    pub commit_time: Duration,
}

/// The top-level columns the first file of `bins` has bloom filters for: without columns
/// named by the caller, a compaction keeps the lookup layout its input had (the upsert
/// keys', so later probes stay cheap). The second value says whether they are a unique
/// key: one column that the input stored without a dictionary, as upserts write their
/// single-column keys. Best effort: a footer that cannot be read means none.
async fn inherited_bloom_columns<'a>(
    store: deltalake::logstore::ObjectStoreRef,
    mut files: impl Iterator<Item = &'a TargetFile>,
) -> (Vec<String>, bool) {
    let Some(file) = files.next() else {
        return (Vec::new(), false);
    };
    let Ok(builder) = crate::io::read::open(store, file).await else {
        return (Vec::new(), false);
    };
    let Some(group) = builder.metadata().row_groups().first() else {
        return (Vec::new(), false);
    };
    let columns: Vec<_> = group
        .columns()
        .iter()
        .filter(|c| c.bloom_filter_offset().is_some())
        .filter_map(|c| match c.column_path().parts() {
            [name] => Some((name.clone(), c.dictionary_page_offset().is_none())),
            _ => None,
        })
        .collect();
    let unique = matches!(columns.as_slice(), [(_, true)]);
    (columns.into_iter().map(|(name, _)| name).collect(), unique)
}

/// One partition's bins, in planning order.
struct PartitionPlan {
    bins: Vec<Vec<TargetFile>>,
}

/// The plan of a compaction.
#[derive(Default)]
struct Plan {
    partitions: Vec<PartitionPlan>,
    considered: usize,
    skipped: usize,
}

/// The value files are ordered by within a partition that purges vectors: the smallest
/// key, as the log's bounds give it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum KeyBound {
    Int(i128),
    Text(String),
    Bytes(Vec<u8>),
}

impl KeyBound {
    fn of(file: &TargetFile, key: &str) -> Option<Self> {
        Some(match field_of(&file.min_values, key)? {
            Scalar::Long(v) | Scalar::Timestamp(v) | Scalar::TimestampNtz(v) => {
                Self::Int((*v).into())
            }
            Scalar::Integer(v) | Scalar::Date(v) => Self::Int((*v).into()),
            Scalar::Short(v) => Self::Int((*v).into()),
            Scalar::Byte(v) => Self::Int((*v).into()),
            Scalar::String(v) => Self::Text(v.clone()),
            Scalar::Binary(v) => Self::Bytes(v.clone()),
            _ => return None,
        })
    }
}

/// delta-rs's planning (see the module documentation), then this engine's partition
/// threshold. `files` come in the snapshot's order; `key` is the upsert key the files
/// are laid out for, if any (orders the files of partitions with vectors).
fn plan(files: Vec<TargetFile>, target: u64, min_removable: usize, key: Option<&str>) -> Plan {
    let mut out = Plan::default();
    // Per partition, in first-seen order: every file, and whether it is a candidate.
    let mut by_partition: IndexMap<Vec<Option<String>>, Vec<(TargetFile, bool)>> = IndexMap::new();
    for file in files {
        out.considered += 1;
        // A file with a deletion vector is always rewritten: compaction purges them.
        let candidate = file.size <= target || file.deletion_vector.is_some();
        if !candidate {
            out.skipped += 1;
        }
        by_partition
            .entry(file.partition.clone())
            .or_default()
            .push((file, candidate));
    }
    for (_, mut files) in by_partition {
        let keyed = key.is_some() && files.iter().any(|(f, _)| f.deletion_vector.is_some());
        if let Some(key) = key.filter(|_| keyed) {
            // Neighbours by key (a file skipped for its size still splits a run where its
            // keys are); a file without a bound last; ties keep the log's order.
            files.sort_by_cached_key(|(f, _)| {
                let bound = KeyBound::of(f, key);
                (bound.is_none(), bound)
            });
        }
        // Ordinals in that order: a skipped file leaves a gap, which ends a run.
        let files = files
            .into_iter()
            .enumerate()
            .filter(|(_, (_, candidate))| *candidate)
            .map(|(ordinal, (file, _))| (ordinal, file));
        let mut bins: Vec<Vec<TargetFile>> = Vec::new();
        let mut current: Vec<TargetFile> = Vec::new();
        let (mut bytes, mut last) = (0u64, None::<usize>);
        for (ordinal, file) in files {
            let contiguous = last.is_some_and(|l| ordinal == l + 1);
            if current.is_empty() || (contiguous && bytes + file.size <= target) {
                bytes += file.size;
            } else {
                bins.push(std::mem::take(&mut current));
                bytes = file.size;
            }
            last = Some(ordinal);
            current.push(file);
        }
        if !current.is_empty() {
            bins.push(current);
        }
        if !keyed {
            // The log lists files newest first: a bin copies them oldest first, so its
            // file holds their rows in the order they were written (readers that list
            // files oldest first, as the server does, then see no change of order).
            for bin in &mut bins {
                bin.reverse();
            }
        }
        bins.retain(|bin| {
            let keep = bin.len() > 1 || bin[0].deletion_vector.is_some();
            if !keep {
                out.skipped += 1;
            }
            keep
        });
        let merged: usize = bins.iter().map(Vec::len).sum();
        if bins.is_empty() {
            continue;
        }
        let purges = bins.iter().flatten().any(|f| f.deletion_vector.is_some());
        if merged - bins.len() < min_removable && !purges {
            out.skipped += merged;
            continue;
        }
        out.partitions.push(PartitionPlan { bins });
    }
    out
}

/// delta-rs's per-side file metrics (`filesAdded` / `filesRemoved`).
fn size_metrics(sizes: &[u64]) -> String {
    let total: u64 = sizes.iter().sum();
    let count = sizes.len() as u64;
    serde_json::json!({
        "avg": if count == 0 { 0.0 } else { total as f64 / count as f64 },
        "max": sizes.iter().max().copied().unwrap_or(0),
        "min": sizes.iter().min().copied().unwrap_or(0),
        "totalFiles": count,
        "totalSize": total,
    })
    .to_string()
}

impl DeltaLiteTable {
    /// Merge the small files of every (selected) partition into files of about the target
    /// size, as delta-rs's `optimize.compact()` does: `OPTIMIZE` commits (`dataChange =
    /// false`), one per `max_bins_per_commit` bins; the logical contents do not change.
    pub async fn compact(&mut self, options: &CompactOptions) -> Result<CompactStats> {
        options.validate()?;
        let planning = Instant::now();
        let table = self.delta_table();
        let state = table.snapshot()?;
        crate::schema::features::check_supported(state)?;
        let target = options
            .target_file_size
            .unwrap_or_else(|| state.table_config().target_file_size().get());
        let partition_columns = state.metadata().partition_columns().to_vec();
        let wanted = match &options.partitions {
            None => None,
            Some(_) if partition_columns.is_empty() => {
                return Err(DeltaLiteError::schema(
                    "partitions were given but the table is not partitioned",
                ));
            }
            Some(_) if partition_columns.len() > 1 => {
                return Err(DeltaLiteError::invalid(format!(
                    "partitions lists values of the partition column, but the table has \
                     several: {partition_columns:?}"
                )));
            }
            Some(values) => {
                // Values as the log's files are compared: canonical serialization.
                let schema = state.schema();
                let mut canonical = Vec::with_capacity(values.len());
                for value in values {
                    let raw = HashMap::from([(partition_columns[0].clone(), value.clone())]);
                    canonical.push(normalize_raw(&raw, &partition_columns, schema.as_ref())?);
                }
                Some(canonical)
            }
        };
        let mut files = Vec::new();
        for file in active_files(state)? {
            if wanted.as_ref().is_none_or(|w| w.contains(&file.partition)) {
                files.push(file);
            }
        }
        // The upsert key the files are laid out for orders partitions that purge vectors.
        let key = match files.iter().find(|f| f.deletion_vector.is_some()) {
            Some(marked) => {
                match inherited_bloom_columns(table.object_store(), std::iter::once(marked)).await {
                    (columns, true) => columns.into_iter().next(),
                    _ => None,
                }
            }
            None => None,
        };
        let plan = plan(
            files,
            target,
            options.min_partition_removable_files,
            key.as_deref(),
        );
        let read_version = self.version();
        let mut stats = CompactStats {
            version: read_version,
            files_considered: plan.considered,
            files_skipped: plan.skipped,
            partitions_compacted: plan.partitions.len(),
            parallel_bins: options.max_parallel_bins,
            dry_run: options.dry_run,
            ..Default::default()
        };
        for partition in &plan.partitions {
            for bin in &partition.bins {
                stats.bins += 1;
                stats.files_removed += bin.len();
                stats.bytes_removed += bin.iter().map(|f| f.size).sum::<u64>();
                stats.largest_bin_files = stats.largest_bin_files.max(bin.len());
            }
        }
        stats.plan_time = planning.elapsed();
        if options.dry_run || stats.bins == 0 {
            return Ok(stats);
        }

        // Rounds of at most `max_bins_per_commit` bins, partitions in planning order.
        let bins: Vec<Vec<TargetFile>> = plan.partitions.into_iter().flat_map(|p| p.bins).collect();
        let per_round = options.max_bins_per_commit.unwrap_or(bins.len()).max(1);
        let mut remaining = bins.into_iter().peekable();
        while remaining.peek().is_some() {
            let round: Vec<Vec<TargetFile>> = remaining.by_ref().take(per_round).collect();
            self.compact_round(round, target, options, read_version, &mut stats)
                .await?;
        }
        Ok(stats)
    }

    /// Rewrite `bins` (concurrently, `max_parallel_bins`) and commit them in one
    /// `OPTIMIZE` commit.
    async fn compact_round(
        &mut self,
        bins: Vec<Vec<TargetFile>>,
        target: u64,
        options: &CompactOptions,
        read_version: u64,
        stats: &mut CompactStats,
    ) -> Result<()> {
        let rewriting = Instant::now();
        let table = self.delta_table();
        let state = table.snapshot()?;
        let defaults = EnvDefaults::get();
        let (bloom_filter_columns, unique_key) = if options.bloom_filter_columns.is_empty() {
            inherited_bloom_columns(table.object_store(), bins.iter().flatten()).await
        } else {
            (options.bloom_filter_columns.clone(), false)
        };
        // What delta-rs's optimize writes (its file names say `.zstd.`), except on a
        // table that writes deletion vectors: there compaction is what restores read
        // speed after merge-on-read, and it writes what the table's upserts write (ZSTD
        // pages decode slower: a purge would leave the table slower to scan than before).
        let compression =
            if crate::schema::features::writes_deletion_vectors(state) {
                WRITE_COMPRESSION
            } else {
                Compression::ZSTD(ZstdLevel::try_new(4).map_err(|e| {
                    DeltaLiteError::Other(format!("ZSTD level 4 is not valid: {e}"))
                })?)
            };
        let mut rearrangement = Rearrangement::new(
            table.object_store(),
            table.table_url().clone(),
            state,
            RearrangeSettings {
                table_schema: state.snapshot().arrow_schema(),
                target_file_size: target,
                read_batch_size: options.read_batch_size,
                // The bins in flight share the row-group budget.
                max_buffered_bytes: options.max_buffered_bytes / options.max_parallel_bins,
                bloom_filter_columns,
                unique_key,
                compression,
                multipart: MultipartPolicy::for_table(
                    table.table_url(),
                    options
                        .multipart_threshold
                        .unwrap_or(defaults.multipart_threshold),
                    options
                        .multipart_part_size
                        .unwrap_or(defaults.multipart_part_size),
                ),
            },
        )?;
        let removed_sizes: Vec<u64> = bins.iter().flatten().map(|f| f.size).collect();
        let partitions = bins
            .iter()
            .filter_map(|bin| bin.first().map(|f| f.partition.clone()))
            .collect::<std::collections::HashSet<_>>()
            .len();
        let results: Vec<Result<GroupRewrite>> =
            stream::iter(bins.into_iter().map(|bin| rearrangement.rewrite_group(bin)))
                // In planning order (newest files first, as the log lists them).
                .buffered(options.max_parallel_bins)
                .collect()
                .await;
        let mut rewrites = Vec::with_capacity(results.len());
        let mut failed = None;
        for result in results {
            match result {
                Ok(rewrite) => rewrites.push(rewrite),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            for rewrite in &rewrites {
                rearrangement.discard(rewrite).await;
            }
            return Err(e);
        }
        let mut added_sizes = Vec::new();
        let mut batches = 0;
        for mut rewrite in rewrites {
            // A bin's files newest first too, as the log lists what one commit adds.
            rewrite.adds.reverse();
            stats.rows_rewritten += rewrite.rows;
            batches += rewrite.batches;
            added_sizes.extend(rewrite.adds.iter().map(|a| a.size.max(0) as u64));
            rearrangement.record(rewrite);
        }
        stats.batches_read += batches;
        stats.files_added += added_sizes.len();
        stats.bytes_added += added_sizes.iter().sum::<u64>();
        stats.rewrite_time += rewriting.elapsed();

        let committing = Instant::now();
        let operation = DeltaOperation::Optimize {
            predicate: options.partitions.as_ref().map(|values| {
                serde_json::json!([[
                    self.partition_columns().unwrap_or_default().join(","),
                    "in",
                    values
                ]])
                .to_string()
            }),
            target_size: i64::try_from(target).unwrap_or(i64::MAX),
        };
        // delta-rs's optimize commit info: what was read, not a blind append, and its
        // metrics (the caller's metadata beside them).
        let mut metadata: HashMap<String, serde_json::Value> = HashMap::from([
            ("readVersion".to_string(), read_version.into()),
            ("isBlindAppend".to_string(), false.into()),
            (
                "operationMetrics".to_string(),
                serde_json::json!({
                    "numFilesAdded": added_sizes.len(),
                    "numFilesRemoved": removed_sizes.len(),
                    "filesAdded": size_metrics(&added_sizes),
                    "filesRemoved": size_metrics(&removed_sizes),
                    "partitionsOptimized": partitions,
                    "numBatches": batches,
                    "totalConsideredFiles": stats.files_considered,
                    "totalFilesSkipped": stats.files_skipped,
                    "preserveInsertionOrder": true,
                }),
            ),
        ]);
        metadata.extend(options.commit_metadata.clone());
        let spec = CommitSpec::new(&metadata, &None);
        // Compaction reads no rows' meaning: it rebases over concurrent data commits, but
        // not over one that removed a file it compacts (`txn::commit`'s own-remove rule).
        let committed = rearrangement
            .commit(
                self,
                Vec::new(),
                operation,
                &spec,
                options.commit_max_retries,
                ReadSet::nothing(),
            )
            .await?;
        if let Some(version) = committed {
            stats.version = version;
            stats.commits += 1;
        }
        stats.commit_time += committing.elapsed();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use deltalake::kernel::{DeletionVectorDescriptor, Remove};

    use super::*;

    fn file(partition: &str, size: u64) -> TargetFile {
        TargetFile {
            path: format!("{partition}/{size}").into(),
            size,
            partition: vec![Some(partition.to_string())],
            num_records: None,
            min_values: None,
            max_values: None,
            null_counts: None,
            deletion_vector: None,
            remove: Remove::default(),
            modification_time: 0,
            stats: None,
        }
    }

    fn sizes(plan: &Plan) -> Vec<Vec<Vec<u64>>> {
        plan.partitions
            .iter()
            .map(|p| {
                p.bins
                    .iter()
                    .map(|b| b.iter().map(|f| f.size).collect())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn bins_are_runs_of_neighbours_within_the_target_as_delta_rs_plans_them() {
        // A file above the target splits the run and is skipped; a bin of one is dropped.
        // Each bin lists its files oldest first (the log's newest first, reversed): the
        // order it copies them in.
        let files = vec![
            file("a", 40),
            file("a", 50),
            file("a", 30),
            file("a", 200),
            file("a", 10),
            file("a", 20),
            file("b", 90),
            file("b", 20),
        ];
        let plan = plan(files, 100, 1, None);
        assert_eq!(sizes(&plan), vec![vec![vec![50, 40], vec![20, 10]]]);
        // 30 (a bin of one), 200 (too large), b's 90 and 20 (each alone: 110 > 100).
        assert_eq!((plan.considered, plan.skipped), (8, 4));
    }

    /// A file of `size` bytes with a deletion vector (when `marked`) and `id`s from `min`.
    fn keyed(size: u64, min: Option<i64>, marked: bool) -> TargetFile {
        use delta_kernel::expressions::StructData;
        use delta_kernel::schema::{DataType, StructField};
        let mut f = file("a", size);
        f.path = format!("a/{size}-{min:?}").into();
        f.min_values = min.map(|m| {
            Scalar::Struct(
                StructData::try_new(
                    vec![StructField::nullable("id", DataType::LONG)],
                    vec![Scalar::Long(m)],
                )
                .unwrap(),
            )
        });
        if marked {
            f.deletion_vector = Some(DeletionVectorDescriptor {
                storage_type: deltalake::kernel::StorageType::Inline,
                path_or_inline_dv: String::new(),
                offset: None,
                size_in_bytes: 0,
                cardinality: 1,
            });
        }
        f
    }

    #[test]
    fn a_partition_that_purges_vectors_bins_its_files_in_key_order() {
        // In the log: a file of new rows spanning every key (min 3), then the key ranges
        // 200.., 0.., 100.. as merge-on-read re-added them, a large file at 300.. and
        // one without bounds.
        let files = || {
            vec![
                keyed(10, Some(3), true),
                keyed(40, Some(200), true),
                keyed(40, Some(0), true),
                keyed(40, Some(100), false),
                keyed(500, Some(300), false),
                keyed(40, Some(400), true),
                keyed(40, None, true),
            ]
        };
        let mins = |plan: &Plan| -> Vec<Vec<Vec<String>>> {
            plan.partitions
                .iter()
                .map(|p| {
                    p.bins
                        .iter()
                        .map(|b| b.iter().map(|f| f.path.to_string()).collect())
                        .collect()
                })
                .collect()
        };
        let by_key = plan(files(), 100, 1, Some("id"));
        assert_eq!(
            mins(&by_key),
            vec![vec![
                vec!["a/40-Some(0)", "a/10-Some(3)", "a/40-Some(100)"],
                // The large file (skipped) ends the run before 400.
                vec!["a/40-Some(200)"],
                vec!["a/40-Some(400)", "a/40-None"],
            ]]
        );
        assert_eq!((by_key.considered, by_key.skipped), (7, 1));
        // Without a key, runs of the log's order, each copied oldest first.
        let by_log = plan(files(), 100, 1, None);
        assert_eq!(
            mins(&by_log),
            vec![vec![
                vec!["a/40-Some(0)", "a/40-Some(200)", "a/10-Some(3)"],
                vec!["a/40-None", "a/40-Some(400)"],
            ]]
        );
        // 100.. alone in its bin, without a vector: left as it is.
        assert_eq!(by_log.skipped, 2);
        // No vector in the partition: the log's order even with a key (delta-rs's plan).
        let plain: Vec<TargetFile> = files()
            .into_iter()
            .map(|mut f| {
                f.deletion_vector = None;
                f
            })
            .collect();
        assert_eq!(
            mins(&plan(plain, 100, 1, Some("id"))),
            vec![vec![
                vec!["a/40-Some(0)", "a/40-Some(200)", "a/10-Some(3)"],
                vec!["a/40-None", "a/40-Some(400)"],
            ]]
        );
    }

    #[test]
    fn a_partition_below_the_removable_threshold_is_left_alone() {
        let files = vec![
            file("big", 10),
            file("big", 10),
            file("big", 10),
            file("small", 10),
            file("small", 10),
        ];
        let both = plan(files.clone(), 100, 1, None);
        assert_eq!(
            sizes(&both),
            vec![vec![vec![10, 10, 10]], vec![vec![10, 10]]]
        );
        // small would merge 2 files into 1: one file net, below 2.
        let big = plan(files, 100, 2, None);
        assert_eq!(sizes(&big), vec![vec![vec![10, 10, 10]]]);
        assert_eq!(big.skipped, 2);
    }
}
