//! Replacing files: a caller-planned rewrite of some of a table's files in one commit, for
//! operations whose row logic lives outside the engine (SQL `DELETE`, `UPDATE`, the general
//! path of `MERGE`). The caller's [`ReplacePlanner`] decides, against a snapshot, which
//! files go and streams the rows that take their place; the engine writes them, commits
//! removes and adds together through the transaction path, and asks the planner again when
//! a concurrent commit removed one of those files. Files the plan does not name are not
//! touched.

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
use crate::ops::write::{rows_writer, write_stream};
use crate::options::AppTransaction;
use crate::schema::features::check_supported;
use crate::table::DeltaLiteTable;
use crate::table::files::active_files;
use crate::txn::{self, CommitSpec, Done, Policy, ReadSet, Staged};

/// The files one plan removes and the rows that take their place.
pub struct Replacement {
    /// Paths, relative to the table root, of active files to remove.
    pub remove: Vec<String>,
    /// Rows written in their place: whole-table rows, partition columns included, in any
    /// layout the table's schema can take (they are conformed).
    pub rows: BoxStream<'static, Result<RecordBatch>>,
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
    /// Files removed.
    pub files_removed: usize,
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
            let mut active: HashMap<String, _> = active_files(state)?
                .into_iter()
                .map(|f| (f.path.to_string(), f))
                .collect();
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
            let stats = ReplaceStats {
                files_removed: actions.len(),
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
