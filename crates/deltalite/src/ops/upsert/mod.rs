//! The upsert: plan against a snapshot, write, commit once; re-plan on a conflicting race.
//!
//! Data flow of one attempt (see ARCHITECTURE.md):
//! source → `relax::columns_to_relax` (non-nullable columns that must hold a NULL)
//!        → `source::prepare` (conform, split by partition, dedup, key index)
//!        → per partition: `target::stats_may_match` → the probe cache → `probe::probe_file`
//!        → `rewrite::rewrite_group` for the files the source changes (in groups up to the
//!          target size), or `mark::mark` (a deletion vector) where the table writes them
//!          and few of a file's rows change; inserts and marked files' replacements after
//!        → `commit::commit` (one Delta commit for every partition).

mod keys;
mod mark;
mod outcome;
mod probe;
mod relax;
mod rewrite;
mod source;
mod target;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::SchemaRef;
use delta_kernel::table_properties::DataSkippingNumIndexedCols;
use deltalake::DeltaTable;
use deltalake::kernel::{Action, Add, Remove};
use deltalake::protocol::{DeltaOperation, MergePredicate};
use deltalake::table::config::TablePropertiesExt;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{DeltaLiteError, Result};
use crate::io::dv::{self, Deleted};
use crate::io::upload::MultipartPolicy;
use crate::io::writer::abort;
use crate::io::writer::{WriterFactory, WriterSettings};
use crate::ops::upsert::outcome::{Decider, Outcome, Outcomes};
use crate::ops::upsert::probe::{
    ProbeResult, cached_matches, cached_result, probe_file, read_keys,
};
use crate::ops::upsert::rewrite::{Candidate, RewriteContext, Rewritten, rewrite_group};
use crate::ops::upsert::source::{Layout, SourcePartition, check_source_size, prepare};
use crate::ops::upsert::target::stats_may_match;
use crate::options::{Knobs, OmittedColumns, PruneStrategy, UpsertOptions};
use crate::runtime::budget::CallBudget;
use crate::runtime::probe_cache::{CacheKey, FileKeys, ProbeCache};
use crate::schema::features::{check_supported, writes_deletion_vectors};
use crate::stats::{PhaseTimings, UpsertStats};
use crate::table::DeltaLiteTable;
use crate::table::files::{TargetFile, active_files, active_files_with_stats};
use crate::txn::{self, CommitSpec, Done, Policy, ReadSet, Staged, delete_adds};

use crate::options::MIB;

impl DeltaLiteTable {
    /// Insert-or-replace `batches` by key; see the upsert contract.
    pub async fn upsert(
        &mut self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
        options: &UpsertOptions,
    ) -> Result<UpsertStats> {
        let mut stats = upsert(self.delta_table_mut(), schema, batches, options).await?;
        stats.timings.initial_open = self.take_initial_open();
        Ok(stats)
    }
}

/// Run an upsert of `batches` (all of `schema`) into `table`.
async fn upsert(
    table: &mut DeltaTable,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    options: &UpsertOptions,
) -> Result<UpsertStats> {
    let started = Instant::now();
    let result = run(table, schema, batches, options, started).await;
    crate::metrics::record(&result, options.knobs.prune_strategy, started.elapsed());
    result
}

async fn run(
    table: &mut DeltaTable,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    options: &UpsertOptions,
    started: Instant,
) -> Result<UpsertStats> {
    options.knobs.validate()?;
    check_source_size(batches, options.knobs.max_source_bytes)?;
    let spec = CommitSpec::new(&options.commit_metadata, &options.app_transaction);
    let policy = Policy {
        max_retries: options.knobs.commit_max_retries,
        replan: true,
        hook: options.pre_commit_hook.clone(),
    };
    let mut attempt = UpsertAttempt {
        schema,
        batches,
        options,
        fill: None,
    };
    let done = txn::run(table, &spec, &policy, &mut attempt).await?;
    // After the commit, so that its reads do not compete with this call's.
    if let Some(fill) = attempt.fill.take() {
        fill.spawn();
    }
    let mut stats = match done {
        Done::Committed {
            version,
            output: mut stats,
            retries,
            replans,
            commit_time,
            reload_time,
            maintenance_time,
        } => {
            stats.version = version;
            stats.commit_retries = retries;
            stats.replans = replans;
            stats.timings.commit = commit_time;
            stats.timings.reload = reload_time;
            stats.timings.maintenance = maintenance_time;
            stats
        }
        // Every source row lost to the cursor rule or changed nothing: no commit.
        Done::Unchanged {
            version,
            output: mut stats,
        } => {
            stats.version = version;
            stats
        }
        Done::AlreadyApplied { version } => UpsertStats {
            version,
            source_rows: batches.iter().map(|b| b.num_rows()).sum(),
            already_applied: true,
            ..Default::default()
        },
    };
    stats.timings.total = started.elapsed();
    Ok(stats)
}

