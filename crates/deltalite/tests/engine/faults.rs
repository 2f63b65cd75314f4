//! Object-store faults: a wrapping store (the testkit's `TestStore`, over a real `LocalFileSystem`)
//! fails, delays or loses the response of chosen PUT / multipart / GET calls while the
//! engine runs, through `DeltaLiteTable::open_with_store`. Every call must end in a typed
//! error or in success, the table must hold either all of a call or none of it, and a
//! retry after a lost response must not write twice.
//!
//! The table's own state is always checked independently of the faulty handle: version
//! and files through a fresh `DeltaLiteTable::open`, rows through `common::rows` (plain
//! Parquet reads of the files the log references), and every referenced file must exist.
//!
//! The wrapper sits above object_store's own retries (none for a local file system), so
//! "lost and retried" below simulates what a retrying S3 client does when the server
//! writes an object and then answers 5xx: the retry of the conditional PUT finds the
//! commit "already existing".

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;
use deltalite::{AppTransaction, DeltaLiteTable, ErrorKind, UpsertOptions};
use deltalite_testkit::store::{Fault, Op, Target, TestStore};

// ---------------------------------------------------------------------------------------
// Table helpers.

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ])
}

fn rows_batch(rows: &[(i64, &str, &str)]) -> RecordBatch {
    batch(vec![
        (
            "id",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "day",
            strings(&rows.iter().map(|r| Some(r.1)).collect::<Vec<_>>()),
        ),
        (
            "val",
            strings(&rows.iter().map(|r| Some(r.2)).collect::<Vec<_>>()),
        ),
    ])
}

fn expect(rows: &[(i64, &str, &str)]) -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = rows
        .iter()
        .map(|(a, b, c)| vec![a.to_string(), b.to_string(), c.to_string()])
        .collect();
    v.sort();
    v
}

const SEED: [(i64, &str, &str); 3] = [(1, "d1", "a"), (2, "d1", "b"), (3, "d2", "c")];

/// A partitioned table seeded with `SEED` (version 1), opened over a fresh `FaultyStore`.
async fn setup(dir: &tempfile::TempDir) -> (String, Arc<TestStore>, DeltaLiteTable) {
    let uri = tmp_uri(dir, "t");
    let mut t = create(&uri, &schema(), &["day"]).await;
    t.append([Ok(rows_batch(&SEED))], &WriteOptions::default())
        .await
        .unwrap();
    let store = TestStore::local();
    let t = DeltaLiteTable::open_with_store(&uri, store.clone())
        .await
        .unwrap();
    assert_eq!(t.version(), 1);
    (uri, store, t)
}

/// The table as stored: version, referenced files, rows. Opened afresh, without faults.
/// Also checks that every referenced file exists.
async fn stored(uri: &str) -> (u64, BTreeSet<String>, Vec<Vec<String>>) {
    let t = DeltaLiteTable::open(uri, HashMap::new()).await.unwrap();
    let files: BTreeSet<String> = t.files().unwrap().into_iter().map(|f| f.path).collect();
    for f in &files {
        assert!(
            std::path::Path::new(uri).join(f).is_file(),
            "referenced file {f} is missing"
        );
    }
    (t.version(), files, rows(uri).await)
}

/// Data files on disk that no commit of the log ever added (the current version's files
/// and tombstoned ones are not orphans): what a failed call leaves behind.
fn orphans(uri: &str) -> BTreeSet<String> {
    let root = std::path::Path::new(uri);
    let mut added = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("_delta_log")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let action: serde_json::Value = serde_json::from_str(line).unwrap();
                if let Some(p) = action["add"]["path"].as_str() {
                    added.insert(p.to_string());
                }
            }
        }
    }
    let mut on_disk = BTreeSet::new();
    for part in std::fs::read_dir(root).unwrap() {
        let part = part.unwrap().path();
        if part.file_name().unwrap() == "_delta_log" || !part.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&part).unwrap() {
            let f = f.unwrap().path();
            on_disk.insert(f.strip_prefix(root).unwrap().to_str().unwrap().to_string());
        }
    }
    on_disk.difference(&added).cloned().collect()
}

