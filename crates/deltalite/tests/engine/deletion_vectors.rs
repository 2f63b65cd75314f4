//! Deletion vectors: tables with `delta.enableDeletionVectors=true` get a vector for the
//! few rows an upsert replaces or deletes in a file instead of a rewrite; every path of
//! the engine honours vectors; compaction purges them. Contents are checked through
//! delta-rs's own DataFusion scan (which applies vectors, independently of our reader)
//! against a model table without vectors that took the same calls.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use datafusion::prelude::SessionContext;
use deltalite::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::compact::CompactOptions;
use deltalite::{
    DELETION_VECTORS_PROPERTY, DeltaLiteTable, MetadataChange, UpsertOptions, UpsertStats,
};
use rand::{Rng, SeedableRng};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
        Field::new("deleted", DataType::Boolean, true),
    ])
}

fn rows_of(ids: &[i64], v: &str, deleted: bool) -> RecordBatch {
    batch(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("v", strings(&vec![Some(v); ids.len()])),
        (
            "deleted",
            Arc::new(BooleanArray::from(vec![deleted; ids.len()])),
        ),
    ])
}

fn options() -> UpsertOptions {
    let mut o = UpsertOptions::new(["id"]);
    o.delete_column = Some("deleted".into());
    o
}

/// A table with deletion vectors on and a model without them.
async fn pair(dir: &tempfile::TempDir) -> (DeltaLiteTable, DeltaLiteTable) {
    let with = DeltaLiteTable::create(
        &tmp_uri(dir, "dv"),
        HashMap::new(),
        &schema(),
        &[],
        HashMap::from([("delta.enableDeletionVectors".into(), "true".into())]),
    )
    .await
    .unwrap();
    (with, create(&tmp_uri(dir, "model"), &schema(), &[]).await)
}

/// [`pair`], both holding ids `0..rows` with value "a".
async fn seeded(dir: &tempfile::TempDir, rows: i64) -> (DeltaLiteTable, DeltaLiteTable) {
    let (mut t, mut m) = pair(dir).await;
    let ids: Vec<i64> = (0..rows).collect();
    both(&mut t, &mut m, &rows_of(&ids, "a", false), &options()).await;
    (t, m)
}

/// The same upsert into both tables; the stats of the one with vectors.
async fn both(
    t: &mut DeltaLiteTable,
    m: &mut DeltaLiteTable,
    b: &RecordBatch,
    o: &UpsertOptions,
) -> UpsertStats {
    let model = upsert(m, b, o).await.unwrap();
    assert_eq!(model.files_marked, 0, "{model:?}");
    upsert(t, b, o).await.unwrap()
}

