//! Replacing files: a caller-planned rewrite of some of a table's files in one commit, for
//! operations whose row logic lives outside the engine (SQL `DELETE`, `UPDATE`, the general
//! path of `MERGE`). The caller's [`ReplacePlanner`] decides, against a snapshot, which
//! files go and streams the rows that take their place; the engine writes them, commits
//! removes and adds together through the transaction path, and asks the planner again when
//! a concurrent commit removed one of those files. Files the plan does not name are not
//! touched.
//!
//! On a table that writes deletion vectors the plan may instead name rows of a file to
//! delete in place ([`MarkedRows`]): the file keeps its data and gets a vector (its old
//! one plus these rows), the way an upsert marks files (`ops/upsert/mark.rs`).
//! [`MarkingPolicy`] tells a planner which files are worth it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use deltalake::DeltaTable;
use deltalake::kernel::Action;
use deltalake::protocol::{DeltaOperation, MergePredicate};
use deltalake::table::config::TablePropertiesExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use crate::error::{DeltaLiteError, Result};
use crate::io::dv::{self, Deleted};
use crate::ops::write::{rows_writer, write_stream};
use crate::options::AppTransaction;
use crate::schema::features::{check_supported, writes_deletion_vectors};
use crate::table::DeltaLiteTable;
use crate::table::files::{active_files, active_files_with_stats};
use crate::txn::{self, CommitSpec, Done, Policy, ReadSet, Staged};

/// The files one plan removes and the rows that take their place.
pub struct Replacement {
    /// Paths, relative to the table root, of active files to remove.
    pub remove: Vec<String>,
    /// Rows written in their place: whole-table rows, partition columns included, in any
    /// layout the table's schema can take (they are conformed).
    pub rows: BoxStream<'static, Result<RecordBatch>>,
    /// Files whose rows are deleted in place with a deletion vector instead (only on a
    /// table that writes them; a file is named here or in `remove`, not both).
    pub mark: Vec<MarkedRows>,
}

/// Rows of one file to delete with a deletion vector.
#[derive(Debug, Clone)]
pub struct MarkedRows {
    /// The file, as `remove` names files.
    pub path: String,
    /// Which of the rows the file holds now: 0 is its first row that its deletion vector
    /// (if any) does not already delete, in the file's order. Any order, each once.
    pub live_rows: Vec<u64>,
}

/// Which files a planner should mark rather than rewrite: those whose deleted share stays
/// at or under `max_share` of their rows (`Knobs::deletion_vector_max_share`).
#[derive(Debug, Clone)]
pub struct MarkingPolicy {
    root: url::Url,
    max_share: f64,
    /// Table-relative path → (rows stored, rows already deleted).
    files: HashMap<String, (usize, u64)>,
}

impl MarkingPolicy {
    /// The policy for `table`'s current snapshot; `None` when it does not write deletion
    /// vectors (`delta.enableDeletionVectors` and the `deletionVectors` writer feature).
    pub fn of(table: &DeltaTable, max_share: f64) -> Result<Option<Self>> {
        let state = table.snapshot()?;
        if !crate::schema::features::writes_deletion_vectors(state) {
            return Ok(None);
        }
        let files = active_files(state)?
            .into_iter()
            .filter_map(|f| {
                let deleted = f
                    .deletion_vector
                    .as_ref()
                    .map_or(0, |dv| dv.cardinality.max(0) as u64);
                Some((f.path.to_string(), (f.num_records?, deleted)))
            })
            .collect();
        Ok(Some(Self {
            root: table.table_url().clone(),
            max_share,
            files,
        }))
    }

    /// Whether deleting `matched` more rows of `path` is better done with a vector: the
    /// log knows the file's row count and the share stays at or under the knob.
    pub fn worth_marking(&self, path: &str, matched: u64) -> bool {
        self.files
            .get(&table_relative(&self.root, path))
            .is_some_and(|&(rows, deleted)| {
                rows > 0 && (deleted + matched) as f64 <= self.max_share * rows as f64
            })
    }
}