fn txn(version: i64) -> AppTransaction {
    AppTransaction {
        app_id: "sync-1".into(),
        version,
    }
}

/// Updates id 1 (rewrites d1's file) and inserts id 4 into d2: two partitions, a rewrite
/// and an insert.
const CHANGE: [(i64, &str, &str); 2] = [(1, "d1", "x"), (4, "d2", "y")];
const AFTER: [(i64, &str, &str); 4] = [
    (1, "d1", "x"),
    (2, "d1", "b"),
    (3, "d2", "c"),
    (4, "d2", "y"),
];

async fn upsert_change(
    t: &mut DeltaLiteTable,
    txn: Option<AppTransaction>,
) -> deltalite::Result<deltalite::UpsertStats> {
    let mut o = UpsertOptions::new(["id"]);
    o.app_transaction = txn;
    upsert(t, &rows_batch(&CHANGE), &o).await
}

/// Commit infos of the table, oldest first: the `operation` of each.
async fn operations(uri: &str) -> Vec<String> {
    let t = DeltaLiteTable::open(uri, HashMap::new()).await.unwrap();
    let mut ops: Vec<String> = t
        .history(None)
        .await
        .unwrap()
        .iter()
        .map(|h| h["operation"].as_str().unwrap_or("?").to_string())
        .collect();
    ops.reverse();
    ops
}

// ---------------------------------------------------------------------------------------
// Tests.

#[tokio::test]
async fn open_with_store_reads_and_writes_through_the_store_and_reports_missing_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, store, mut t) = setup(&dir).await;
    // Every data read goes through the store: failing GETs of data files fail the probe.
    store.inject(Op::Get, Target::Data, 1, usize::MAX, Fault::Fail);
    let err = upsert_change(&mut t, None).await.unwrap_err();
    assert!(store.take_fired() > 0);
    assert!(err.to_string().contains("injected fault"), "{err}");
    // A missing table is TableNotFound, as with `open`.
    let err = DeltaLiteTable::open_with_store(&tmp_uri(&dir, "missing"), store.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableNotFound, "{err}");
    let s = upsert_change(&mut t, None).await.unwrap();
    assert_eq!(s.version, 2);
    assert_eq!(stored(&uri).await.2, expect(&AFTER));
}

/// A data file PUT fails (first or second file of the call): a typed error, nothing
/// committed, and the files the call did write are deleted again (`all_or_cleanup`).
#[tokio::test]
async fn a_failed_data_file_put_commits_nothing_and_leaves_no_files() {
    for nth in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (uri, store, mut t) = setup(&dir).await;
        let before = stored(&uri).await;
        store.inject(Op::Put, Target::Data, nth, 1, Fault::Fail);
        let err = upsert_change(&mut t, None).await.unwrap_err();
        assert_eq!(store.take_fired(), 1, "nth {nth}");
        assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
        assert!(err.to_string().contains("injected fault"), "{err}");
        assert_eq!(stored(&uri).await, before, "nth {nth}: table changed");
        assert_eq!(orphans(&uri), BTreeSet::new(), "nth {nth}");
        // The same call succeeds once the store is healthy.
        let s = upsert_change(&mut t, None).await.unwrap();
        assert_eq!(s.version, 2);
        assert_eq!(stored(&uri).await.2, expect(&AFTER));
        assert_eq!(orphans(&uri), BTreeSet::new());
    }
}

/// A GET of a target file fails while the call probes or rewrites it: a typed error,
/// nothing committed, no files left.
#[tokio::test]
async fn a_failed_target_file_get_commits_nothing() {
    // 1: the first read of d1's file (probe); 3: a later read (footer or rewrite).
    for nth in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let (uri, store, mut t) = setup(&dir).await;
        let before = stored(&uri).await;
        store.inject(Op::Get, Target::Data, nth, 1, Fault::Fail);
        let err = upsert_change(&mut t, None).await.unwrap_err();
        assert_eq!(store.take_fired(), 1, "nth {nth}");
        assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
        assert_eq!(stored(&uri).await, before, "nth {nth}: table changed");
        assert_eq!(orphans(&uri), BTreeSet::new(), "nth {nth}");
    }
}