/// Every row as delta-rs's DataFusion scan reads it (deletion vectors applied), sorted.
async fn scanned(t: &DeltaLiteTable) -> Vec<Vec<String>> {
    let ctx = SessionContext::new();
    let provider = t.delta_table().table_provider().await.unwrap();
    ctx.register_table("t", provider).unwrap();
    let batches = ctx
        .sql("SELECT id, v, deleted FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut out: Vec<Vec<String>> = batches.iter().flat_map(batch_rows).collect();
    out.sort();
    out
}

/// (path, cardinality) of every active file's deletion vector.
fn vectors(t: &DeltaLiteTable) -> Vec<(String, i64)> {
    let state = t.delta_table().snapshot().unwrap();
    state
        .log_data()
        .iter()
        .filter_map(|f| {
            f.deletion_vector_descriptor()
                .map(|dv| (f.path().to_string(), dv.cardinality))
        })
        .collect()
}

async fn same(t: &DeltaLiteTable, m: &DeltaLiteTable) {
    let model = scanned(m).await;
    assert_eq!(model, rows(m.uri()).await, "the model has no vectors");
    assert_eq!(scanned(t).await, model);
}

#[tokio::test]
async fn a_small_change_marks_the_file_and_readers_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = pair(&dir).await;
    let ids: Vec<i64> = (0..1000).collect();
    both(&mut t, &mut m, &rows_of(&ids, "a", false), &options()).await;
    let file = t.files().unwrap()[0].path.clone();

    // 30 updates, 10 deletes, 5 inserts.
    let updates = rows_of(&(0..30).collect::<Vec<_>>(), "u", false);
    let deletes = rows_of(&(100..110).collect::<Vec<_>>(), "", true);
    let inserts = rows_of(&(1000..1005).collect::<Vec<_>>(), "i", false);
    let s = both(
        &mut t,
        &mut m,
        &concat(&[updates, deletes, inserts]),
        &options(),
    )
    .await;
    assert_eq!(
        (
            s.files_marked,
            s.files_removed,
            s.files_added,
            s.rows_copied
        ),
        (1, 1, 2, 0),
        "{s:?}"
    );
    assert_eq!(
        (s.rows_replaced, s.rows_deleted, s.rows_inserted),
        (30, 10, 5),
        "{s:?}"
    );
    assert_eq!(vectors(&t), vec![(file.clone(), 40)]);
    same(&t, &m).await;

    // A second call merges its rows into the file's vector; rows already deleted by it
    // match nothing (ids 100..105 are inserted again); ids 0..5 live in the file the
    // first call wrote, which gets a vector of its own.
    let again = concat(&[
        rows_of(&(500..520).collect::<Vec<_>>(), "w", false),
        rows_of(&(100..105).collect::<Vec<_>>(), "back", false),
        rows_of(&(0..5).collect::<Vec<_>>(), "x", false),
    ]);
    let s = both(&mut t, &mut m, &again, &options()).await;
    assert_eq!((s.files_marked, s.rows_inserted), (2, 5), "{s:?}");
    let mut marked = vectors(&t);
    marked.sort_by_key(|(path, _)| *path != file);
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert_eq!(marked[0], (file, 60));
    assert_eq!(marked[1].1, 5);
    same(&t, &m).await;

    // A new handle reads the vectors from the log.
    let mut reopened = DeltaLiteTable::open(t.uri(), HashMap::new()).await.unwrap();
    let s = both(
        &mut reopened,
        &mut m,
        &rows_of(&[30, 31, 100], "y", false),
        &options(),
    )
    .await;
    // 30 and 31 in the first file, 100 (inserted again above) in the second call's.
    assert_eq!((s.files_marked, s.rows_replaced), (2, 3), "{s:?}");
    same(&reopened, &m).await;
}

#[tokio::test]
async fn past_the_share_a_file_is_rewritten_and_loses_its_vector() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 100).await;
    let s = both(
        &mut t,
        &mut m,
        &rows_of(&(0..10).collect::<Vec<_>>(), "b", false),
        &options(),
    )
    .await;
    assert_eq!(s.files_marked, 1, "{s:?}");
    // 10 deleted already + 45 more = 55% of the file: rewritten, the vector dropped and
    // its rows left behind.
    let s = both(
        &mut t,
        &mut m,
        &rows_of(&(40..85).collect::<Vec<_>>(), "c", false),
        &options(),
    )
    .await;
    assert_eq!((s.files_marked, s.rows_copied), (0, 45), "{s:?}");
    assert_eq!(vectors(&t), vec![]);
    same(&t, &m).await;

    // The knob: 0 rewrites every file.
    let mut o = options();
    o.knobs.deletion_vector_max_share = 0.0;
    let s = both(&mut t, &mut m, &rows_of(&[90], "d", false), &o).await;
    assert_eq!(s.files_marked, 0, "{s:?}");
    o.knobs.deletion_vector_max_share = 1.5;
    let err = upsert(&mut t, &rows_of(&[1], "e", false), &o)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument: deletion_vector_max_share must be between 0 and 1, got 1.5"
    );
    same(&t, &m).await;
}

#[tokio::test]
async fn deleting_every_row_of_a_file_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = pair(&dir).await;
    both(
        &mut t,
        &mut m,
        &rows_of(&[1, 2, 3, 4], "a", false),
        &options(),
    )
    .await;
    let mut o = options();
    o.knobs.deletion_vector_max_share = 1.0;
    let s = both(&mut t, &mut m, &rows_of(&[1, 2], "", true), &o).await;
    assert_eq!(s.files_marked, 1, "{s:?}");
    let s = both(&mut t, &mut m, &rows_of(&[3, 4], "", true), &o).await;
    assert_eq!(
        (s.files_marked, s.files_removed, s.files_added),
        (1, 1, 0),
        "{s:?}"
    );
    assert_eq!(t.files().unwrap().len(), 0);
    same(&t, &m).await;
}