/// The bytes of `table`'s live files named by `paths` (as a scan's file column names
/// them); `None` when one of them is not live.
pub fn bytes_of(table: &DeltaTable, paths: &[String]) -> Result<Option<u64>> {
    let sizes: HashMap<String, u64> = active_files(table.snapshot()?)?
        .into_iter()
        .map(|f| (f.path.to_string(), f.size))
        .collect();
    let root = table.table_url();
    Ok(paths
        .iter()
        .map(|p| sizes.get(&table_relative(root, p)).copied())
        .sum())
}

/// Plans a replacement against a snapshot. Asked again, against the newer snapshot, when
/// a concurrent commit removed a file the previous plan replaced.
pub trait ReplacePlanner: Send {
    /// Decide which files go and what replaces them, reading `table` as it is now.
    fn plan<'a>(&'a mut self, table: &'a DeltaTable) -> BoxFuture<'a, Result<Replacement>>;
}

/// What a replacement records in the log.
#[derive(Debug, Clone)]
pub enum ReplaceKind {
    /// SQL `DELETE`.
    Delete {
        /// The predicate, as the statement wrote it.
        predicate: Option<String>,
    },
    /// SQL `UPDATE`.
    Update {
        /// The predicate, as the statement wrote it.
        predicate: Option<String>,
    },
    /// SQL `MERGE`.
    Merge {
        /// The `ON` condition, as the statement wrote it.
        on: String,
        /// `WHEN MATCHED` clauses.
        matched: Vec<MergePredicate>,
        /// `WHEN NOT MATCHED [BY TARGET]` clauses.
        not_matched: Vec<MergePredicate>,
        /// `WHEN NOT MATCHED BY SOURCE` clauses.
        not_matched_by_source: Vec<MergePredicate>,
    },
}

/// What a replacement's plan depends on besides the files it removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplaceReads {
    /// Only the rows of the files it removes (`DELETE`, `UPDATE`, a `MERGE` that only
    /// changes matched rows): a concurrent commit that leaves those files alone is
    /// rebased over, as if the replacement had committed first.
    #[default]
    OwnFiles,
    /// The absence of rows anywhere in the table (a `MERGE` that inserts unmatched source
    /// rows, or acts on target rows no source row matched): any concurrent data change
    /// makes it plan again.
    Table,
}

/// Options of [`DeltaLiteTable::replace`].
#[derive(Debug, Clone)]
pub struct ReplaceOptions {
    /// The operation recorded in the commit info.
    pub kind: ReplaceKind,
    /// What the plan read, for the conflict rule.
    pub reads: ReplaceReads,
    /// Commit attempts after the first (rebases and re-plans together).
    pub commit_max_retries: usize,
    /// Output file size target; `None` means the table's setting.
    pub target_file_size: Option<u64>,
    /// Extra key/values recorded in the commit info.
    pub commit_metadata: HashMap<String, serde_json::Value>,
    /// Optional `txn` action recorded in the same commit.
    pub app_transaction: Option<AppTransaction>,
}

impl ReplaceOptions {
    /// Options of a `kind` with every other setting at its default.
    pub fn new(kind: ReplaceKind) -> Self {
        Self {
            kind,
            reads: ReplaceReads::default(),
            commit_max_retries: crate::options::DEFAULT_COMMIT_MAX_RETRIES,
            target_file_size: None,
            commit_metadata: HashMap::new(),
            app_transaction: None,
        }
    }
}

/// What a replacement did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaceStats {
    /// Version committed (the current one when nothing changed).
    pub version: u64,
    /// Files removed (marked files not counted).
    pub files_removed: usize,
    /// Files given a deletion vector instead of being rewritten.
    pub files_marked: usize,
    /// Files added.
    pub files_added: usize,
    /// Rows written into the new files.
    pub rows_written: u64,
    /// Times the plan was made again after a conflicting race.
    pub replans: usize,
    /// The app transaction was already recorded: nothing was done.
    pub already_applied: bool,
}