/// The commit PUT fails before anything is written: a typed error and nothing committed.
/// The engine cannot tell this from a lost response whose write may still land, so the
/// data files it wrote stay (unreferenced) for `vacuum`, which removes exactly them.
#[tokio::test]
async fn a_failed_commit_put_commits_nothing_and_vacuum_removes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, store, mut t) = setup(&dir).await;
    let before = stored(&uri).await;
    store.inject(Op::Put, Target::Commit, 1, 1, Fault::Fail);
    let err = upsert_change(&mut t, Some(txn(1))).await.unwrap_err();
    assert_eq!(store.take_fired(), 1);
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(err.to_string().contains("injected fault"), "{err}");
    assert_eq!(stored(&uri).await, before, "table changed");
    assert_eq!(t.app_transaction_version("sync-1").await.unwrap(), None);
    let left = orphans(&uri);
    assert_eq!(
        left.len(),
        2,
        "the rewrite of d1 and the insert into d2: {left:?}"
    );
    let mut vacuumed: Vec<String> = vacuum_now(&mut t).await;
    vacuumed.sort();
    assert_eq!(vacuumed, left.iter().cloned().collect::<Vec<_>>());
    let (_, files, rows) = stored(&uri).await;
    assert_eq!(
        (files, rows),
        (before.1, before.2),
        "vacuum removed a live file"
    );
    assert_eq!(orphans(&uri), BTreeSet::new());
    // The retry commits once.
    let s = upsert_change(&mut t, Some(txn(1))).await.unwrap();
    assert_eq!(s.version, 4, "after vacuum's two commits");
    assert_eq!(stored(&uri).await.2, expect(&AFTER));
    assert_eq!(t.app_transaction_version("sync-1").await.unwrap(), Some(1));
}

/// The commit PUT lands but its response is lost. Observed: the engine reloads the log,
/// finds its own commit (an Add of a file it wrote) and reports success at that version;
/// the written files stay referenced. Retrying the same call with the same app
/// transaction is a no-op at the same version. A retry without one replaces the rows
/// with themselves: a new version, identical content (upsert is idempotent by content).
#[tokio::test]
async fn a_lost_commit_response_is_recognised_and_a_retry_does_not_write_twice() {
    for with_txn in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (uri, store, mut t) = setup(&dir).await;
        let txn = with_txn.then(|| txn(7));
        store.inject(Op::Put, Target::Commit, 1, 1, Fault::LostResponse);
        let s = upsert_change(&mut t, txn.clone()).await.unwrap();
        assert_eq!(store.take_fired(), 1);
        assert_eq!(s.version, 2);
        assert_eq!((s.rows_updated, s.rows_inserted), (1, 1));
        let (version, files, rows) = stored(&uri).await;
        assert_eq!(version, 2);
        assert_eq!(rows, expect(&AFTER));
        assert_eq!(orphans(&uri), BTreeSet::new());
        assert_eq!(t.version(), 2, "the handle caught up");

        // The retry.
        let s = upsert_change(&mut t, txn.clone()).await.unwrap();
        assert_eq!(orphans(&uri), BTreeSet::new());
        if with_txn {
            assert_eq!(s.version, 2, "{s:?}");
            assert_eq!(stored(&uri).await, (2, files, expect(&AFTER)));
            assert_eq!(operations(&uri).await, ["CREATE TABLE", "WRITE", "MERGE"]);
            assert_eq!(t.app_transaction_version("sync-1").await.unwrap(), Some(7));
        } else {
            assert_eq!((s.version, s.rows_inserted), (3, 0), "{s:?}");
            assert_eq!(stored(&uri).await.2, expect(&AFTER));
        }
    }
}