#[tokio::test]
async fn compaction_purges_vectors_and_keeps_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 200).await;
    both(&mut t, &mut m, &rows_of(&[5, 6, 7], "", true), &options()).await;
    assert_eq!(vectors(&t).len(), 1);
    let before = scanned(&t).await;
    let c = t.compact(&CompactOptions::default()).await.unwrap();
    assert_eq!(c.files_removed, 1, "{c:?}");
    assert_eq!(vectors(&t), vec![]);
    assert_eq!(scanned(&t).await, before);
    // Plain reads agree now: no file holds a deleted row.
    assert_eq!(rows(t.uri()).await, before);
    same(&t, &m).await;
}

/// The smallest and largest id of each active file, by reading the files themselves.
async fn key_ranges(t: &DeltaLiteTable) -> Vec<(i64, i64)> {
    let root = t.uri().trim_start_matches("file://").to_string();
    let mut ranges = Vec::new();
    for f in t.files().unwrap() {
        let ctx = SessionContext::new();
        let path = format!("{root}/{}", f.path);
        let batches = ctx
            .read_parquet(path, Default::default())
            .await
            .unwrap()
            .aggregate(
                vec![],
                vec![
                    datafusion::functions_aggregate::expr_fn::min(datafusion::prelude::col("id")),
                    datafusion::functions_aggregate::expr_fn::max(datafusion::prelude::col("id")),
                ],
            )
            .unwrap()
            .collect()
            .await
            .unwrap();
        let row = &batch_rows(&batches[0])[0];
        ranges.push((row[0].parse().unwrap(), row[1].parse().unwrap()));
    }
    ranges.sort();
    ranges
}

/// Merge-on-read leaves each upsert's new row versions in a file spanning every key, and
/// re-adds the files it marks, so the log's order no longer follows the keys. A purging
/// compaction bins such a partition's files by their smallest key: the new-row files
/// join the first key range, and every later output covers a narrow range, which a
/// lookup skips by the log's bounds (log order would have mixed them). Its pages are the
/// upserts' Snappy, so the purge leaves the table no slower to scan.
#[tokio::test]
async fn a_purging_compaction_bins_files_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = pair(&dir).await;
    for k in 0..4 {
        let ids: Vec<i64> = (k * 1000..k * 1000 + 1000).collect();
        both(&mut t, &mut m, &rows_of(&ids, "a", false), &options()).await;
    }
    let base = t.files().unwrap();
    assert_eq!(base.len(), 4);
    for round in 1..=3 {
        let ids: Vec<i64> = (0..4).map(|k| k * 1000 + round).collect();
        let s = both(&mut t, &mut m, &rows_of(&ids, "b", false), &options()).await;
        assert_eq!(s.files_marked, 4, "{s:?}");
    }
    assert_eq!(vectors(&t).len(), 4);
    let largest = base.iter().map(|f| f.size).max().unwrap();
    let new_rows: u64 = t
        .files()
        .unwrap()
        .iter()
        .filter(|f| !base.iter().any(|b| b.path == f.path))
        .map(|f| f.size)
        .sum();
    // Two base files and the new-row files fit a bin; a third base file does not.
    let target = 2 * largest + new_rows + 64;
    assert!(target < 3 * base.iter().map(|f| f.size).min().unwrap());
    let c = t
        .compact(&CompactOptions {
            target_file_size: Some(target),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((c.files_removed, c.files_added), (7, 2), "{c:?}");
    assert_eq!(vectors(&t), vec![]);
    // Pages as the table's upserts write them (Snappy), not delta-rs's optimize's ZSTD.
    let names: Vec<String> = t.files().unwrap().into_iter().map(|f| f.path).collect();
    assert!(
        names.iter().all(|n| n.ends_with(".snappy.parquet")),
        "{names:?}"
    );
    // ids 0..1999 with the new rows (their keys span 1..3003), then 2000..3999 alone.
    assert_eq!(key_ranges(&t).await, vec![(0, 3003), (2000, 3999)]);
    same(&t, &m).await;
}

#[tokio::test]
async fn random_sequences_agree_with_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = pair(&dir).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    for step in 0..30 {
        let n = rng.random_range(1..60);
        let mut ids: Vec<i64> = (0..n).map(|_| rng.random_range(0..400)).collect();
        ids.sort_unstable();
        ids.dedup();
        let deleted: Vec<bool> = ids.iter().map(|_| rng.random_bool(0.3)).collect();
        let b = batch(vec![
            ("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef),
            (
                "v",
                strings(&vec![Some(format!("s{step}").as_str()); ids.len()]),
            ),
            ("deleted", Arc::new(BooleanArray::from(deleted))),
        ]);
        let mut o = options();
        // Small files, so that calls touch several and mark some, rewrite others.
        o.knobs.target_file_size = Some(4 * 1024);
        o.knobs.deletion_vector_max_share = 0.3;
        both(&mut t, &mut m, &b, &o).await;
        if step % 10 == 9 {
            t.compact(&CompactOptions::default()).await.unwrap();
        }
        same(&t, &m).await;
    }
}

#[tokio::test]
async fn setting_the_property_upgrades_the_protocol_in_the_same_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = create(&tmp_uri(&dir, "t"), &schema(), &[]).await;
    let mut m = create(&tmp_uri(&dir, "model"), &schema(), &[]).await;
    both(
        &mut t,
        &mut m,
        &rows_of(&(0..100).collect::<Vec<_>>(), "a", false),
        &options(),
    )
    .await;
    let before = t.version();
    let set = MetadataChange::Property {
        key: DELETION_VECTORS_PROPERTY.into(),
        value: Some("true".into()),
    };
    let version = t
        .change_metadata(std::slice::from_ref(&set), 3)
        .await
        .unwrap();
    assert_eq!(version, before + 1);
    let protocol = serde_json::to_value(t.delta_table().snapshot().unwrap().protocol()).unwrap();
    assert_eq!(
        (&protocol["minReaderVersion"], &protocol["minWriterVersion"]),
        (&serde_json::json!(3), &serde_json::json!(7))
    );
    assert!(
        protocol["readerFeatures"]
            .as_array()
            .unwrap()
            .contains(&"deletionVectors".into()),
        "{protocol}"
    );
    // Of the features the legacy writer version implied, the table uses none: listing
    // `invariants` would bar writers without DataFusion (delta-rs's rule).
    assert_eq!(
        protocol["writerFeatures"],
        serde_json::json!(["deletionVectors"])
    );
    // Setting it again changes nothing.
    assert_eq!(t.change_metadata(&[set], 3).await.unwrap(), version);
    let s = both(&mut t, &mut m, &rows_of(&[3, 4], "b", false), &options()).await;
    assert_eq!(s.files_marked, 1, "{s:?}");
    same(&t, &m).await;
}