impl DeltaLiteTable {
    /// Replace the files `planner` names with the rows it streams, in one commit. A plan
    /// that names no file and streams no row commits nothing.
    pub async fn replace(
        &mut self,
        planner: &mut dyn ReplacePlanner,
        options: &ReplaceOptions,
    ) -> Result<ReplaceStats> {
        let spec = CommitSpec::new(&options.commit_metadata, &options.app_transaction);
        let policy = Policy {
            max_retries: options.commit_max_retries,
            replan: true,
            hook: None,
        };
        let mut attempt = ReplaceAttempt { planner, options };
        let stats = match txn::run(self.delta_table_mut(), &spec, &policy, &mut attempt).await? {
            Done::Committed {
                version,
                output: mut stats,
                replans,
                ..
            } => {
                stats.version = version;
                stats.replans = replans;
                stats
            }
            Done::Unchanged {
                version,
                output: mut stats,
            } => {
                stats.version = version;
                stats
            }
            Done::AlreadyApplied { version } => ReplaceStats {
                version,
                already_applied: true,
                ..Default::default()
            },
        };
        Ok(stats)
    }
}

struct ReplaceAttempt<'p> {
    planner: &'p mut dyn ReplacePlanner,
    options: &'p ReplaceOptions,
}

impl txn::Attempt for ReplaceAttempt<'_> {
    type Output = ReplaceStats;

    fn stage<'a>(
        &'a mut self,
        table: &'a DeltaTable,
    ) -> BoxFuture<'a, Result<(Staged, ReplaceStats)>> {
        Box::pin(async move {
            let state = table.snapshot()?;
            check_supported(state)?;
            let plan = self.planner.plan(table).await?;
            // Marking copies a file's log statistics into its new Add.
            let files = if plan.mark.is_empty() {
                active_files(state)?
            } else {
                active_files_with_stats(state)?
            };
            let mut active: HashMap<String, _> =
                files.into_iter().map(|f| (f.path.to_string(), f)).collect();
            let mut actions = Vec::with_capacity(plan.remove.len());
            let root = table.table_url();
            for path in &plan.remove {
                let file = active.remove(&table_relative(root, path)).ok_or_else(|| {
                    DeltaLiteError::Other(format!(
                        "a replacement names {path}, which is not an active file of version {}",
                        state.version()
                    ))
                })?;
                actions.push(Action::Remove(file.remove));
            }
            let marked = plan.mark.len();
            if marked > 0 && !writes_deletion_vectors(state) {
                return Err(DeltaLiteError::UnsupportedTable(
                    "a replacement marks rows with deletion vectors, which this table does not write"
                        .into(),
                ));
            }
            let store = table.object_store();
            let mut vectors = Vec::with_capacity(marked);
            for m in plan.mark {
                let file = active.remove(&table_relative(root, &m.path)).ok_or_else(|| {
                    DeltaLiteError::Other(format!(
                        "a replacement marks {} (named twice, or not an active file of version {})",
                        m.path,
                        state.version()
                    ))
                })?;
                let deleted = mark_rows(&store, root, &file, m.live_rows).await?;
                actions.push(Action::Remove(file.remove.clone()));
                vectors.extend(deleted.map(|deleted| (file, deleted)));
            }
            let config = state.table_config();
            let table_schema = state.snapshot().arrow_schema();
            let writer = rows_writer(
                table.object_store(),
                Arc::clone(&table_schema),
                state.metadata().partition_columns().to_vec(),
                self.options
                    .target_file_size
                    .unwrap_or_else(|| config.target_file_size().get()),
                config.num_indexed_cols(),
                config
                    .data_skipping_stats_columns
                    .as_ref()
                    .map(|cols| cols.iter().map(|c| c.to_string()).collect()),
            );
            let (adds, rows) = write_stream(writer, &table_schema, plan.rows).await?;
            // Last, so that a failed row write leaves no vector behind: one vector file
            // for every marked file.
            match dv::write_for(&store, vectors.iter().map(|(f, d)| (f, d))).await {
                Ok(marked) => actions.extend(marked.into_iter().map(Action::Add)),
                Err(e) => {
                    txn::delete_adds(&store, adds.iter()).await;
                    return Err(e);
                }
            }
            let stats = ReplaceStats {
                files_removed: plan.remove.len(),
                files_marked: marked,
                files_added: adds.len(),
                rows_written: rows,
                ..Default::default()
            };
            actions.extend(adds.into_iter().map(Action::Add));
            let operation = match &self.options.kind {
                ReplaceKind::Delete { predicate } => DeltaOperation::Delete {
                    predicate: predicate.clone(),
                },
                ReplaceKind::Update { predicate } => DeltaOperation::Update {
                    predicate: predicate.clone(),
                },
                ReplaceKind::Merge {
                    on,
                    matched,
                    not_matched,
                    not_matched_by_source,
                } => DeltaOperation::Merge {
                    predicate: None,
                    merge_predicate: Some(on.clone()),
                    matched_predicates: matched.clone(),
                    not_matched_predicates: not_matched.clone(),
                    not_matched_by_source_predicates: not_matched_by_source.clone(),
                },
            };
            // With `OwnFiles`, what the plan read needs no guard beyond its own files:
            // under write-serializable isolation the replacement may be ordered before
            // any concurrent commit that leaves those files alone (`txn::commit`'s
            // own-remove rule catches the ones that do not).
            let read_set = match self.options.reads {
                ReplaceReads::OwnFiles => ReadSet::nothing(),
                ReplaceReads::Table => ReadSet::everything(),
            };
            let staged = Staged::new(actions, operation, read_set);
            Ok((staged, stats))
        })
    }
}