/// The commit PUT lands, its response is lost and the client's retry of the conditional
/// PUT reports "already exists" — indistinguishable from losing the race to another
/// writer. Observed: the engine reads the winning commit, recognises it as its own and
/// reports success; it neither deletes the committed files (which the re-plan path
/// would do for a foreign winner) nor commits a second time.
#[tokio::test]
async fn a_commit_retried_after_a_lost_response_is_recognised_as_its_own() {
    for with_txn in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (uri, store, mut t) = setup(&dir).await;
        let txn = with_txn.then(|| txn(3));
        store.inject(Op::Put, Target::Commit, 1, 1, Fault::LostAndRetried);
        let s = upsert_change(&mut t, txn.clone())
            .await
            .unwrap_or_else(|e| panic!("with_txn {with_txn}: {e}"));
        assert_eq!(store.take_fired(), 1);
        assert_eq!((s.version, s.replans), (2, 0), "with_txn {with_txn}: {s:?}");
        let (version, _, rows) = stored(&uri).await;
        assert_eq!(version, 2);
        assert_eq!(rows, expect(&AFTER));
        assert_eq!(orphans(&uri), BTreeSet::new());
        // The retry: a no-op with the app transaction, rows replaced by themselves
        // without one (see above).
        let s = upsert_change(&mut t, txn.clone()).await.unwrap();
        assert_eq!(s.version, if with_txn { 2 } else { 3 }, "{s:?}");
        assert_eq!(stored(&uri).await.2, expect(&AFTER));
        assert_eq!(orphans(&uri), BTreeSet::new());
    }
}

/// `append` with an app transaction, commit response lost: the engine's commit loop
/// (`commit.rs`, shared by every write) finds its own commit in the log and reports
/// success at that version; a retry of the same call sees the app transaction applied and
/// writes nothing.
#[tokio::test]
async fn a_lost_append_response_with_an_app_transaction_does_not_append_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, store, mut t) = setup(&dir).await;
    let options = WriteOptions {
        app_transaction: Some(txn(1)),
        ..Default::default()
    };
    let new = [(5, "d1", "n")];
    let once: Vec<(i64, &str, &str)> = SEED.iter().copied().chain(new).collect();
    store.inject(Op::Put, Target::Commit, 1, 1, Fault::LostResponse);
    let s = t.append([Ok(rows_batch(&new))], &options).await.unwrap();
    assert_eq!(store.take_fired(), 1);
    assert_eq!((s.version, s.already_applied), (2, false), "{s:?}");
    assert_eq!(stored(&uri).await.0, 2);
    assert_eq!(stored(&uri).await.2, expect(&once));
    assert_eq!(orphans(&uri), BTreeSet::new());

    let retried = t.append([Ok(rows_batch(&new))], &options).await.unwrap();
    assert!(retried.already_applied, "{retried:?}");
    assert_eq!(stored(&uri).await.0, 2);
    assert_eq!(stored(&uri).await.2, expect(&once));
    assert_eq!(t.app_transaction_version("sync-1").await.unwrap(), Some(1));
    assert_eq!(operations(&uri).await, ["CREATE TABLE", "WRITE", "WRITE"]);
}

/// `append` without an app transaction whose commit PUT is retried below the engine
/// after a lost response ("already exists"): the winner is recognised as this call's own
/// commit, not rebased over and committed a second time.
#[tokio::test]
async fn a_retried_append_commit_does_not_append_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, store, mut t) = setup(&dir).await;
    let new = [(5, "d1", "n")];
    let once: Vec<(i64, &str, &str)> = SEED.iter().copied().chain(new).collect();
    store.inject(Op::Put, Target::Commit, 1, 1, Fault::LostAndRetried);
    let s = t
        .append([Ok(rows_batch(&new))], &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(store.take_fired(), 1);
    assert_eq!(s.version, 2, "{s:?}");
    assert_eq!(stored(&uri).await.2, expect(&once));
    assert_eq!(stored(&uri).await.0, 2);
    assert_eq!(orphans(&uri), BTreeSet::new());
}