/// The table folder's file names (data and vector files; not the log), sorted.
fn on_disk(t: &DeltaLiteTable) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(t.uri())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n != "_delta_log")
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_failed_commit_deletes_the_new_vector_and_never_the_marked_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 100).await;
    both(&mut t, &mut m, &rows_of(&[1], "b", false), &options()).await;
    let (version, disk) = (t.version(), on_disk(&t));
    assert_eq!(disk.len(), 3, "two data files and one vector: {disk:?}");
    let mut o = options();
    o.pre_commit_hook = Some(Arc::new(|| {
        Err(deltalite::DeltaLiteError::Other("injected fault".into()))
    }));
    let err = upsert(&mut t, &rows_of(&[2, 3, 500], "c", false), &o)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "injected fault");
    t.reload().await.unwrap();
    assert_eq!(t.version(), version);
    assert_eq!(
        on_disk(&t),
        disk,
        "the new vector and insert file went, nothing else"
    );
    same(&t, &m).await;
}

#[tokio::test]
async fn two_writers_marking_one_file_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 100).await;
    // Two handles at the same version: the second plans against the file as it was,
    // loses the race to the first's vector, and plans again on top of it.
    let mut other = DeltaLiteTable::open(t.uri(), HashMap::new()).await.unwrap();
    let first = upsert(&mut t, &rows_of(&[5], "", true), &options())
        .await
        .unwrap();
    let second = upsert(&mut other, &rows_of(&[7], "x", false), &options())
        .await
        .unwrap();
    assert_eq!((first.files_marked, second.files_marked), (1, 1));
    assert_eq!(second.replans, 1, "{second:?}");
    upsert(&mut m, &rows_of(&[5], "", true), &options())
        .await
        .unwrap();
    upsert(&mut m, &rows_of(&[7], "x", false), &options())
        .await
        .unwrap();
    other.reload().await.unwrap();
    assert_eq!(
        vectors(&other),
        vec![(t.files().unwrap()[0].path.clone(), 2)]
    );
    same(&other, &m).await;
}