/// One upsert attempt against a snapshot, for the transaction loop.
struct UpsertAttempt<'a> {
    schema: &'a SchemaRef,
    batches: &'a [RecordBatch],
    options: &'a UpsertOptions,
    /// The last attempt's background fill of the probe cache.
    fill: Option<BackgroundFill>,
}

impl txn::Attempt for UpsertAttempt<'_> {
    type Output = UpsertStats;

    fn stage<'a>(
        &'a mut self,
        table: &'a DeltaTable,
    ) -> BoxFuture<'a, Result<(Staged, UpsertStats)>> {
        Box::pin(async move {
            let mut written =
                plan_and_write(table, self.schema, self.batches, self.options).await?;
            self.fill = written.fill.take();
            let mut staged = Staged::new(
                written.actions,
                merge_operation(written.predicate, self.options),
                written.read_set,
            );
            // An empty batch still commits, with no actions: the commit records the call
            // (its metadata), so a pipeline that checks for its batch's commit before
            // redelivering finds it, as with PostHog's deltalite.
            staged.commit_when_empty = written.stats.source_rows == 0;
            Ok((staged, written.stats))
        })
    }
}

fn merge_operation(predicate: Option<String>, options: &UpsertOptions) -> DeltaOperation {
    let on = options
        .primary_keys
        .iter()
        .map(|k| format!("target.`{k}` = source.`{k}`"))
        .collect::<Vec<_>>()
        .join(" AND ");
    let matched = if options.cursor_fields.is_empty() {
        None
    } else {
        Some(format!(
            "source.({}) > target.({})",
            options.cursor_fields.join(", "),
            options.cursor_fields.join(", ")
        ))
    };
    DeltaOperation::Merge {
        predicate,
        merge_predicate: Some(on),
        matched_predicates: vec![MergePredicate {
            action_type: "update".to_string(),
            predicate: matched,
        }],
        not_matched_predicates: vec![MergePredicate {
            action_type: "insert".to_string(),
            predicate: None,
        }],
        not_matched_by_source_predicates: vec![],
    }
}

struct Written {
    actions: Vec<Action>,
    stats: UpsertStats,
    read_set: ReadSet,
    predicate: Option<String>,
    fill: Option<BackgroundFill>,
}

/// Files an upsert probed without learning all their keys (the page index let it read a
/// few pages of each), to read in full for the probe cache after the call: the next
/// upsert into the table then decides them unread (`runtime/probe_cache.rs`).
struct BackgroundFill {
    shared: Arc<Shared>,
    files: Vec<(CacheKey, TargetFile)>,
}

impl BackgroundFill {
    /// Read the files' keys on a task of their own, one file at a time, if no other fill
    /// runs; stop at the first entry the cache has no room for (a fill never evicts).
    /// Best effort: a failed read only leaves its file uncached.
    fn spawn(self) {
        let cache = ProbeCache::global();
        let Some(guard) = cache.begin_fill() else {
            return;
        };
        tokio::spawn(async move {
            let _guard = guard;
            let shared = self.shared;
            for (key, file) in self.files {
                if cache.contains(&key) {
                    continue;
                }
                let read = read_keys(
                    Arc::clone(&shared.store),
                    &file,
                    &shared.layout,
                    &shared.decider,
                    shared.knobs.read_batch_size,
                )
                .await;
                match read {
                    Ok(Some(keys)) => {
                        if !cache.insert_filled(key, keys) {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::debug!(path = %file.path, %error, "probe cache fill skipped a file")
                    }
                }
            }
        });
    }
}

/// State shared by every task of one attempt.
struct Shared {
    store: Arc<dyn ObjectStore>,
    layout: Layout,
    decider: Decider,
    carried: Vec<bool>,
    omitted: OmittedColumns,
    knobs: Knobs,
    writers: WriterFactory,
    budget: CallBudget,
    /// Compressed page bytes a rewrite fetches at a time.
    read_window_bytes: usize,
    /// Output file size target: also the stored bytes one rewrite group reads.
    target_file_size: u64,
    /// The process's probe cache, when it is on (its bound is not zero).
    cache: Option<&'static ProbeCache>,
    /// The table's URL (the prefix of every cache key's location).
    table_url: String,
    table_root: url::Url,
    /// Files whose few rows change get a deletion vector instead of a rewrite.
    marks: bool,
    /// The key columns and their types, as cache keys name them.
    key_spec: String,
}

impl Shared {
    /// The probe cache's key of `file`.
    fn cache_key(&self, file: &TargetFile) -> CacheKey {
        CacheKey {
            location: format!("{}{}", self.table_url, file.path),
            size: file.size,
            keys: self.key_spec.clone(),
        }
    }