/// A multipart upload of a Parquet file stored as it is fails at completion: a typed
/// error, nothing committed, no file left.
#[tokio::test]
async fn a_failed_multipart_upload_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    create(&uri, &schema(), &[]).await;
    let store = TestStore::local();
    let mut t = DeltaLiteTable::open_with_store(&uri, store.clone())
        .await
        .unwrap();
    let file = dir.path().join("in.parquet");
    {
        let b = rows_batch(&SEED);
        let table_schema = t.schema().unwrap();
        let b = RecordBatch::try_new(table_schema.clone(), b.columns().to_vec()).unwrap();
        let mut w = deltalite::parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&file).unwrap(),
            table_schema,
            None,
        )
        .unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
    }
    store.inject(Op::Multipart, Target::Data, 1, 1, Fault::Fail);
    let err = t
        .append_parquet_file(&file, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(store.take_fired(), 1);
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    let (version, files, _) = stored(&uri).await;
    assert_eq!((version, files.len()), (0, 0));
    let on_disk: Vec<_> = std::fs::read_dir(&uri)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "_delta_log")
        .collect();
    assert!(on_disk.is_empty(), "{on_disk:?}");
    let s = t
        .append_parquet_file(&file, &WriteOptions::default())
        .await
        .unwrap();
    assert!(s.stored_as_is);
    assert_eq!(stored(&uri).await.2, expect(&SEED));
}

/// Slow PUTs and GETs (data and log): the call succeeds with the right content, and the
/// per-call file concurrency knob still bounds the uploads in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_puts_and_gets_succeed_and_respect_the_concurrency_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, store, mut t) = setup(&dir).await;
    let slow = Fault::Delay(Duration::from_millis(30));
    store.inject(Op::Put, Target::Data, 1, usize::MAX, slow);
    store.inject(Op::Get, Target::Data, 1, usize::MAX, slow);
    store.inject(Op::Put, Target::Commit, 1, usize::MAX, slow);
    store.inject(Op::Get, Target::Commit, 1, usize::MAX, slow);
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.max_parallel_partitions = 1;
    o.knobs.max_parallel_files = 1;
    let b = rows_batch(&[(1, "d1", "x"), (3, "d2", "z"), (6, "d3", "w")]);
    let s = upsert(&mut t, &b, &o).await.unwrap();
    assert!(store.take_fired() > 0);
    assert_eq!(s.version, 2);
    assert_eq!(
        stored(&uri).await.2,
        expect(&[
            (1, "d1", "x"),
            (2, "d1", "b"),
            (3, "d2", "z"),
            (6, "d3", "w")
        ])
    );
    assert_eq!(store.max_data_puts_in_flight(), 1);
}

/// The commit lands but reading it back fails (delta-rs reads the new version right
/// after writing it, so the commit call itself errors). A transient failure: the engine's
/// re-read finds its own commit and reports success. A lasting failure: a typed error,
/// the table holds the call exactly once, its files stay referenced, and the next call
/// on the same handle (store healthy again) loses the race to that commit, re-plans and
/// commits correctly.
#[tokio::test]
async fn a_failed_log_read_after_a_commit_never_half_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, store, mut t) = setup(&dir).await;
    store.inject(Op::Get, Target::Commit, 1, 1, Fault::Fail);
    let s = upsert_change(&mut t, None).await.unwrap();
    assert_eq!(store.take_fired(), 1);
    assert_eq!(s.version, 2);
    assert_eq!(stored(&uri).await.2, expect(&AFTER));

    store.inject(Op::Get, Target::Commit, 1, usize::MAX, Fault::Fail);
    let b = rows_batch(&[(2, "d1", "z")]);
    let err = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap_err();
    assert!(store.take_fired() > 0);
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    let with_z = [
        (1, "d1", "x"),
        (2, "d1", "z"),
        (3, "d2", "c"),
        (4, "d2", "y"),
    ];
    assert_eq!(stored(&uri).await.0, 3);
    assert_eq!(stored(&uri).await.2, expect(&with_z));
    assert_eq!(orphans(&uri), BTreeSet::new());
    assert_eq!(t.version(), 2, "the handle could not catch up");

    let b = rows_batch(&[(3, "d2", "w")]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(s.version, 4, "{s:?}");
    let mut after = with_z;
    after[2] = (3, "d2", "w");
    assert_eq!(stored(&uri).await.2, expect(&after));
    assert_eq!(orphans(&uri), BTreeSet::new());
}