#[tokio::test]
async fn vacuum_keeps_live_vectors_and_deletes_replaced_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 100).await;
    both(&mut t, &mut m, &rows_of(&[1], "", true), &options()).await;
    let replaced: Vec<String> = on_disk(&t)
        .into_iter()
        .filter(|n| n.starts_with("deletion_vector_"))
        .collect();
    both(&mut t, &mut m, &rows_of(&[2], "", true), &options()).await;
    assert_eq!(vectors(&t).len(), 1);
    let deleted = vacuum_now(&mut t).await;
    assert_eq!(deleted, replaced, "only the superseded vector");
    let left: Vec<String> = on_disk(&t)
        .into_iter()
        .filter(|n| n.starts_with("deletion_vector_"))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    same(&t, &m).await;
}

/// One call's vectors share one file; vacuum keeps it while any active file names it.
#[tokio::test]
async fn one_call_writes_one_vector_file_that_vacuum_keeps_while_used() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 100).await;
    let more: Vec<i64> = (100..200).collect();
    both(&mut t, &mut m, &rows_of(&more, "a", false), &options()).await;
    let vector_files = |t: &DeltaLiteTable| -> Vec<String> {
        on_disk(t)
            .into_iter()
            .filter(|n| n.starts_with("deletion_vector_"))
            .collect()
    };

    let s = both(&mut t, &mut m, &rows_of(&[1, 101], "b", false), &options()).await;
    assert_eq!(s.files_marked, 2, "{s:?}");
    let shared = vector_files(&t);
    assert_eq!(shared.len(), 1, "one vector file for the call: {shared:?}");
    let state = t.delta_table().snapshot().unwrap();
    let mut descriptors: Vec<_> = state
        .log_data()
        .iter()
        .filter_map(|f| f.deletion_vector_descriptor())
        .map(|dv| (dv.path_or_inline_dv.clone(), dv.offset))
        .collect();
    descriptors.sort();
    assert_eq!(descriptors.len(), 2);
    assert_eq!(descriptors[0].0, descriptors[1].0, "one file");
    assert_ne!(descriptors[0].1, descriptors[1].1, "two offsets");
    same(&t, &m).await;

    // The first file gets a new vector; the second still reads the shared file.
    both(&mut t, &mut m, &rows_of(&[2], "c", false), &options()).await;
    assert!(
        vacuum_now(&mut t).await.is_empty(),
        "the shared file is still used"
    );
    assert!(vector_files(&t).contains(&shared[0]));
    same(&t, &m).await;

    both(&mut t, &mut m, &rows_of(&[102], "c", false), &options()).await;
    assert_eq!(vacuum_now(&mut t).await, shared, "now nothing names it");
    assert_eq!(vector_files(&t).len(), 2);
    assert_eq!(vectors(&t).len(), 2);
    same(&t, &m).await;
}

const CRASH_KEYS: i64 = 2000;

/// The keys round `round` of the crash child writes (a few per file: they get vectors).
fn crash_keys(round: i64) -> Vec<i64> {
    let mut keys: Vec<i64> = (0..20)
        .map(|i| (round * 37 + i * 101) % CRASH_KEYS)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The child of `kills_while_marking_leave_a_committed_version`: upsert a few keys per
/// round until killed, compacting every fifth round and vacuuming every seventh.
#[tokio::test]
#[ignore = "child process of kills_while_marking_leave_a_committed_version"]
async fn dv_crash_child_writer() {
    let Ok(uri) = std::env::var("DELTALITE_DV_CRASH_URI") else {
        return;
    };
    let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    let mut round = t.version() as i64 * 1000;
    loop {
        round += 1;
        match round % 7 {
            5 => {
                t.compact(&CompactOptions::default()).await.unwrap();
            }
            6 => {
                vacuum_now(&mut t).await;
            }
            _ => {
                let keys = crash_keys(round);
                let mut o = options();
                o.commit_metadata =
                    HashMap::from([("crash_round".to_string(), serde_json::json!(round))]);
                upsert(&mut t, &rows_of(&keys, &round.to_string(), false), &o)
                    .await
                    .unwrap();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_while_marking_leave_a_committed_version() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, _) = pair(&dir).await;
    let all: Vec<i64> = (0..CRASH_KEYS).collect();
    upsert(&mut t, &rows_of(&all, "0", false), &options())
        .await
        .unwrap();
    let uri = t.uri().to_string();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut marked = 0;
    for _ in 0..5 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "deletion_vectors::dv_crash_child_writer",
                "--nocapture",
            ])
            .env("DELTALITE_DV_CRASH_URI", &uri)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(
            rng.random_range(300..1500),
        ))
        .await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        // The committed rounds, replayed: each key holds the last round that wrote it.
        let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
        let mut model: HashMap<i64, String> = all.iter().map(|&k| (k, "0".into())).collect();
        let mut history = t.history(None).await.unwrap();
        history.reverse();
        for commit in history {
            if let Some(round) = commit["crash_round"].as_i64() {
                for k in crash_keys(round) {
                    model.insert(k, round.to_string());
                }
            }
        }
        let mut expected: Vec<Vec<String>> = model
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v, "false".into()])
            .collect();
        expected.sort();
        assert_eq!(scanned(&t).await, expected, "v{}", t.version());
        marked += vectors(&t).len();
        // The dead writer's orphans go (its vector files included); what the log
        // references, vectors included, stays readable.
        vacuum_now(&mut t).await;
        assert_eq!(
            scanned(&t).await,
            expected,
            "after vacuum, v{}",
            t.version()
        );
    }
    assert!(marked > 0, "the kills saw files with vectors");
}

