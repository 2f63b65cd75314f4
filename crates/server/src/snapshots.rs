//! Tables kept open between queries: a query then reads only the commits made since the
//! one before it (a listing of the log after the kept version), not the last checkpoint
//! and every commit after it. A table that takes a commit every few minutes and a
//! checkpoint every hundred commits otherwise costs each query tens of milliseconds of
//! log replay before it reads a row.
//!
//! - **Fresh**: every query still lists the log, so it sees every commit made before it,
//!   by this server or by any other writer of the same storage.
//! - **The same table**: a table dropped and created again under its name starts a new
//!   log, whose commits a listing after the kept version would apply to the old table's
//!   files. So the kept version's own commit entry is checked first (its e-tag, time and
//!   size, one `HEAD`); a table whose entry changed or is gone is opened afresh.
//! - **Bounded**: by the active files the kept tables hold together
//!   (`ServerConfig::query_table_cache_files`), least recently used out first; a table
//!   with more files than that is not kept.
//!
//! Only queries read through here. Writes open their table afresh under its writer lock,
//! and a Flight SQL transaction's storage keeps none (its log view is its own).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use datafusion::execution::cache::lru_queue::LruQueue;
use deltalite::DeltaLiteTable;
use deltalite::deltalake::logstore::commit_uri_from_version;
use object_store::ObjectStoreExt;

/// See the module documentation.
pub struct Snapshots {
    /// Most active files the kept tables may hold together.
    limit_files: usize,
    kept: Mutex<Kept>,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct Kept {
    /// By table URI.
    tables: LruQueue<String, Entry>,
    /// Active files of `tables` together.
    files: usize,
}

struct Entry {
    table: DeltaLiteTable,
    /// The kept version's commit entry as it was read.
    commit: Stamp,
    files: usize,
}

/// What identifies one write of a commit entry.
#[derive(Clone, PartialEq, Eq)]
struct Stamp {
    e_tag: Option<String>,
    last_modified: DateTime<Utc>,
    size: u64,
}

/// What `/metrics` shows of the cache.
pub struct SnapshotStats {
    pub tables: usize,
    pub files: usize,
    pub limit_files: usize,
    pub hits: u64,
    pub misses: u64,
}

impl Snapshots {
    pub fn new(limit_files: usize) -> Self {
        Self {
            limit_files,
            kept: Mutex::new(Kept {
                tables: LruQueue::new(),
                files: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The table kept under `uri`, brought up to date; `None` (and forgotten) when none is
    /// kept, its version's commit entry is no longer the one read, or the update fails (the
    /// caller then opens it afresh, which reports a failure that lasts).
    pub async fn refreshed(&self, uri: &str) -> Option<DeltaLiteTable> {
        let kept = {
            let mut kept = self.kept();
            kept.tables
                .get(&uri.to_string())
                .map(|e| (e.table.clone(), e.commit.clone()))
        };
        let Some((mut table, commit)) = kept else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let version = table.version();
        let fresh = stamp(&table).await.is_ok_and(|s| s == commit) && table.reload().await.is_ok();
        if !fresh {
            self.forget(uri);
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if table.version() != version {
            self.keep(uri, &table).await;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(table)
    }

    /// Keep `table`, just opened or brought up to date, under `uri`.
    pub async fn keep(&self, uri: &str, table: &DeltaLiteTable) {
        let files = table
            .delta_table()
            .snapshot()
            .ok()
            .and_then(|s| s.snapshot().try_log_data().ok().map(|d| d.num_files()));
        let (Some(files), Ok(commit)) = (files, stamp(table).await) else {
            self.forget(uri);
            return;
        };
        let mut kept = self.kept();
        if let Some(old) = kept.tables.remove(&uri.to_string()) {
            kept.files -= old.files;
        }
        if files > self.limit_files {
            return;
        }
        while kept.files + files > self.limit_files {
            match kept.tables.pop() {
                Some((_, old)) => kept.files -= old.files,
                None => break,
            }
        }
        kept.files += files;
        kept.tables.put(
            uri.to_string(),
            Entry {
                table: table.clone(),
                commit,
                files,
            },
        );
    }

    /// Drop what is kept under `uri`.
    pub fn forget(&self, uri: &str) {
        let mut kept = self.kept();
        if let Some(old) = kept.tables.remove(&uri.to_string()) {
            kept.files -= old.files;
        }
    }

    pub fn stats(&self) -> SnapshotStats {
        let kept = self.kept();
        SnapshotStats {
            tables: kept.tables.len(),
            files: kept.files,
            limit_files: self.limit_files,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    // Every update is a few field writes: a panic while locked leaves consistent data.
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        match self.kept.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

/// The commit entry of `table`'s loaded version, as its store describes it now.
async fn stamp(table: &DeltaLiteTable) -> object_store::Result<Stamp> {
    let store = table.delta_table().log_store().object_store(None);
    let entry = commit_uri_from_version(Some(table.version()));
    let meta = store.head(&entry).await?;
    Ok(Stamp {
        e_tag: meta.e_tag,
        last_modified: meta.last_modified,
        size: meta.size,
    })
}