/// The deletion vector of `file` with its rows at the `live` ordinals (see [`MarkedRows`])
/// added; `None` when no row is left (the file leaves the table).
async fn mark_rows(
    store: &Arc<dyn object_store::ObjectStore>,
    root: &url::Url,
    file: &crate::table::files::TargetFile,
    mut live: Vec<u64>,
) -> Result<Option<Deleted>> {
    let before = Deleted::of(store, root, file).await?.unwrap_or_default();
    live.sort_unstable();
    live.dedup();
    // Walk the physical positions, counting the ones still live.
    let mut positions = Vec::with_capacity(live.len());
    let (mut ordinal, mut position) = (0u64, 0u64);
    let rows = file.num_records.ok_or_else(|| {
        DeltaLiteError::Other(format!(
            "{}: cannot mark rows of a file whose row count the log does not record",
            file.path
        ))
    })? as u64;
    for want in live {
        while position < rows && (before.contains(position) || ordinal < want) {
            if !before.contains(position) {
                ordinal += 1;
            }
            position += 1;
        }
        if position >= rows {
            return Err(DeltaLiteError::Other(format!(
                "{}: a replacement marks row {want}, past the file's live rows",
                file.path
            )));
        }
        positions.push(position);
        ordinal += 1;
        position += 1;
    }
    let deleted = before.with(positions);
    Ok((deleted.len() < rows).then_some(deleted))
}

/// A planned path as the snapshot names its files: relative to the table root, in
/// object-store path form. Planners may give full URLs (a DataFusion scan's file column
/// does) or relative paths.
fn table_relative(root: &url::Url, path: &str) -> String {
    let root = root.as_str().trim_end_matches('/');
    let relative = match url::Url::parse(path) {
        Ok(url) => match url.as_str().strip_prefix(root) {
            Some(rest) => rest.trim_start_matches('/').to_string(),
            None => return path.to_string(),
        },
        Err(_) => return path.to_string(),
    };
    match object_store::path::Path::from_url_path(&relative) {
        Ok(p) => p.to_string(),
        Err(_) => relative,
    }
}

#[cfg(test)]
mod tests {
    use super::table_relative;

    #[test]
    fn planned_paths_become_table_relative() {
        let root = url::Url::parse("file:///data/lake/c/s/t/").expect("url");
        assert_eq!(
            table_relative(&root, "file:///data/lake/c/s/t/part-1.parquet"),
            "part-1.parquet"
        );
        assert_eq!(
            table_relative(
                &root,
                "file:///data/lake/c/s/t/day=2024-01-01/p%20q.parquet"
            ),
            "day=2024-01-01/p q.parquet"
        );
        assert_eq!(table_relative(&root, "part-2.parquet"), "part-2.parquet");
        // Outside the table: left as it is, so the lookup fails loudly.
        assert_eq!(
            table_relative(&root, "file:///data/lake/c/s/other/x.parquet"),
            "file:///data/lake/c/s/other/x.parquet"
        );
    }
}