/// A planner that marks fixed rows of the table's only file (SQL DELETE's shape).
struct MarkOnly(Vec<u64>);

impl deltalite::ReplacePlanner for MarkOnly {
    fn plan<'a>(
        &'a mut self,
        table: &'a deltalite::deltalake::DeltaTable,
    ) -> futures::future::BoxFuture<'a, deltalite::Result<deltalite::Replacement>> {
        Box::pin(async move {
            let path = table
                .snapshot()?
                .log_data()
                .iter()
                .next()
                .unwrap()
                .path()
                .to_string();
            Ok(deltalite::Replacement {
                remove: Vec::new(),
                rows: futures::StreamExt::boxed(futures::stream::empty()),
                mark: vec![deltalite::MarkedRows {
                    path,
                    live_rows: self.0.clone(),
                }],
            })
        })
    }
}

#[tokio::test]
async fn a_replacement_marks_live_rows_past_the_vector_a_file_has() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = seeded(&dir, 100).await;
    // Ids 0..5 deleted: the only file's vector holds positions 0..5. Then rows are
    // marked on `t` by hand and the same ids deleted from the model.
    both(
        &mut t,
        &mut m,
        &rows_of(&[0, 1, 2, 3, 4], "b", true),
        &options(),
    )
    .await;
    assert_eq!(vectors(&t).len(), 1);
    // The first live row of the file is id 5; ordinals 0 and 10 are ids 5 and 15.
    let policy = deltalite::MarkingPolicy::of(t.delta_table(), 0.5)
        .unwrap()
        .unwrap();
    let (path, _) = vectors(&t)[0].clone();
    assert!(policy.worth_marking(&path, 45));
    assert!(!policy.worth_marking(&path, 46));
    let stats = t
        .replace(
            &mut MarkOnly(vec![10, 0]),
            &deltalite::ReplaceOptions::new(deltalite::ReplaceKind::Delete { predicate: None }),
        )
        .await
        .unwrap();
    assert_eq!(
        (stats.files_marked, stats.files_removed, stats.files_added),
        (1, 0, 0)
    );
    assert_eq!(vectors(&t), vec![(path, 7)]);
    upsert(&mut m, &rows_of(&[5, 15], "x", true), &options())
        .await
        .unwrap();
    same(&t, &m).await;

    // A table without vectors refuses, and is left as it was.
    let version = m.version();
    let err = m
        .replace(
            &mut MarkOnly(vec![0]),
            &deltalite::ReplaceOptions::new(deltalite::ReplaceKind::Delete { predicate: None }),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported table: a replacement marks rows with deletion vectors, which this table does not write"
    );
    m.reload().await.unwrap();
    assert_eq!(m.version(), version);
    assert!(
        deltalite::MarkingPolicy::of(m.delta_table(), 0.5)
            .unwrap()
            .is_none()
    );
}