    /// Fill the probe cache with the keys of a file this call wrote from the source's own
    /// rows (its inserts, and with `isolate_source_rows` its replacements): their keys are
    /// at hand, so a later probe of the file costs nothing. Only when `batch` went into
    /// exactly one file (then the batch's keys are all of the file's).
    fn remember_keys(&self, adds: &[Add], batch: &RecordBatch) -> Result<()> {
        let (Some(cache), [add]) = (self.cache, adds) else {
            return Ok(());
        };
        let rows = batch.num_rows();
        if !self.knobs.use_probe_cache || !cache.admits(rows as u64) {
            return Ok(());
        }
        let stored = self.decider.encode_keys(batch.columns(), rows)?;
        // The writer wrote the batch's rows in order into the one file: row i is at i.
        let positions = arrow::array::Int64Array::from_iter_values(0..rows as i64);
        let mut ints = Vec::new();
        let mut hashes = Vec::new();
        let keys = if stored.extend_ints(&positions, &mut ints).is_some() {
            Some(FileKeys::ints(ints))
        } else {
            stored
                .extend_hashes(&mut hashes)
                .map(|()| FileKeys::new(hashes))
        };
        if let Some(keys) = keys {
            // The log's path as delta-rs turns it into a store path when the file is read
            // back from the snapshot (`LogicalFileView::object_store_path`): the same
            // percent-encoding, so the keys of later probes find this entry.
            let path = object_store::path::Path::parse(&add.path)
                .unwrap_or_else(|_| object_store::path::Path::from(add.path.as_str()));
            cache.insert(
                CacheKey {
                    location: format!("{}{}", self.table_url, path),
                    size: add.size.max(0) as u64,
                    keys: self.key_spec.clone(),
                },
                keys,
            );
        }
        Ok(())
    }
}

#[derive(Default)]
struct PartitionResult {
    adds: Vec<Add>,
    removes: Vec<Remove>,
    probed: usize,
    pages_skipped: usize,
    carried_over: usize,
    updated: usize,
    replaced: usize,
    deleted: usize,
    delete_markers: usize,
    inserted: usize,
    copied: usize,
    lost: usize,
    probe_cached: usize,
    marked: usize,
    prune_time: Duration,
    /// Files probed without learning all their keys, for a background fill.
    to_fill: Vec<(CacheKey, TargetFile)>,
}

async fn plan_and_write(
    table: &DeltaTable,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    options: &UpsertOptions,
) -> Result<Written> {
    let state = table.snapshot()?;
    check_supported(state)?;
    let write_dvs = writes_deletion_vectors(state);
    // A file given a deletion vector is added again with its statistics.
    let files = if write_dvs {
        active_files_with_stats(state)?
    } else {
        active_files(state)?
    };
    let relax_started = Instant::now();
    let to_relax = relax::columns_to_relax(state, schema, batches, &files, options.nullability);
    let relaxed = if to_relax.is_empty() {
        None
    } else {
        Some(relax::relax(state, &to_relax)?)
    };
    let relax_time = relax_started.elapsed();
    let prepare_started = Instant::now();
    let layout = Layout::resolve(
        relaxed.as_ref().map_or_else(
            || state.snapshot().arrow_schema(),
            |r| Arc::clone(&r.schema),
        ),
        state.metadata().partition_columns().to_vec(),
        options,
    )?;
    let source = prepare(schema, batches, &layout, options)?;
    let prepare_time = prepare_started.elapsed();

    let knobs = options.knobs.clone();
    let target_file_size = knobs
        .target_file_size
        .unwrap_or_else(|| state.table_config().target_file_size().get());
    let (writers, read_window_bytes) = writer_factory(
        table,
        &layout,
        &knobs,
        target_file_size,
        state.table_config().num_indexed_cols(),
        state
            .table_config()
            .data_skipping_stats_columns
            .as_ref()
            .map(|cols| cols.iter().map(|c| c.to_string()).collect()),
    );
    let decider = Decider::new(
        layout.key_encoder()?,
        layout
            .has_cursor
            .then(|| layout.cursor_encoder())
            .transpose()?,
        source.match_changes_row,
    );

    // Files of the touched partitions.
    let mut by_partition: HashMap<Vec<Option<String>>, Vec<TargetFile>> = HashMap::new();
    let touched: HashSet<Vec<Option<String>>> = source
        .partitions
        .iter()
        .map(|p| p.key.serialized.clone())
        .collect();
    for file in files {
        if touched.contains(&file.partition) {
            by_partition
                .entry(file.partition.clone())
                .or_default()
                .push(file);
        }
    }

    let key_spec = layout
        .key_columns
        .iter()
        .map(|&k| {
            let field = layout.data_schema.field(k);
            format!("{}:{}", field.name(), field.data_type())
        })
        .collect::<Vec<_>>()
        .join(",");
    let shared = Arc::new(Shared {
        store: table.object_store(),
        decider,
        carried: source.carried.clone(),
        omitted: options.omitted_columns,
        budget: CallBudget::new(
            knobs.max_parallel_partitions,
            knobs.max_parallel_files,
            knobs.max_buffered_bytes,
        ),
        knobs,
        writers,
        layout,
        read_window_bytes,
        target_file_size,
        cache: Some(ProbeCache::global()).filter(|c| c.stats().max_bytes > 0),
        table_url: table.table_url().to_string(),
        table_root: table.table_url().clone(),
        // A replacing row that keeps a stored value of an omitted column needs the stored
        // row: that takes a rewrite.
        marks: write_dvs
            && (options.omitted_columns != OmittedColumns::Keep
                || source.carried.iter().all(|&c| c)),
        key_spec,
    });
    let write_started = Instant::now();
    let jobs: Vec<_> = source
        .partitions
        .into_iter()
        .map(|part| {
            let files = by_partition
                .remove(&part.key.serialized)
                .unwrap_or_default();
            (Arc::new(part), files)
        })
        .collect();
    let partitions_touched = jobs.len();
    let predicate = if shared.layout.partition_columns.is_empty() {
        None
    } else {
        Some(
            jobs.iter()
                .map(|(p, _)| format!("({})", p.key.predicate()))
                .collect::<Vec<_>>()
                .join(" OR "),
        )
    };
    let results: Vec<Result<PartitionResult>> =
        stream::iter(jobs.into_iter().map(|(part, files)| {
            let shared = Arc::clone(&shared);
            async move {
                let task = tokio::spawn(async move {
                    let _slot = shared.budget.partition().await;
                    process_partition(shared, part, files).await
                });
                task.await
                    .map_err(|e| DeltaLiteError::Other(format!("partition task failed: {e}")))?
            }
        }))
        .buffer_unordered(shared.knobs.max_parallel_partitions)
        .collect::<Vec<_>>()
        .await;
    let results = all_or_cleanup(&shared.store, results, |r| &r.adds).await?;
    let write_time = write_started.elapsed();

    let mut actions = Vec::new();
    let columns_relaxed = relaxed.as_ref().map_or(0, |r| r.columns);
    if let Some(relaxed) = relaxed {
        actions.push(relaxed.action);
    }
    let mut stats = UpsertStats {
        columns_relaxed,
        partitions_touched,
        source_rows: source.source_rows,
        null_pk_rows: source.null_pk_rows,
        duplicates_resolved: source.duplicates_resolved,
        ..Default::default()
    };
    let mut prune_time = Duration::ZERO;
    let mut to_fill = Vec::new();
    for r in results {
        to_fill.extend(r.to_fill);
        stats.files_added += r.adds.len();
        stats.files_removed += r.removes.len();
        stats.files_carried_over += r.carried_over;
        stats.files_probed += r.probed;
        stats.files_probe_cached += r.probe_cached;
        stats.files_marked += r.marked;
        stats.pages_skipped += r.pages_skipped;
        stats.rows_updated += r.updated;
        stats.rows_replaced += r.replaced;
        stats.rows_deleted += r.deleted;
        stats.delete_markers += r.delete_markers;
        stats.rows_inserted += r.inserted;
        stats.rows_copied += r.copied;
        stats.rows_dropped_by_cursor += r.lost;
        prune_time = prune_time.max(r.prune_time);
        actions.extend(r.removes.into_iter().map(Action::Remove));
        actions.extend(r.adds.into_iter().map(Action::Add));
    }
    stats.timings = PhaseTimings {
        relax: relax_time,
        prepare: prepare_time,
        prune: prune_time,
        write: write_time.saturating_sub(prune_time),
        ..Default::default()
    };
    let read_set = ReadSet::partitions(!shared.layout.partition_columns.is_empty(), touched);
    Ok(Written {
        actions,
        stats,
        read_set,
        predicate,
        fill: (!to_fill.is_empty()).then(|| BackgroundFill {
            shared,
            files: to_fill,
        }),
    })
}

/// The writers of one call, and the bytes a rewrite reads at a time.
///
/// Row groups and read windows are sized from an equal share of the buffer budget per
/// possible file task. A rewrite then reserves what it really holds (its read window, its
/// row group twice: `WriterFactory::writer_bytes_for`), so with default knobs two rewrites
/// of large files run at once, and up to `max_parallel_files` of small ones. The window
/// takes three quarters of a share, not half: every window of a large row group fetches
/// and decodes the group's dictionary pages again (the reader needs them before any data
/// page), so fewer windows cost less CPU (measured: 8 instead of 5.3 MiB windows on the
/// 16M benchmark, ~8% less CPU, same two rewrites at once).
fn writer_factory(
    table: &DeltaTable,
    layout: &Layout,
    knobs: &Knobs,
    target_file_size: u64,
    num_indexed_cols: DataSkippingNumIndexedCols,
    stats_columns: Option<Vec<String>>,
) -> (WriterFactory, usize) {
    let task_share =
        knobs.max_buffered_bytes / (knobs.max_parallel_files + knobs.max_parallel_partitions);
    let row_group_bytes = knobs
        .max_row_group_bytes
        .unwrap_or_else(|| task_share.clamp(MIB, 64 * MIB));
    let read_window_bytes = (task_share / 4 * 3).clamp(64 * 1024, 16 * MIB);
    let bloom_columns = layout
        .key_columns
        .iter()
        .map(|&k| layout.data_schema.field(k).name().clone())
        .collect();
    let writers = WriterFactory::new(
        table.object_store(),
        WriterSettings {
            data_schema: Arc::clone(&layout.data_schema),
            bloom_columns,
            unique_key: true,
            target_file_size,
            row_group_bytes,
            compression: crate::io::writer::WRITE_COMPRESSION,
            write_batch_size: knobs.read_batch_size,
            // Two parts in flight per writer keep uploads overlapped with encoding while
            // bounding part buffers to 2 x part size per open file.
            upload_concurrency: 2,
            num_indexed_cols,
            stats_columns,
            multipart: MultipartPolicy::for_table(
                table.table_url(),
                knobs.multipart_threshold,
                knobs.multipart_part_size,
            ),
        },
    );
    (writers, read_window_bytes)
}

/// An upsert into a table that does not exist yet (`table` is built, not loaded): every
/// winning source row is an insert. Writes the files of the table's first commit and
/// returns their Add actions; the caller commits them as version 0.
pub(crate) async fn write_initial(
    table: &DeltaTable,
    table_schema: SchemaRef,
    partition_columns: Vec<String>,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    options: &UpsertOptions,
) -> Result<(Vec<Add>, UpsertStats)> {
    options.knobs.validate()?;
    check_source_size(batches, options.knobs.max_source_bytes)?;
    let started = Instant::now();
    let layout = Layout::resolve(table_schema, partition_columns, options)?;
    let source = prepare(schema, batches, &layout, options)?;
    let prepare_time = started.elapsed();
    let (writers, _) = writer_factory(
        table,
        &layout,
        &options.knobs,
        options
            .knobs
            .target_file_size
            .unwrap_or(crate::options::DEFAULT_TARGET_FILE_SIZE),
        DataSkippingNumIndexedCols::NumColumns(crate::options::DEFAULT_NUM_INDEXED_COLS),
        None,
    );
    let store = table.object_store();
    let mut adds: Vec<Add> = Vec::new();
    let mut inserted = 0;
    for part in &source.partitions {
        // Delete-marked rows of a new table have no key to remove: never written.
        let batch = if part.deleted.iter().any(|d| *d) {
            let keep: arrow::array::BooleanArray = part.deleted.iter().map(|d| Some(!*d)).collect();
            arrow::compute::filter_record_batch(&part.batch, &keep)?
        } else {
            part.batch.clone()
        };
        if batch.num_rows() == 0 {
            continue;
        }
        let written = async {
            let mut writer = writers.partition_writer(&part.key)?;
            if let Err(e) = writer.write(&batch).await {
                abort(writer).await;
                return Err(e);
            }
            writer.close().await
        }
        .await;
        match written {
            Ok(new) => adds.extend(new),
            Err(e) => {
                delete_adds(&store, adds.iter()).await;
                return Err(e);
            }
        }
        inserted += batch.num_rows();
    }
    let stats = UpsertStats {
        partitions_touched: source.partitions.len(),
        files_added: adds.len(),
        rows_inserted: inserted,
        source_rows: source.source_rows,
        null_pk_rows: source.null_pk_rows,
        duplicates_resolved: source.duplicates_resolved,
        timings: PhaseTimings {
            prepare: prepare_time,
            write: started.elapsed().saturating_sub(prepare_time),
            ..Default::default()
        },
        ..Default::default()
    };
    Ok((adds, stats))
}

/// Probe, rewrite and insert for one partition.
async fn process_partition(
    shared: Arc<Shared>,
    part: Arc<SourcePartition>,
    files: Vec<TargetFile>,
) -> Result<PartitionResult> {
    let mut result = PartitionResult::default();
    let outcomes = Arc::new(Outcomes::new(part.batch.num_rows()));
    let prune_started = Instant::now();
    let total_files = files.len();
    // The vectors the probe read, for the files it found changed (the mark step merges
    // into them), and the files it did not learn all keys of that may stay in the table.
    let mut vectors: HashMap<Path, Deleted> = HashMap::new();
    let mut fill_if_kept: Vec<(CacheKey, TargetFile)> = Vec::new();
    // Each file to rewrite with the rows the probe found it replaces (none decided yet
    // without a probe).
    let to_rewrite: Vec<Candidate> = match shared.knobs.prune_strategy {
        PruneStrategy::None => files.into_iter().map(|file| (file, None)).collect(),
        PruneStrategy::Stats => {
            let mut candidates = Vec::new();
            for file in files {
                if stats_may_match(&file, &part, &shared.layout)? {
                    candidates.push((file, None));
                }
            }
            candidates
        }
        PruneStrategy::Probe => {
            // With the probe cache, a file whose cached keys meet none of the source's is
            // ruled out unread, and one whose cached integer keys say where the source's
            // are is answered unread; any other file is probed as without it, and a probe
            // that read every key of a file it did not know fills the cache.
            let cache = shared.cache.filter(|_| shared.knobs.use_probe_cache);
            let mut source_hashes = None;
            let mut candidates = Vec::new();
            for file in files {
                if !stats_may_match(&file, &part, &shared.layout)? {
                    continue;
                }
                let mut plan = Plan::Probe { fill: None };
                if let Some(cache) = cache {
                    let key = shared.cache_key(&file);
                    match cache.get(&key) {
                        Some(keys) => {
                            if let Some((matched, outcome)) =
                                cached_matches(&keys, &part, &shared.decider)
                            {
                                if matched.is_empty() {
                                    result.probe_cached += 1;
                                    continue;
                                }
                                plan = Plan::Cached { matched, outcome };
                            } else if let Some(hashes) =
                                source_hashes.get_or_insert_with(|| part.index.hashes())
                                && !keys.any_of(hashes)
                            {
                                result.probe_cached += 1;
                                continue;
                            }
                        }
                        // Files of unknown size (no statistics) or too large for the
                        // cache are probed as without it.
                        None if file
                            .num_records
                            .is_some_and(|rows| cache.admits(rows as u64)) =>
                        {
                            plan = Plan::Probe { fill: Some(key) }
                        }
                        None => {}
                    }
                }
                candidates.push((file, plan));
            }
            let background = cache.is_some_and(|c| {
                shared
                    .knobs
                    .fill_probe_cache
                    .unwrap_or_else(|| c.background_fill())
            });
            let probe_concurrency = shared.knobs.probe_concurrency;
            let probed: Vec<Probed> = stream::iter(candidates.into_iter().map(|(file, plan)| {
                let shared = Arc::clone(&shared);
                let part = Arc::clone(&part);
                let outcomes = Arc::clone(&outcomes);
                async move {
                    let task = tokio::spawn(async move {
                        let deleted = Deleted::of(&shared.store, &shared.table_root, &file).await?;
                        let (mut found, cached, unfilled) = match plan {
                            Plan::Cached { matched, outcome } => (
                                cached_result(matched, outcome, deleted.as_ref()),
                                true,
                                None,
                            ),
                            Plan::Probe { fill } => {
                                let _slot =
                                    shared.budget.file((file.size as usize).min(4 * MIB)).await;
                                let mut found = probe_file(
                                    Arc::clone(&shared.store),
                                    &file,
                                    deleted.as_ref(),
                                    &part,
                                    &shared.layout,
                                    &shared.decider,
                                    shared.knobs.read_batch_size,
                                    fill.is_some(),
                                )
                                .await?;
                                let unfilled = match (shared.cache, fill, found.keys.take()) {
                                    (Some(cache), Some(key), Some(keys)) => {
                                        cache.insert(key, keys);
                                        None
                                    }
                                    (_, fill, _) => fill.filter(|_| background),
                                };
                                (found, false, unfilled)
                            }
                        };
                        // Recorded now: only the replacements wait for the rewrite.
                        for (row, outcome) in std::mem::take(&mut found.outcomes) {
                            outcomes.record(row, outcome);
                        }
                        Ok::<_, DeltaLiteError>(Probed {
                            file,
                            found,
                            deleted,
                            cached,
                            unfilled,
                        })
                    });
                    task.await
                        .map_err(|e| DeltaLiteError::Other(format!("probe task failed: {e}")))?
                }
            }))
            .buffer_unordered(probe_concurrency)
            .try_collect()
            .await?;
            result.probed = probed.iter().filter(|p| !p.cached).count();
            result.probe_cached += probed.len() - result.probed;
            result.pages_skipped = probed.iter().map(|p| p.found.pages_skipped).sum();
            let mut chosen = Vec::new();
            for p in probed {
                if p.found.rewrite {
                    // A file to change may still only get a vector; the mark step
                    // reuses the vector read here.
                    if let Some(deleted) = p.deleted {
                        vectors.insert(p.file.path.clone(), deleted);
                    }
                    if let Some(key) = p.unfilled {
                        fill_if_kept.push((key, p.file.clone()));
                    }
                    chosen.push((p.file, p.found.replaced));
                } else if let Some(key) = p.unfilled {
                    result.to_fill.push((key, p.file));
                }
            }
            chosen
        }
    };
    result.prune_time = prune_started.elapsed();
    result.carried_over = total_files - to_rewrite.len();
    let max_share = shared.knobs.deletion_vector_max_share;
    let (to_mark, to_rewrite): (Vec<Candidate>, Vec<Candidate>) =
        to_rewrite.into_iter().partition(|(file, replaced)| {
            shared.marks && mark::worth_marking(file, replaced.as_deref(), max_share)
        });
    if let Some(cache) = shared.cache.filter(|_| shared.knobs.use_probe_cache) {
        // A rewritten file leaves the table: an entry it had is dead weight. A marked
        // one stays (same path and size, a new vector), and so does its entry.
        for (file, _) in &to_rewrite {
            cache.forget(&shared.cache_key(file));
        }
    }
    let marked_paths: HashSet<&Path> = to_mark.iter().map(|(file, _)| &file.path).collect();
    result.to_fill.extend(
        fill_if_kept
            .into_iter()
            .filter(|(_, file)| marked_paths.contains(&file.path)),
    );

    let isolate = shared.knobs.isolate_source_rows;
    let groups = rewrite::groups(to_rewrite, shared.target_file_size);
    let rewritten: Vec<Result<(Rewritten, Vec<Remove>)>> =
        stream::iter(groups.into_iter().map(|group| {
            let shared = Arc::clone(&shared);
            let part = Arc::clone(&part);
            let outcomes = Arc::clone(&outcomes);
            async move {
                let task = tokio::spawn(async move {
                    let largest = group.iter().map(|(f, _)| f.size).max().unwrap_or(0);
                    let stored: u64 = group.iter().map(|(f, _)| f.size).sum();
                    let read_bytes = (largest as usize).min(shared.read_window_bytes);
                    let write_bytes = shared.writers.writer_bytes_for(rewrite_output(stored));
                    let _slot = shared.budget.file(read_bytes + write_bytes).await;
                    let ctx = RewriteContext {
                        store: &shared.store,
                        layout: &shared.layout,
                        part: &part,
                        decider: &shared.decider,
                        outcomes: &outcomes,
                        carried: &shared.carried,
                        omitted: shared.omitted,
                        read_batch_size: shared.knobs.read_batch_size,
                        read_window_bytes: shared.read_window_bytes,
                        writers: &shared.writers,
                        table_url: &shared.table_root,
                    };
                    let rewritten = rewrite_group(&ctx, &group, isolate).await?;
                    let removes = group.into_iter().map(|(file, _)| file.remove).collect();
                    Ok::<_, DeltaLiteError>((rewritten, removes))
                });
                task.await
                    .map_err(|e| DeltaLiteError::Other(format!("rewrite task failed: {e}")))?
            }
        }))
        .buffer_unordered(shared.knobs.max_parallel_files)
        .collect()
        .await;
    let rewritten = all_or_cleanup(&shared.store, rewritten, |r| &r.0.adds).await?;
    let mut replacements = Vec::new();
    for (rewritten, removes) in rewritten {
        result.adds.extend(rewritten.adds);
        result.removes.extend(removes);
        result.copied += rewritten.counts.copied;
        result.replaced += rewritten.counts.updated;
        result.deleted += rewritten.counts.deleted;
        replacements.extend(rewritten.replacements);
    }
    let marked: Vec<Result<mark::Marked>> =
        stream::iter(to_mark.into_iter().map(|(file, replaced)| {
            let shared = Arc::clone(&shared);
            let part = Arc::clone(&part);
            let known = vectors.remove(&file.path);
            async move {
                let replaced = replaced.unwrap_or_default();
                mark::mark(
                    &shared.store,
                    &shared.table_root,
                    file,
                    known,
                    replaced,
                    &part,
                )
                .await
            }
        }))
        .buffer_unordered(shared.knobs.max_parallel_files)
        .collect()
        .await;
    // Deciding a vector writes nothing; the partition's vectors then go into one file.
    let written = async {
        let marked = marked.into_iter().collect::<Result<Vec<_>>>()?;
        let vectors = marked
            .iter()
            .filter_map(|m| Some((&m.file, m.vector.as_ref()?)));
        let adds = dv::write_for(&shared.store, vectors).await?;
        Ok::<_, DeltaLiteError>((marked, adds))
    };
    let (marked, adds) = match written.await {
        Ok(written) => written,
        Err(e) => {
            delete_adds(&shared.store, result.adds.iter()).await;
            return Err(e);
        }
    };
    result.adds.extend(adds);
    for marked in marked {
        result.marked += 1;
        result.removes.push(marked.file.remove);
        result.replaced += marked.written.len();
        result.deleted += marked.deleted;
        if !marked.written.is_empty() {
            replacements.push(take_record_batch(
                &part.batch,
                &UInt32Array::from(marked.written),
            )?);
        }
    }

    // Everything not matched is inserted; NULL keys always are.
    let mut inserts = Vec::new();
    // A delete-marked row is never written: it removed its key or found none.
    for row in 0..part.batch.num_rows() {
        match (outcomes.get(row), part.is_deleted(row)) {
            (Outcome::Pending, false) => inserts.push(row as u32),
            (Outcome::Lost, _) => result.lost += 1,
            (Outcome::Updated | Outcome::Unchanged, false) => result.updated += 1,
            (Outcome::Pending | Outcome::Updated | Outcome::Unchanged, true) => {
                result.delete_markers += 1
            }
        }
    }
    result.inserted = inserts.len();
    // The source rows written apart from the copied ones: the inserts, and with
    // `isolate_source_rows` the replacing rows too, in one writer.
    if !inserts.is_empty() {
        let batch = if inserts.len() == part.batch.num_rows() {
            part.batch.clone()
        } else {
            take_record_batch(&part.batch, &UInt32Array::from(inserts))?
        };
        replacements.push(batch);
    }
    if let Some(first) = replacements.first() {
        let _slot = shared.budget.file(shared.writers.writer_bytes()).await;
        let written = async {
            let batch = concat_batches(&first.schema(), &replacements)?;
            let mut writer = shared.writers.partition_writer(&part.key)?;
            if let Err(e) = writer.write(&batch).await {
                abort(writer).await;
                return Err(e);
            }
            let adds = writer.close().await?;
            shared.remember_keys(&adds, &batch)?;
            Ok::<_, DeltaLiteError>(adds)
        }
        .await;
        match written {
            Ok(adds) => result.adds.extend(adds),
            Err(e) => {
                delete_adds(&shared.store, result.adds.iter()).await;
                return Err(e);
            }
        }
    }
    Ok(result)
}

/// How one candidate file is decided.
enum Plan {
    /// Read by the probe; with `fill`, also collect its keys for the cache if the probe
    /// reads all of them.
    Probe { fill: Option<CacheKey> },
    /// Answered by the cache: the stored rows matching source keys (before the file's
    /// vector) and what each match yields.
    Cached {
        matched: Vec<(u32, u32)>,
        outcome: Outcome,
    },
}

/// One decided candidate file.
struct Probed {
    file: TargetFile,
    found: ProbeResult,
    /// The file's deletion vector, as read for the decision.
    deleted: Option<Deleted>,
    /// Answered by the cache, unread.
    cached: bool,
    /// The cache key of a file probed without learning all its keys, when background
    /// fills are on.
    unfilled: Option<CacheKey>,
}

/// About how many bytes the rewrite of a stored file of `stored_bytes` writes: the file
/// again (same encodings and compression, see `WriterFactory::partition_writer_like`),
/// with room for replacing rows larger than the ones they replace and a bloom filter.
fn rewrite_output(stored_bytes: u64) -> u64 {
    stored_bytes
        .saturating_add(stored_bytes / 2)
        .saturating_add(MIB as u64)
}

/// All results, or — if any failed — the first error after deleting the files the
/// successful ones wrote (nothing of a failed call may stay behind).
async fn all_or_cleanup<T>(
    store: &Arc<dyn ObjectStore>,
    results: Vec<Result<T>>,
    adds_of: impl Fn(&T) -> &Vec<Add>,
) -> Result<Vec<T>> {
    let mut ok = Vec::with_capacity(results.len());
    let mut first_error = None;
    for r in results {
        match r {
            Ok(v) => ok.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(ok),
        Some(e) => {
            delete_adds(store, ok.iter().flat_map(|v| adds_of(v).iter())).await;
            Err(e)
        }
    }
}
