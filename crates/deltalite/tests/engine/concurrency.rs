//! Concurrent writers on one table: disjoint commits rebase, overlapping ones re-plan,
//! and the result is always some serial order of the committed calls.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::{DeltaLiteTable, ErrorKind, UpsertOptions};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ])
}

fn rows_batch(ids: &[i64], day: &str, val: &str) -> RecordBatch {
    batch(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("day", strings(&vec![Some(day); ids.len()])),
        ("val", strings(&vec![Some(val); ids.len()])),
    ])
}

async fn twin_handles(uri: &str) -> (DeltaLiteTable, DeltaLiteTable) {
    let _ = create(uri, &schema(), &["day"]).await;
    let a = DeltaLiteTable::open(uri, HashMap::new()).await.unwrap();
    let b = DeltaLiteTable::open(uri, HashMap::new()).await.unwrap();
    (a, b)
}

#[tokio::test]
async fn a_stale_writer_to_the_same_partition_replans_instead_of_duplicating() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let (mut a, mut b) = twin_handles(&uri).await;
    upsert(
        &mut a,
        &rows_batch(&[5], "d1", "from-a"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    let s = upsert(
        &mut b,
        &rows_batch(&[5], "d1", "from-b"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!((s.commit_retries, s.replans), (1, 1), "{s:?}");
    assert_eq!(
        (s.rows_updated, s.rows_inserted),
        (1, 0),
        "re-planned against A's row: {s:?}"
    );
    assert_eq!(rows(&uri).await, vec![vec!["5", "d1", "from-b"]]);
}

#[tokio::test]
async fn a_stale_writer_to_another_partition_rebases_without_replanning() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let (mut a, mut b) = twin_handles(&uri).await;
    upsert(
        &mut a,
        &rows_batch(&[1], "d1", "a"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    let s = upsert(
        &mut b,
        &rows_batch(&[1], "d2", "b"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!((s.commit_retries, s.replans, s.version), (1, 0, 2), "{s:?}");
    assert_eq!(
        rows(&uri).await,
        vec![vec!["1", "d1", "a"], vec!["1", "d2", "b"]]
    );
}

/// A table whose partition `d` holds ids 1-5 in three files (tags one, two, three).
async fn three_files_in_one_partition(uri: &str) -> DeltaLiteTable {
    let _ = create(uri, &schema(), &[]).await;
    let mut table = DeltaLiteTable::open(uri, HashMap::new()).await.unwrap();
    for (ids, tag) in [
        (&[1, 2][..], "one"),
        (&[3, 4][..], "two"),
        (&[5][..], "three"),
    ] {
        upsert(
            &mut table,
            &rows_batch(ids, "d", tag),
            &UpsertOptions::new(["id"]),
        )
        .await
        .unwrap();
    }
    table
}

/// A compaction commits no data change, but it removes the files a stale upsert is about
/// to replace: rebasing the upsert over it would add the rewritten rows next to the
/// compacted copy of the same rows. Found by the server soak with out-of-band compaction
/// (every key twice after the first compaction).
#[tokio::test]
async fn a_stale_upsert_replans_over_a_compaction_of_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut a = three_files_in_one_partition(&uri).await;
    let mut b = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    let compacted = a
        .compact(&deltalite::compact::CompactOptions::default())
        .await
        .unwrap();
    assert_eq!(compacted.files_removed, 3, "{compacted:?}");
    let s = upsert(
        &mut b,
        &rows_batch(&[3], "d", "new"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(s.replans, 1, "{s:?}");
    assert_eq!(
        rows(&uri).await,
        vec![
            vec!["1", "d", "one"],
            vec!["2", "d", "one"],
            vec!["3", "d", "new"],
            vec!["4", "d", "two"],
            vec!["5", "d", "three"],
        ]
    );
}

/// The other order: an upsert replaced a file a stale compaction is about to compact.
/// The compaction must not commit the old rows again.
#[tokio::test]
async fn a_stale_compaction_does_not_bring_back_rows_an_upsert_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut a = three_files_in_one_partition(&uri).await;
    let mut stale = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    upsert(
        &mut a,
        &rows_batch(&[3], "d", "new"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    let compacted = stale
        .compact(&deltalite::compact::CompactOptions::default())
        .await;
    let want = vec![
        vec!["1", "d", "one"],
        vec!["2", "d", "one"],
        vec!["3", "d", "new"],
        vec!["4", "d", "two"],
        vec!["5", "d", "three"],
    ];
    assert_eq!(rows(&uri).await, want, "compaction: {compacted:?}");
}

#[tokio::test]
async fn exhausted_retries_raise_a_conflict_and_leave_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let (mut a, mut b) = twin_handles(&uri).await;
    upsert(
        &mut a,
        &rows_batch(&[1], "d1", "a"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    let files_of_a = std::fs::read_dir(dir.path().join("t/day=d1"))
        .unwrap()
        .count();
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.commit_max_retries = 0;
    let err = upsert(&mut b, &rows_batch(&[2], "d1", "b"), &o)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CommitConflict, "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path().join("t/day=d1"))
            .unwrap()
            .count(),
        files_of_a
    );
    assert_eq!(rows(&uri).await, vec![vec!["1", "d1", "a"]]);
}

/// Every call writes every key with its own tag. Serializability then means: no key is
/// duplicated and all rows of a partition carry the tag of the last commit that touched
/// that partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_writers_end_in_a_serial_order() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let _ = create(&uri, &schema(), &["day"]).await;
    let keys: Vec<i64> = (0..20).collect();
    let mut tasks = Vec::new();
    for writer in 0..6 {
        let uri = uri.clone();
        let keys = keys.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
            let mut versions = Vec::new();
            for round in 0..3 {
                let day = if (writer + round) % 2 == 0 {
                    "d1"
                } else {
                    "d2"
                };
                let tag = format!("w{writer}r{round}");
                let mut o = UpsertOptions::new(["id"]);
                o.knobs.commit_max_retries = 100;
                let s = upsert(&mut t, &rows_batch(&keys, day, &tag), &o)
                    .await
                    .unwrap();
                versions.push((s.version, day.to_string(), tag));
            }
            versions
        }));
    }
    let mut commits = Vec::new();
    for t in tasks {
        commits.extend(t.await.unwrap());
    }
    commits.sort();
    let versions: Vec<u64> = commits.iter().map(|c| c.0).collect();
    let mut dedup = versions.clone();
    dedup.dedup();
    assert_eq!(versions, dedup, "every call has its own version");
    let got = rows(&uri).await;
    for day in ["d1", "d2"] {
        let last_tag = &commits.iter().rev().find(|c| c.1 == day).unwrap().2;
        let in_day: Vec<_> = got.iter().filter(|r| r[1] == day).collect();
        assert_eq!(
            in_day.len(),
            keys.len(),
            "no lost or duplicated keys in {day}"
        );
        assert!(
            in_day.iter().all(|r| &r[2] == last_tag),
            "{day}: {in_day:?} vs {last_tag}"
        );
    }
}

/// Compaction without named bloom columns keeps the ones its input had: the upsert keys',
/// so the probes of later upserts can still rule files out without reading their keys.
#[tokio::test]
async fn a_compaction_keeps_the_key_columns_bloom_filters() {
    use deltalite::deltalake::parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut table = three_files_in_one_partition(&uri).await;
    let stats = table
        .compact(&deltalite::compact::CompactOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (stats.files_removed, stats.files_added),
        (3, 1),
        "{stats:?}"
    );
    let files = table.files().unwrap();
    let [file] = files.as_slice() else {
        panic!("one file after compaction: {files:?}");
    };
    let reader = SerializedFileReader::new(
        std::fs::File::open(dir.path().join("t").join(&file.path)).unwrap(),
    )
    .unwrap();
    let group = reader.metadata().row_group(0);
    let blooms: Vec<(String, bool)> = group
        .columns()
        .iter()
        .map(|c| (c.column_path().string(), c.bloom_filter_offset().is_some()))
        .collect();
    assert_eq!(
        blooms,
        vec![
            ("id".to_string(), true),
            ("day".to_string(), false),
            ("val".to_string(), false)
        ]
    );
    assert_eq!(
        rows(&uri).await,
        vec![
            vec!["1", "d", "one"],
            vec!["2", "d", "one"],
            vec!["3", "d", "two"],
            vec!["4", "d", "two"],
            vec!["5", "d", "three"],
        ]
    );
}