/// The key cache answers integer keys with positions: once the files of a table with
/// vectors are cached (by the background fill of what the probe only read in part, by
/// a probe that read every key, and by the writer of an upsert's own rows), a repeated
/// upsert opens no file to probe it, drops the positions a file's vector already
/// deletes, and leaves the same rows as the model, which never uses the cache. A cursor
/// (which compares stored values) and a composite key still probe.
#[tokio::test]
async fn cached_integer_keys_answer_repeated_upserts_and_agree_with_the_model() {
    use deltalite::runtime::probe_cache::ProbeCache;

    let dir = tempfile::tempdir().unwrap();
    let (mut t, mut m) = pair(&dir).await;
    let mut model = options();
    model.knobs.use_probe_cache = false;
    // Seeded without the cache, so that the first cached upsert starts cold: two files
    // written by upserts (small key pages, so a probe of a few keys reads a few pages),
    // the second in shuffled order (the cache keeps positions); and one appended file
    // holding a key twice and NULL keys (read whole by its probe, which fills the cache).
    let ascending: Vec<i64> = (0..20_000).collect();
    both(&mut t, &mut m, &rows_of(&ascending, "a", false), &model).await;
    let mut shuffled: Vec<i64> = (20_000..40_000).collect();
    shuffled.reverse();
    shuffled.swap(3, 19_000);
    both(&mut t, &mut m, &rows_of(&shuffled, "b", false), &model).await;
    let odd = batch(vec![
        (
            "id",
            Arc::new(Int64Array::from(vec![
                Some(40_000),
                None,
                Some(40_001),
                Some(40_000),
                None,
            ])) as ArrayRef,
        ),
        ("v", strings(&[Some("c"); 5])),
        ("deleted", Arc::new(BooleanArray::from(vec![false; 5]))),
    ]);
    for table in [&mut t, &mut m] {
        table
            .append(
                [Ok(odd.clone())],
                &deltalite::write::WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    same(&t, &m).await;

    let mut cached = options();
    cached.knobs.fill_probe_cache = Some(true);
    let step = |ids: Vec<i64>, deleted: Vec<bool>, v: &str| {
        batch(vec![
            ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("v", strings(&vec![Some(v); deleted.len()])),
            ("deleted", Arc::new(BooleanArray::from(deleted))),
        ])
    };
    // Cold: every file is probed; the two upserted ones only in part.
    let first = step(
        vec![5, 6_000, 19_999, 25_000, 39_999, 40_000, 50_000],
        vec![false, false, true, false, false, false, false],
        "first",
    );
    let s = both(&mut t, &mut m, &first, &cached).await;
    assert_eq!(
        (s.files_probed, s.files_probe_cached, s.files_marked),
        (3, 0, 3),
        "{s:?}"
    );
    ProbeCache::global().settle().await;
    same(&t, &m).await;

    // Warm: the three marked files (same data files, new vectors) and the file of the
    // first call's own rows are answered from the cache. 5 and 40,000 were replaced by
    // the first call (their old positions are in the vectors now), 19,999 was deleted
    // (so it is an insert now), 40,000 matches its one live copy in the first call's
    // file, and 20,003 sits where the shuffle put it.
    let second = step(
        vec![5, 7, 19_999, 20_003, 39_000, 40_000, 40_001, 50_000, 60_000],
        vec![false; 9],
        "second",
    );
    let s = both(&mut t, &mut m, &second, &cached).await;
    assert_eq!(s.files_probed, 0, "every candidate answered unread: {s:?}");
    assert_eq!(s.files_probe_cached, 4, "{s:?}");
    assert_eq!((s.rows_updated, s.rows_inserted), (7, 2), "{s:?}");
    same(&t, &m).await;

    // Random sequences, deletes included, against the model.
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let mut unread = 0;
    for round in 0..12 {
        let mut ids: Vec<i64> = (0..rng.random_range(1..40))
            .map(|_| rng.random_range(0..45_000))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let deleted = ids.iter().map(|_| rng.random_bool(0.2)).collect();
        let b = step(ids, deleted, &format!("r{round}"));
        let s = both(&mut t, &mut m, &b, &cached).await;
        ProbeCache::global().settle().await;
        unread += usize::from(s.files_probed == 0 && s.files_probe_cached > 0);
        same(&t, &m).await;
    }
    eprintln!("rounds answered without a probe: {unread} of 12");
    assert!(unread >= 6, "most rounds need no probe: {unread}");

    // A cursor compares stored values: the cache cannot answer, the probe does.
    let mut with_cursor = cached.clone();
    with_cursor.cursor_fields = vec!["v".into()];
    let last = step(vec![7, 30_000], vec![false; 2], "zz");
    let s = both(&mut t, &mut m, &last, &with_cursor).await;
    assert!(s.files_probed > 0, "{s:?}");
    same(&t, &m).await;
}
