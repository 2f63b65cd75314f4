//! One test (at least) per rule of the upsert contract, on real Delta tables on disk.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
    Int64Array, TimestampMicrosecondArray,
};
use deltalite::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use deltalite::write::WriteOptions;
use deltalite::{
    DeltaLiteError, ErrorKind, OmittedColumns, OnDuplicate, PruneStrategy, UpsertOptions,
};

fn i64s(v: &[Option<i64>]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

fn schema_id_day_val() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ])
}

async fn seeded(
    dir: &tempfile::TempDir,
    rows: RecordBatchRows,
) -> (String, deltalite::DeltaLiteTable) {
    let uri = tmp_uri(dir, "t");
    let mut table = create(&uri, &schema_id_day_val(), &["day"]).await;
    if !rows.is_empty() {
        table
            .append([Ok(id_day_val(&rows))], &WriteOptions::default())
            .await
            .unwrap();
    }
    (uri, table)
}

type RecordBatchRows = Vec<(Option<i64>, Option<&'static str>, Option<&'static str>)>;

fn id_day_val(rows: &RecordBatchRows) -> deltalite::arrow::array::RecordBatch {
    batch(vec![
        ("id", i64s(&rows.iter().map(|r| r.0).collect::<Vec<_>>())),
        (
            "day",
            strings(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        ),
        (
            "val",
            strings(&rows.iter().map(|r| r.2).collect::<Vec<_>>()),
        ),
    ])
}

fn expect(rows: &[(&str, &str, &str)]) -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = rows
        .iter()
        .map(|(a, b, c)| vec![a.to_string(), b.to_string(), c.to_string()])
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn composite_keys_match_on_every_column() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let b0 = batch(vec![
        ("a", i64s(&[Some(1), Some(1), Some(2)])),
        ("b", strings(&[Some("x"), Some("y"), Some("x")])),
        ("v", i64s(&[Some(10), Some(20), Some(30)])),
    ]);
    t.append([Ok(b0)], &WriteOptions::default()).await.unwrap();
    let b1 = batch(vec![
        ("a", i64s(&[Some(1), Some(2)])),
        ("b", strings(&[Some("y"), Some("y")])),
        ("v", i64s(&[Some(21), Some(40)])),
    ]);
    let s = upsert(&mut t, &b1, &UpsertOptions::new(["a", "b"]))
        .await
        .unwrap();
    assert_eq!((s.rows_updated, s.rows_inserted), (1, 1));
    assert_eq!(
        rows(&uri).await,
        expect(&[
            ("1", "x", "10"),
            ("1", "y", "21"),
            ("2", "x", "30"),
            ("2", "y", "40")
        ])
    );
}

#[tokio::test]
async fn null_keys_never_match_and_are_never_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir, vec![(None, Some("d"), Some("stored"))]).await;
    let b = id_day_val(&vec![
        (None, Some("d"), Some("n1")),
        (None, Some("d"), Some("n2")),
    ]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(s.null_pk_rows, 2);
    assert_eq!(s.rows_inserted, 2);
    assert_eq!(s.rows_updated, 0);
    assert_eq!(
        s.files_removed, 0,
        "a NULL key cannot select a file to rewrite"
    );
    assert_eq!(
        rows(&uri).await,
        expect(&[
            ("NULL", "d", "n1"),
            ("NULL", "d", "n2"),
            ("NULL", "d", "stored")
        ])
    );
}

#[tokio::test]
async fn float_keys_compare_by_total_order() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("k", DataType::Float64, true),
        Field::new("v", DataType::Int64, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let f = |v: &[f64]| Arc::new(Float64Array::from(v.to_vec())) as ArrayRef;
    t.append(
        [Ok(batch(vec![
            ("k", f(&[0.0, f64::NAN, 1.5])),
            ("v", i64s(&[Some(1), Some(2), Some(3)])),
        ]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let b = batch(vec![
        ("k", f(&[-0.0, f64::NAN])),
        ("v", i64s(&[Some(10), Some(20)])),
    ]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["k"]))
        .await
        .unwrap();
    assert_eq!(s.rows_updated, 1, "NaN == NaN matches: {s:?}");
    assert_eq!(s.rows_inserted, 1, "-0.0 != 0.0 inserts: {s:?}");
    let got = rows(&uri).await;
    assert_eq!(got.len(), 4);
    assert!(
        got.contains(&vec!["NaN".to_string(), "20".to_string()]),
        "{got:?}"
    );
    assert!(
        got.contains(&vec!["0.0".to_string(), "1".to_string()]),
        "{got:?}"
    );
    assert!(
        got.contains(&vec!["-0.0".to_string(), "10".to_string()]),
        "{got:?}"
    );
}

#[tokio::test]
async fn duplicate_keys_are_refused_by_default_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir, vec![(Some(1), Some("d1"), Some("a"))]).await;
    let before = t.version();
    let b = id_day_val(&vec![
        (Some(7), Some("d2"), Some("x")),
        (Some(7), Some("d2"), Some("y")),
        (Some(7), Some("d2"), Some("z")),
    ]);
    let err = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap_err();
    match &err {
        DeltaLiteError::DuplicateKeys { partition, count } => {
            assert_eq!(partition, "day=d2");
            assert_eq!(*count, 2);
            assert!(
                err.to_string().starts_with(
                    "duplicate primary-key tuple(s) in source: 2 duplicate row(s) in \
                     partition day=d2;"
                ),
                "{err}"
            );
        }
        other => panic!("expected DuplicateKeys, got {other:?}"),
    }
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    t.reload().await.unwrap();
    assert_eq!(t.version(), before);
    assert_eq!(rows(&uri).await, expect(&[("1", "d1", "a")]));
    assert!(
        !dir.path().join("t/day=d2").exists(),
        "no file was written for the refused batch"
    );
}

#[tokio::test]
async fn on_duplicate_last_keeps_the_last_row() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir, vec![]).await;
    let b = id_day_val(&vec![
        (Some(7), Some("d"), Some("x")),
        (Some(7), Some("d"), Some("y")),
    ]);
    let mut o = UpsertOptions::new(["id"]);
    o.on_duplicate = OnDuplicate::Last;
    let s = upsert(&mut t, &b, &o).await.unwrap();
    assert_eq!((s.rows_inserted, s.duplicates_resolved), (1, 1));
    assert_eq!(rows(&uri).await, expect(&[("7", "d", "y")]));
}

fn cursor_schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("c1", DataType::Int64, true),
        Field::new("c2", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ])
}

fn cursor_batch(
    rows: &[(i64, Option<i64>, Option<i64>, &str)],
) -> deltalite::arrow::array::RecordBatch {
    batch(vec![
        (
            "id",
            i64s(&rows.iter().map(|r| Some(r.0)).collect::<Vec<_>>()),
        ),
        ("c1", i64s(&rows.iter().map(|r| r.1).collect::<Vec<_>>())),
        ("c2", i64s(&rows.iter().map(|r| r.2).collect::<Vec<_>>())),
        (
            "v",
            strings(&rows.iter().map(|r| Some(r.3)).collect::<Vec<_>>()),
        ),
    ])
}

fn cursor_opts() -> UpsertOptions {
    let mut o = UpsertOptions::new(["id"]);
    o.cursor_fields = vec!["c1".into(), "c2".into()];
    o
}

#[tokio::test]
async fn in_batch_duplicates_resolve_by_greatest_cursor_null_lowest_ties_last() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &cursor_schema(), &[]).await;
    let b = cursor_batch(&[
        (1, Some(5), None, "old"),
        (1, Some(9), None, "new"),
        (1, Some(2), Some(100), "older"),
        (2, None, Some(1), "null-first"),
        (2, Some(0), None, "nonnull-wins"),
        (3, Some(4), Some(4), "tie-a"),
        (3, Some(4), Some(4), "tie-b"),
    ]);
    let s = upsert(&mut t, &b, &cursor_opts()).await.unwrap();
    assert_eq!(s.duplicates_resolved, 4);
    let got: Vec<String> = rows(&uri).await.into_iter().map(|r| r[3].clone()).collect();
    assert_eq!(got, vec!["new", "nonnull-wins", "tie-b"]);
}

#[tokio::test]
async fn stored_rows_are_replaced_only_by_strictly_newer_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &cursor_schema(), &[]).await;
    let stored = cursor_batch(&[
        (1, Some(5), Some(5), "s1"), // equal incoming: stays
        (2, Some(5), None, "s2"),    // NULL incoming c1: stays
        (3, None, Some(1), "s3"),    // (NULL, 2) beats (NULL, 1)
        (4, Some(5), Some(5), "s4"), // greater second position wins
        (5, Some(5), Some(5), "s5"), // smaller: stays
        (6, None, None, "s6"),       // non-NULL beats NULL
    ]);
    t.append([Ok(stored)], &WriteOptions::default())
        .await
        .unwrap();
    let incoming = cursor_batch(&[
        (1, Some(5), Some(5), "i1"),
        (2, None, Some(99), "i2"),
        (3, None, Some(2), "i3"),
        (4, Some(5), Some(6), "i4"),
        (5, Some(4), Some(99), "i5"),
        (6, Some(0), None, "i6"),
        (7, None, None, "i7"),
    ]);
    let s = upsert(&mut t, &incoming, &cursor_opts()).await.unwrap();
    assert_eq!(s.rows_dropped_by_cursor, 3, "{s:?}");
    assert_eq!(s.rows_updated, 3, "{s:?}");
    assert_eq!(s.rows_inserted, 1, "{s:?}");
    assert_eq!(
        s.rows_updated + s.rows_inserted + s.rows_dropped_by_cursor,
        s.source_rows - s.duplicates_resolved
    );
    let got: Vec<String> = rows(&uri).await.into_iter().map(|r| r[3].clone()).collect();
    assert_eq!(got, vec!["s1", "s2", "i3", "i4", "s5", "i6", "i7"]);
}

#[tokio::test]
async fn a_batch_that_loses_everywhere_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &cursor_schema(), &[]).await;
    t.append(
        [Ok(cursor_batch(&[(1, Some(9), None, "s")]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let before = t.version();
    let s = upsert(
        &mut t,
        &cursor_batch(&[(1, Some(1), None, "i")]),
        &cursor_opts(),
    )
    .await
    .unwrap();
    assert_eq!(
        (s.rows_dropped_by_cursor, s.files_removed, s.files_added),
        (1, 0, 0)
    );
    assert_eq!(s.files_probed, 1);
    assert_eq!(s.version, before);
}

fn wide_schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("a", DataType::Utf8, true),
        Field::new("b", DataType::Utf8, true),
    ])
}

async fn wide_table(dir: &tempfile::TempDir) -> (String, deltalite::DeltaLiteTable) {
    let uri = tmp_uri(dir, "t");
    let mut t = create(&uri, &wide_schema(), &[]).await;
    let b = batch(vec![
        ("id", i64s(&[Some(1), Some(2)])),
        ("a", strings(&[Some("a1"), Some("a2")])),
        ("b", strings(&[Some("b1"), Some("b2")])),
    ]);
    t.append([Ok(b)], &WriteOptions::default()).await.unwrap();
    (uri, t)
}

#[tokio::test]
async fn omitted_columns_null_replaces_the_whole_row() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = wide_table(&dir).await;
    let b = batch(vec![
        ("id", i64s(&[Some(1), Some(3)])),
        ("a", strings(&[Some("A1"), Some("A3")])),
    ]);
    upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(
        rows(&uri).await,
        expect(&[("1", "A1", "NULL"), ("2", "a2", "b2"), ("3", "A3", "NULL")])
    );
}

#[tokio::test]
async fn omitted_columns_keep_updates_only_carried_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = wide_table(&dir).await;
    let b = batch(vec![
        ("id", i64s(&[Some(1), Some(3)])),
        ("a", strings(&[Some("A1"), Some("A3")])),
    ]);
    let mut o = UpsertOptions::new(["id"]);
    o.omitted_columns = OmittedColumns::Keep;
    upsert(&mut t, &b, &o).await.unwrap();
    assert_eq!(
        rows(&uri).await,
        expect(&[("1", "A1", "b1"), ("2", "a2", "b2"), ("3", "A3", "NULL")])
    );
}

#[tokio::test]
async fn keep_with_only_keys_leaves_matches_alone_and_inserts_new_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = wide_table(&dir).await;
    let b = batch(vec![("id", i64s(&[Some(2), Some(9)]))]);
    let mut o = UpsertOptions::new(["id"]);
    o.omitted_columns = OmittedColumns::Keep;
    let s = upsert(&mut t, &b, &o).await.unwrap();
    assert_eq!(s.files_removed, 0, "nothing to rewrite: {s:?}");
    assert_eq!((s.rows_updated, s.rows_inserted), (1, 1));
    assert_eq!(
        rows(&uri).await,
        expect(&[("1", "a1", "b1"), ("2", "a2", "b2"), ("9", "NULL", "NULL")])
    );
}

#[tokio::test]
async fn unknown_columns_and_lossy_casts_are_schema_mismatches() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = wide_table(&dir).await;
    let before = t.version();
    let b = batch(vec![
        ("id", i64s(&[Some(1)])),
        ("nope", strings(&[Some("x")])),
    ]);
    let err = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch);
    assert!(err.to_string().contains("nope"), "{err}");

    let b = batch(vec![(
        "id",
        Arc::new(Float64Array::from(vec![1.5])) as ArrayRef,
    )]);
    let err = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch);
    assert!(err.to_string().contains("\"id\""), "{err}");

    // Lossless casts are applied: int32 and whole floats into int64.
    let b = batch(vec![
        ("id", Arc::new(Int32Array::from(vec![2])) as ArrayRef),
        ("a", strings(&[Some("cast")])),
    ]);
    upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    t.reload().await.unwrap();
    assert_eq!(t.version(), before + 1);
    assert!(
        rows(&uri)
            .await
            .contains(&vec!["2".into(), "cast".into(), "NULL".into()])
    );
}

#[tokio::test]
async fn missing_keys_and_partition_mismatch_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_uri, mut t) = seeded(&dir, vec![(Some(1), Some("d"), Some("a"))]).await;
    let b = batch(vec![
        ("id", i64s(&[Some(1)])),
        ("val", strings(&[Some("x")])),
    ]);
    let err = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("day"),
        "partition column required: {err}"
    );
    // A partition hint naming other columns than the table's is refused as bad input.
    let mut o = UpsertOptions::new(["id"]);
    o.partition_key = Some(vec!["val".into()]);
    let b = id_day_val(&vec![(Some(1), Some("d"), Some("x"))]);
    let err = upsert(&mut t, &b, &o).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "invalid argument: table is partitioned by 'day' but upsert was called with \
         partition_key 'val'"
    );
    let err = upsert(&mut t, &b, &UpsertOptions::new(["missing"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch);
}

/// The table's metadata decides the partitioning: a partition hint on an unpartitioned
/// table is dropped, and identity is the key alone over the whole table (PostHog's
/// deltalite and its MERGE fallback do the same).
#[tokio::test]
async fn a_partition_hint_on_an_unpartitioned_table_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema_id_day_val(), &[]).await;
    t.append(
        [Ok(id_day_val(&vec![
            (Some(1), Some("d1"), Some("a")),
            (Some(2), Some("d1"), Some("b")),
        ]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let mut o = UpsertOptions::new(["id"]);
    o.partition_key = Some(vec!["day".into()]);
    let s = upsert(
        &mut t,
        &id_day_val(&vec![
            (Some(1), Some("d2"), Some("a2")),
            (Some(3), Some("d2"), Some("c")),
        ]),
        &o,
    )
    .await
    .unwrap();
    assert_eq!(
        (s.partitions_touched, s.rows_updated, s.rows_inserted),
        (1, 1, 1)
    );
    assert_eq!(
        rows(&uri).await,
        expect(&[("1", "d2", "a2"), ("2", "d1", "b"), ("3", "d2", "c")])
    );
}

#[tokio::test]
async fn a_key_in_a_new_partition_is_inserted_and_the_old_row_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir, vec![(Some(1), Some("d1"), Some("a"))]).await;
    let s = upsert(
        &mut t,
        &id_day_val(&vec![(Some(1), Some("d2"), Some("b"))]),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!((s.rows_inserted, s.rows_updated), (1, 0));
    assert_eq!(
        rows(&uri).await,
        expect(&[("1", "d1", "a"), ("1", "d2", "b")])
    );
}

#[tokio::test]
async fn multi_column_partitions_and_null_partition_values() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("region", DataType::Utf8, true),
        Field::new("year", DataType::Int32, true),
        Field::new("v", DataType::Utf8, true),
    ]);
    let mut t = create(&uri, &schema, &["region", "year"]).await;
    let mk = |ids: &[i64], regions: &[Option<&str>], years: &[Option<i32>], vs: &[&str]| {
        batch(vec![
            (
                "id",
                i64s(&ids.iter().map(|i| Some(*i)).collect::<Vec<_>>()),
            ),
            ("region", strings(regions)),
            (
                "year",
                Arc::new(Int32Array::from(years.to_vec())) as ArrayRef,
            ),
            (
                "v",
                strings(&vs.iter().map(|v| Some(*v)).collect::<Vec<_>>()),
            ),
        ])
    };
    t.append(
        [Ok(mk(
            &[1, 1, 1],
            &[Some("eu"), Some("eu"), None],
            &[Some(2024), Some(2025), None],
            &["a", "b", "c"],
        ))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let s = upsert(
        &mut t,
        &mk(
            &[1, 1],
            &[Some("eu"), None],
            &[Some(2025), None],
            &["B", "C"],
        ),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(
        (s.rows_updated, s.rows_inserted, s.partitions_touched),
        (2, 0, 2)
    );
    assert_eq!(s.files_carried_over, 0);
    let got = rows(&uri).await;
    assert_eq!(
        got,
        vec![
            vec!["1", "NULL", "NULL", "C"],
            vec!["1", "eu", "2024", "a"],
            vec!["1", "eu", "2025", "B"],
        ]
    );
}

#[tokio::test]
async fn unmatched_files_are_carried_over_and_prune_none_rewrites_them() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir, vec![]).await;
    // Three files in one partition with disjoint key ranges.
    for base in [0i64, 100, 200] {
        let b = id_day_val(
            &(base..base + 3)
                .map(|i| (Some(i), Some("d"), Some("v")))
                .collect(),
        );
        t.append([Ok(b)], &WriteOptions::default()).await.unwrap();
    }
    let b = id_day_val(&vec![(Some(101), Some("d"), Some("new"))]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(
        s.files_probed, 1,
        "log statistics rule out two files: {s:?}"
    );
    assert_eq!((s.files_removed, s.files_carried_over), (1, 2), "{s:?}");
    assert_eq!(s.rows_copied, 2);

    // A key inside a file's [min, max] but absent: the probe rules the file out.
    let b = id_day_val(&vec![(Some(150), Some("d"), Some("gap"))]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!((s.files_removed, s.rows_inserted), (0, 1), "{s:?}");

    // Statistics alone: the one file whose bounds admit the key is rewritten, unprobed
    // (files: [0, 2], [100, 102], [150, 150], [200, 202]).
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.prune_strategy = PruneStrategy::Stats;
    let b = id_day_val(&vec![(Some(201), Some("d"), Some("stats"))]);
    let s = upsert(&mut t, &b, &o).await.unwrap();
    assert_eq!(
        (
            s.files_probed,
            s.files_removed,
            s.files_carried_over,
            s.rows_updated,
            s.rows_copied
        ),
        (0, 1, 3, 1, 2),
        "{s:?}"
    );

    let mut o = UpsertOptions::new(["id"]);
    o.knobs.prune_strategy = PruneStrategy::None;
    let b = id_day_val(&vec![(Some(1), Some("d"), Some("x"))]);
    let s = upsert(&mut t, &b, &o).await.unwrap();
    assert_eq!(s.files_probed, 0);
    assert_eq!(
        s.files_carried_over, 0,
        "prune none rewrites every file of the partition"
    );
    let got = rows(&uri).await;
    assert_eq!(got.len(), 10, "9 seeded + 1 inserted");
    assert!(got.contains(&vec!["1".into(), "d".into(), "x".into()]));
}

#[tokio::test]
async fn the_only_match_in_the_last_row_group_of_a_large_file() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let n = 200_000i64;
    let ids: Vec<Option<i64>> = (0..n).map(Some).collect();
    let vals: Vec<Option<String>> = (0..n)
        .map(|i| Some(format!("value-{i:08}-padding-padding")))
        .collect();
    let b = batch(vec![
        ("id", i64s(&ids)),
        (
            "v",
            Arc::new(deltalite::arrow::array::StringArray::from(vals)) as ArrayRef,
        ),
    ]);
    // Small row groups so one file has many of them.
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.max_buffered_bytes = 1;
    o.knobs.read_batch_size = 1024;
    upsert(&mut t, &b, &o).await.unwrap();
    let files = t.files().unwrap();
    assert_eq!(files.len(), 1);
    let path = dir.path().join("t").join(&files[0].path);
    let meta = deltalite::parquet::file::reader::SerializedFileReader::new(
        std::fs::File::open(&path).unwrap(),
    )
    .unwrap();
    use deltalite::parquet::file::reader::FileReader;
    assert!(
        meta.metadata().num_row_groups() > 2,
        "want several row groups"
    );

    let update = batch(vec![
        ("id", i64s(&[Some(n - 1)])),
        ("v", strings(&[Some("last")])),
    ]);
    // The writer cached the file's keys; this is about the probe, so read it.
    o.knobs.use_probe_cache = false;
    let s = upsert(&mut t, &update, &o).await.unwrap();
    assert_eq!(
        (s.files_probed, s.files_removed, s.rows_updated),
        (1, 1, 1),
        "{s:?}"
    );
    assert_eq!(s.rows_copied as i64, n - 1);
    let got = rows(&uri).await;
    assert_eq!(got.len() as i64, n);
    assert!(got.contains(&vec![(n - 1).to_string(), "last".to_string()]));
}

/// One row group of many pages (20,000 rows per page by default): the probe reads only
/// the pages whose page-index min/max admit a source key, and still finds every match.
#[tokio::test]
async fn the_probe_skips_pages_by_the_page_index() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let n = 200_000i64;
    let ids: Vec<Option<i64>> = (0..n).map(Some).collect();
    t.append(
        [Ok(batch(vec![("id", i64s(&ids)), ("v", i64s(&ids))]))],
        &deltalite::write::WriteOptions::default(),
    )
    .await
    .unwrap();
    let path = dir.path().join("t").join(&t.files().unwrap()[0].path);
    let reader = with_page_index(&path);
    use deltalite::parquet::file::reader::FileReader;
    assert_eq!(reader.metadata().num_row_groups(), 1);
    let pages = reader.metadata().offset_index().unwrap()[0][0]
        .page_locations()
        .len();
    assert!(pages >= 4, "want a row group of many pages, got {pages}");

    // Keys in two pages (ids 5 and 150,000) plus one absent key inside the range (a
    // NULL key never matches and must not select pages either).
    let update = batch(vec![
        ("id", i64s(&[Some(5), Some(150_000), None])),
        ("v", i64s(&[Some(-1), Some(-2), Some(-3)])),
    ]);
    let s = upsert(&mut t, &update, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(
        s.pages_skipped,
        pages - 2,
        "2 of {pages} pages hold a key: {s:?}"
    );
    assert_eq!(
        (s.rows_updated, s.rows_inserted, s.files_removed),
        (2, 1, 1),
        "{s:?}"
    );
    let got = rows(&uri).await;
    assert_eq!(got.len() as i64, n + 1);
    assert!(got.contains(&vec!["5".into(), "-1".into()]));
    assert!(got.contains(&vec!["150000".into(), "-2".into()]));
    assert!(got.contains(&vec!["1".into(), "1".into()]));
    // A key beyond every page: all pages skipped, nothing rewritten.
    let insert = batch(vec![("id", i64s(&[Some(n + 10)])), ("v", i64s(&[Some(0)]))]);
    let s = upsert(&mut t, &insert, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!((s.files_removed, s.rows_inserted), (0, 1), "{s:?}");
}

/// A reader of the Parquet file at `path` that loads its page index.
fn with_page_index(
    path: &std::path::Path,
) -> deltalite::parquet::file::reader::SerializedFileReader<std::fs::File> {
    deltalite::parquet::file::reader::SerializedFileReader::new_with_options(
        std::fs::File::open(path).unwrap(),
        deltalite::parquet::file::serialized_reader::ReadOptionsBuilder::new()
            .with_page_index()
            .build(),
    )
    .unwrap()
}

/// (pages, has a dictionary page) of each column of the only row group of `path`.
fn column_layout(path: &std::path::Path) -> Vec<(usize, bool)> {
    use deltalite::parquet::file::reader::FileReader;
    let reader = with_page_index(path);
    let meta = reader.metadata();
    assert_eq!(meta.num_row_groups(), 1);
    let offsets = &meta.offset_index().unwrap()[0];
    meta.row_group(0)
        .columns()
        .iter()
        .zip(offsets)
        .map(|(c, o)| {
            (
                o.page_locations().len(),
                c.dictionary_page_offset().is_some(),
            )
        })
        .collect()
}

/// Upserts write their key column in small pages without a dictionary, so a probe of a
/// few keys reads a few pages of a large file, and compaction keeps that layout.
#[tokio::test]
async fn keys_written_by_upserts_get_small_pages_that_the_probe_skips() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let n = 200_000i64;
    let ids: Vec<Option<i64>> = (0..n).map(Some).collect();
    let load = batch(vec![("id", i64s(&ids)), ("v", i64s(&ids))]);
    upsert(&mut t, &load, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    let only_file = |t: &deltalite::DeltaLiteTable| {
        let files = t.files().unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        dir.path().join("t").join(&files[0].path)
    };
    let layout = column_layout(&only_file(&t));
    // 200,000 keys of 8 bytes in pages of 8 KiB: about 200 pages and no dictionary; the
    // payload keeps parquet's defaults (pages of at most 20,000 rows).
    let (key_pages, key_dictionary) = layout[0];
    assert!((150..=260).contains(&key_pages), "{layout:?}");
    assert!(!key_dictionary, "{layout:?}");
    assert!(layout[1].0 <= 10, "{layout:?}");

    // Three stored keys far apart and one new key: three pages are read.
    let keys = [7i64, 99_999, 199_998, n + 5];
    let update = batch(vec![
        ("id", i64s(&keys.map(Some))),
        ("v", i64s(&keys.map(|k| Some(-k)))),
    ]);
    // The writer cached the file's keys; this is about the probe, so read it.
    let mut probing = UpsertOptions::new(["id"]);
    probing.knobs.use_probe_cache = false;
    let s = upsert(&mut t, &update, &probing).await.unwrap();
    assert_eq!(s.pages_skipped, key_pages - 3, "{s:?}");
    assert_eq!((s.rows_updated, s.rows_inserted), (3, 1), "{s:?}");
    let got = rows(&uri).await;
    assert_eq!(got.len() as i64, n + 1);
    for k in keys {
        assert!(got.contains(&vec![k.to_string(), (-k).to_string()]), "{k}");
    }
    assert!(got.contains(&vec!["8".into(), "8".into()]));

    // Compaction inherits the layout from its input.
    let c = t
        .compact(&deltalite::compact::CompactOptions::default())
        .await
        .unwrap();
    assert_eq!((c.files_removed, c.files_added), (2, 1), "{c:?}");
    let layout = column_layout(&only_file(&t));
    assert!(layout[0].0 >= 150 && !layout[0].1, "{layout:?}");
    assert_eq!(rows(&uri).await, got);
}

/// Append `b` as one file written by delta-rs's own writer with the given Parquet
/// properties (row group and page sizes the engine's writer would not choose; no dedup).
async fn append_with_delta_rs(
    uri: &str,
    b: deltalite::arrow::array::RecordBatch,
    props: deltalite::parquet::file::properties::WriterProperties,
) {
    use deltalite::deltalake::writer::{DeltaWriter, RecordBatchWriter};
    let mut table = deltalite::deltalake::DeltaTableBuilder::from_url(
        deltalite::table::table_url(uri).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    table.load().await.unwrap();
    let mut writer = RecordBatchWriter::for_table(&table)
        .unwrap()
        .with_writer_properties(props);
    writer.write(b).await.unwrap();
    writer.flush_and_commit(&mut table).await.unwrap();
}

/// Row groups of `rows_per_group` rows, pages of `rows_per_page` rows.
fn small_groups_and_pages(
    rows_per_group: usize,
    rows_per_page: usize,
) -> deltalite::parquet::file::properties::WriterProperties {
    deltalite::parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .set_data_page_row_count_limit(rows_per_page)
        .set_write_batch_size(rows_per_page)
        .build()
}

/// (row groups, pages per row group of the first column) of the table's only file.
async fn file_layout(dir: &tempfile::TempDir, t: &deltalite::DeltaLiteTable) -> (usize, usize) {
    use deltalite::parquet::file::reader::FileReader;
    let files = t.files().unwrap();
    assert_eq!(files.len(), 1);
    let path = dir.path().join("t").join(&files[0].path);
    let reader = with_page_index(&path);
    let meta = reader.metadata();
    let pages = meta.offset_index().unwrap()[0][0].page_locations().len();
    (meta.num_row_groups(), pages)
}

/// The rewrite replaces the stored rows the probe found by their position in the file.
/// Matches in a middle page of a middle row group and in the last row group (its last
/// row included), with whole row groups and pages skipped by the probe and rewrite
/// slices that align with neither: every other row must come back unchanged.
#[tokio::test]
async fn replaced_rows_are_found_by_position_across_row_groups_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let n = 5_000i64;
    let stored = batch(vec![
        ("id", i64s(&(0..n).map(Some).collect::<Vec<_>>())),
        (
            "v",
            Arc::new(deltalite::arrow::array::StringArray::from(
                (0..n).map(|i| format!("old-{i}")).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ]);
    append_with_delta_rs(&uri, stored.clone(), small_groups_and_pages(1_000, 100)).await;
    t.reload().await.unwrap();
    let (groups, pages) = file_layout(&dir, &t).await;
    assert_eq!((groups, pages), (5, 10), "5 row groups of 10 pages");

    // 2,555 and 2,599: inside and at the end of page 5 of row group 2; 4,000 and 4,999:
    // first and last row of the last row group; 7,000: a new key.
    let keys = [2_555i64, 2_599, 4_000, 4_999, 7_000];
    let update = batch(vec![
        ("id", i64s(&keys.map(Some))),
        ("v", strings(&keys.map(|_| Some("new")))),
    ]);
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.read_batch_size = 333;
    let s = upsert(&mut t, &update, &o).await.unwrap();
    // Row groups 2 and 4 are read, of their 20 pages only 5, 0 and 9.
    assert_eq!((s.pages_skipped, s.files_removed), (17, 1), "{s:?}");
    assert_eq!((s.rows_updated, s.rows_inserted), (4, 1), "{s:?}");
    assert_eq!(s.rows_copied as i64, n - 4, "{s:?}");

    let mut expected = batch_rows(&stored);
    for row in expected.iter_mut() {
        if keys.contains(&row[0].parse().unwrap()) {
            row[1] = "new".into();
        }
    }
    expected.push(vec!["7000".into(), "new".into()]);
    expected.sort();
    assert_eq!(rows(&uri).await, expected);
}

/// A file written by another writer may hold a key twice (here 2 in two row groups, 5
/// twice in one): every stored copy is replaced, as MERGE would, and counted in
/// `rows_replaced` (the stored rows) apart from `rows_updated` (the source rows).
#[tokio::test]
async fn every_stored_copy_of_a_key_is_replaced() {
    // With a probe the rewrite replaces rows by the probe's positions; without one it
    // decides per row: all must agree.
    for strategy in [
        PruneStrategy::Probe,
        PruneStrategy::Stats,
        PruneStrategy::None,
    ] {
        every_stored_copy_of_a_key_is_replaced_with(strategy).await;
    }
}

async fn every_stored_copy_of_a_key_is_replaced_with(strategy: PruneStrategy) {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = seeded(&dir, vec![]).await.1;
    let stored: RecordBatchRows = vec![
        (Some(1), Some("d"), Some("a")),
        (Some(2), Some("d"), Some("b")),
        (Some(3), Some("d"), Some("c")),
        (Some(2), Some("d"), Some("b-again")),
        (Some(5), Some("d"), Some("f")),
        (Some(5), Some("d"), Some("f-again")),
        (Some(4), Some("d"), Some("e")),
        (Some(6), Some("d"), Some("g")),
    ];
    append_with_delta_rs(&uri, id_day_val(&stored), small_groups_and_pages(3, 1)).await;
    t.reload().await.unwrap();
    assert_eq!(rows(&uri).await.len(), 8);

    let update = id_day_val(&vec![
        (Some(2), Some("d"), Some("new2")),
        (Some(5), Some("d"), Some("new5")),
    ]);
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.prune_strategy = strategy;
    let s = upsert(&mut t, &update, &o).await.unwrap();
    assert_eq!(
        (
            s.rows_updated,
            s.rows_replaced,
            s.rows_inserted,
            s.rows_copied
        ),
        (2, 4, 0, 4),
        "{strategy:?}: {s:?}"
    );
    assert_eq!(
        rows(&uri).await,
        expect(&[
            ("1", "d", "a"),
            ("2", "d", "new2"),
            ("2", "d", "new2"),
            ("3", "d", "c"),
            ("4", "d", "e"),
            ("5", "d", "new5"),
            ("5", "d", "new5"),
            ("6", "d", "g"),
        ])
    );
}

/// Cursor mode: in one file of several row groups, the matches whose stored cursor is
/// newer or equal keep their stored row while the winners beside them are replaced.
#[tokio::test]
async fn losers_keep_their_stored_rows_beside_replaced_winners() {
    for strategy in [PruneStrategy::Probe, PruneStrategy::None] {
        losers_keep_their_stored_rows_beside_replaced_winners_with(strategy).await;
    }
}

async fn losers_keep_their_stored_rows_beside_replaced_winners_with(strategy: PruneStrategy) {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &cursor_schema(), &[]).await;
    let n = 3_000i64;
    let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let stored_rows: Vec<(i64, Option<i64>, Option<i64>, &str)> = (0..n)
        .map(|i| (i, Some(10), None, names[i as usize].as_str()))
        .collect();
    let stored = cursor_batch(&stored_rows);
    append_with_delta_rs(&uri, stored.clone(), small_groups_and_pages(700, 50)).await;
    t.reload().await.unwrap();
    assert_eq!(file_layout(&dir, &t).await.0, 5);

    // Winners (cursor 20) and losers (5 older, 10 equal), next to each other.
    let incoming = cursor_batch(&[
        (100, Some(20), None, "w100"),
        (101, Some(5), None, "l101"),
        (1_499, Some(10), None, "l1499"),
        (1_500, Some(20), None, "w1500"),
        (2_998, Some(5), None, "l2998"),
        (2_999, Some(20), None, "w2999"),
    ]);
    let mut o = cursor_opts();
    o.knobs.prune_strategy = strategy;
    let s = upsert(&mut t, &incoming, &o).await.unwrap();
    assert_eq!(
        (s.rows_updated, s.rows_dropped_by_cursor, s.files_removed),
        (3, 3, 1),
        "{s:?}"
    );
    assert_eq!(s.rows_copied as i64, n - 3, "{s:?}");

    let mut expected = batch_rows(&stored);
    for row in expected.iter_mut() {
        let id: i64 = row[0].parse().unwrap();
        if [100, 1_500, 2_999].contains(&id) {
            *row = vec![id.to_string(), "20".into(), "NULL".into(), format!("w{id}")];
        }
    }
    expected.sort();
    assert_eq!(rows(&uri).await, expected);
}

#[tokio::test]
async fn keys_added_by_schema_evolution_are_null_in_old_files() {
    use deltalite::deltalake::kernel::{DataType as KType, PrimitiveType, StructField};
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    t.append(
        [Ok(batch(vec![
            ("id", i64s(&[Some(1)])),
            ("v", strings(&[Some("old")])),
        ]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    // Evolve the schema with delta-rs: add a second key column.
    let dt = t.delta_table().clone();
    dt.add_columns()
        .with_fields([StructField::new(
            "k2",
            KType::Primitive(PrimitiveType::Long),
            true,
        )])
        .await
        .unwrap();
    t.reload().await.unwrap();
    let b = batch(vec![
        ("id", i64s(&[Some(1), Some(1)])),
        ("k2", i64s(&[Some(5), None])),
        ("v", strings(&[Some("new5"), Some("newnull")])),
    ]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id", "k2"]))
        .await
        .unwrap();
    assert_eq!(
        (s.rows_inserted, s.rows_updated, s.files_removed),
        (2, 0, 0),
        "{s:?}"
    );
    let again = batch(vec![
        ("id", i64s(&[Some(1)])),
        ("k2", i64s(&[Some(5)])),
        ("v", strings(&[Some("upd")])),
    ]);
    let s = upsert(&mut t, &again, &UpsertOptions::new(["id", "k2"]))
        .await
        .unwrap();
    assert_eq!((s.rows_updated, s.files_removed), (1, 1), "{s:?}");
    // Table column order is id, v, k2.
    assert_eq!(
        rows(&uri).await,
        expect(&[
            ("1", "newnull", "NULL"),
            ("1", "old", "NULL"),
            ("1", "upd", "5")
        ])
    );
}

#[tokio::test]
async fn typed_keys_and_payloads_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("kd", DataType::Decimal128(20, 2), true),
        Field::new(
            "kt",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("kdate", DataType::Date32, true),
        Field::new("ks", DataType::Utf8, true),
        Field::new("kb", DataType::Binary, true),
        Field::new("kbool", DataType::Boolean, true),
        Field::new("pd", DataType::Decimal128(20, 2), true),
        Field::new(
            "pt",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("pdate", DataType::Date32, true),
        Field::new("pb", DataType::Binary, true),
        Field::new("pbool", DataType::Boolean, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let mk = |n: usize, offset: i64, payload: i64| {
        let dec = |v: Vec<i128>| {
            Arc::new(
                Decimal128Array::from(v)
                    .with_precision_and_scale(20, 2)
                    .unwrap(),
            ) as ArrayRef
        };
        let ts = |v: Vec<i64>| {
            Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC")) as ArrayRef
        };
        let ids: Vec<i64> = (0..n as i64).map(|i| i + offset).collect();
        batch(vec![
            ("kd", dec(ids.iter().map(|i| *i as i128 * 101).collect())),
            (
                "kt",
                ts(ids.iter().map(|i| 1_700_000_000_000_000 + i).collect()),
            ),
            (
                "kdate",
                Arc::new(Date32Array::from(
                    ids.iter().map(|i| 19_000 + *i as i32).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            (
                "ks",
                strings(
                    &ids.iter()
                        .map(|i| Some(if i % 2 == 0 { "even" } else { "odd" }))
                        .collect::<Vec<_>>(),
                ),
            ),
            (
                "kb",
                Arc::new(BinaryArray::from(
                    ids.iter()
                        .map(|i| i.to_le_bytes().to_vec())
                        .collect::<Vec<_>>()
                        .iter()
                        .map(|v| v.as_slice())
                        .collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            (
                "kbool",
                Arc::new(BooleanArray::from(
                    ids.iter().map(|i| i % 3 == 0).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            ("pd", dec(ids.iter().map(|_| payload as i128).collect())),
            ("pt", ts(ids.iter().map(|_| payload).collect())),
            (
                "pdate",
                Arc::new(Date32Array::from(
                    ids.iter().map(|_| payload as i32).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            (
                "pb",
                Arc::new(BinaryArray::from(
                    ids.iter().map(|_| b"p".as_slice()).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            (
                "pbool",
                Arc::new(BooleanArray::from(
                    ids.iter().map(|_| payload % 2 == 0).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
        ])
    };
    t.append([Ok(mk(10, 0, 1))], &WriteOptions::default())
        .await
        .unwrap();
    let keys = ["kd", "kt", "kdate", "ks", "kb", "kbool"];
    let s = upsert(&mut t, &mk(10, 5, 2), &UpsertOptions::new(keys))
        .await
        .unwrap();
    assert_eq!((s.rows_updated, s.rows_inserted), (5, 5), "{s:?}");
    let got = rows(&uri).await;
    assert_eq!(got.len(), 15);
    let updated = got
        .iter()
        .filter(|r| r[10] == "true" && r[6] == "0.02")
        .count();
    assert_eq!(updated, 10, "rows 5..15 carry payload 2: {got:?}");
}

#[tokio::test]
async fn an_error_between_writes_and_commit_leaves_the_table_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(
        &dir,
        vec![
            (Some(1), Some("d"), Some("a")),
            (Some(2), Some("d"), Some("b")),
        ],
    )
    .await;
    let version = t.version();
    let files_before = t.files().unwrap();
    let rows_before = rows(&uri).await;
    let on_disk = |p: &std::path::Path| walk(p);
    let disk_before = on_disk(&dir.path().join("t/day=d"));
    let mut o = UpsertOptions::new(["id"]);
    o.pre_commit_hook = Some(Arc::new(|| {
        Err(DeltaLiteError::Other("injected fault".into()))
    }));
    let b = id_day_val(&vec![
        (Some(1), Some("d"), Some("x")),
        (Some(3), Some("d"), Some("y")),
    ]);
    let err = upsert(&mut t, &b, &o).await.unwrap_err();
    assert!(err.to_string().contains("injected fault"));
    t.reload().await.unwrap();
    assert_eq!(t.version(), version);
    assert_eq!(t.files().unwrap(), files_before);
    assert_eq!(rows(&uri).await, rows_before);
    assert_eq!(
        on_disk(&dir.path().join("t/day=d")),
        disk_before,
        "written files were cleaned up"
    );
}

fn walk(p: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn unsupported_table_features_are_refused_before_writing() {
    // Each message names the feature as the protocol spells it.
    for (key, value, named) in [
        ("delta.appendOnly", "true", "delta.appendOnly"),
        (
            "delta.enableChangeDataFeed",
            "true",
            "delta.enableChangeDataFeed",
        ),
        ("delta.constraints.positive", "id > 0", "CHECK constraint"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let uri = tmp_uri(&dir, "t");
        let created = deltalite::DeltaLiteTable::create(
            &uri,
            HashMap::new(),
            &schema_id_day_val(),
            &[],
            HashMap::from([(key.to_string(), value.to_string())]),
        )
        .await;
        let mut t = match created {
            Ok(t) => t,
            // delta-rs validates constraint expressions at create time; write the
            // property with a raw metadata commit instead, as another engine would.
            Err(_) if key.starts_with("delta.constraints.") => {
                raw_property_table(&uri, key, value).await
            }
            Err(e) => panic!("{key}: {e}"),
        };
        let v = t.version();
        let err = upsert(
            &mut t,
            &id_day_val(&vec![(Some(1), Some("d"), Some("x"))]),
            &UpsertOptions::new(["id"]),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnsupportedTable, "{key}: {err}");
        assert!(err.to_string().contains(named), "{key}: {err}");
        t.reload().await.unwrap();
        assert_eq!(t.version(), v);
    }
}

#[tokio::test]
async fn oversized_sources_and_missing_tables_have_their_own_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (_uri, mut t) = seeded(&dir, vec![]).await;
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.max_source_bytes = 16;
    let err = upsert(
        &mut t,
        &id_day_val(&vec![(Some(1), Some("d"), Some("x"))]),
        &o,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SourceTooLarge);
    assert!(
        err.to_string()
            .contains("exceeds the limit of 16 bytes (the max_source_bytes ceiling)"),
        "{err}"
    );
    let missing = tmp_uri(&dir, "missing");
    let err = deltalite::DeltaLiteTable::open(&missing, HashMap::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TableNotFound);
    assert!(
        !deltalite::DeltaLiteTable::is_deltatable(&missing, HashMap::new())
            .await
            .unwrap()
    );
    assert!(
        deltalite::DeltaLiteTable::is_deltatable(&tmp_uri(&dir, "t"), HashMap::new())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn commit_metadata_and_history_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (_uri, mut t) = seeded(&dir, vec![]).await;
    let mut o = UpsertOptions::new(["id"]);
    o.commit_metadata
        .insert("source".into(), serde_json::json!("my-sync"));
    let s = upsert(
        &mut t,
        &id_day_val(&vec![(Some(1), Some("d"), Some("x"))]),
        &o,
    )
    .await
    .unwrap();
    let history = t.history(Some(1)).await.unwrap();
    assert_eq!(history[0]["source"], "my-sync", "{history:?}");
    assert_eq!(history[0]["operation"], "MERGE");
    assert_eq!(history[0]["version"], s.version);
}

async fn raw_property_table(uri: &str, key: &str, value: &str) -> deltalite::DeltaLiteTable {
    use deltalite::deltalake::kernel::transaction::CommitBuilder;
    use deltalite::deltalake::kernel::{Action, MetadataExt};
    use deltalite::deltalake::protocol::DeltaOperation;
    let mut t = create(uri, &schema_id_day_val(), &[]).await;
    let dt = t.delta_table();
    let metadata = dt
        .snapshot()
        .unwrap()
        .metadata()
        .clone()
        .add_config_key(key.to_string(), value.to_string())
        .unwrap();
    CommitBuilder::default()
        .with_actions(vec![Action::Metadata(metadata)])
        .build(
            Some(dt.snapshot().unwrap()),
            dt.log_store(),
            DeltaOperation::SetTableProperties {
                properties: HashMap::from([(key.to_string(), value.to_string())]),
            },
        )
        .await
        .unwrap();
    t.reload().await.unwrap();
    t
}

#[tokio::test]
async fn a_failure_in_one_partition_leaves_no_files_from_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(
        &dir,
        vec![
            (Some(1), Some("d1"), Some("a")),
            (Some(2), Some("d2"), Some("b")),
        ],
    )
    .await;
    let version = t.version();
    // Corrupt d2's only data file: reading it must fail.
    let d2 = dir.path().join("t/day=d2");
    let victim = std::fs::read_dir(&d2)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let len = std::fs::metadata(&victim).unwrap().len() as usize;
    std::fs::write(&victim, vec![b'x'; len]).unwrap();
    let d1_before = walk(&dir.path().join("t/day=d1"));
    let b = id_day_val(&vec![
        (Some(10), Some("d1"), Some("new")),
        (Some(2), Some("d2"), Some("upd")),
    ]);
    let err = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Failed, "{err}");
    t.reload().await.unwrap();
    assert_eq!(t.version(), version);
    assert_eq!(
        walk(&dir.path().join("t/day=d1")),
        d1_before,
        "d1's insert file was removed"
    );
    let _ = uri;
}

/// A rewrite keeps dictionary encoding where the stored file profited from it and drops
/// it where the stored writer gave up on it (high-cardinality payload): the rewrite does
/// not rebuild and discard a dictionary per page. Likewise it stops compressing a column
/// that Snappy could not shrink in the stored file.
#[tokio::test]
async fn rewrites_follow_the_stored_encoding_choices() {
    use deltalite::parquet::basic::Compression;
    use deltalite::parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("payload", DataType::Utf8, true),
        Field::new("noise", DataType::Binary, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let n = 50_000i64;
    let ids: Vec<Option<i64>> = (0..n).map(Some).collect();
    let kinds: Vec<Option<&str>> = (0..n)
        .map(|i| Some(["a", "b", "c"][i as usize % 3]))
        .collect();
    let payloads: Vec<Option<String>> = (0..n)
        .map(|i| {
            Some(format!(
                "{:064x}",
                (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ))
        })
        .collect();
    let payload_refs: Vec<Option<&str>> = payloads.iter().map(|p| p.as_deref()).collect();
    // 32 random bytes per row: nothing for Snappy to find.
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
    let noise: Vec<Vec<u8>> = (0..n)
        .map(|_| (0..32).map(|_| rand::Rng::random::<u8>(&mut rng)).collect())
        .collect();
    let noise_array = || -> ArrayRef {
        Arc::new(deltalite::arrow::array::BinaryArray::from_iter_values(
            noise.iter().map(|v| v.as_slice()),
        ))
    };
    t.append(
        [Ok(batch(vec![
            ("id", i64s(&ids)),
            ("kind", strings(&kinds)),
            ("payload", strings(&payload_refs)),
            ("noise", noise_array()),
        ]))],
        &deltalite::write::WriteOptions::default(),
    )
    .await
    .unwrap();
    let encodings = |t: &deltalite::DeltaLiteTable| -> Vec<(bool, Compression)> {
        let path = dir.path().join("t").join(&t.files().unwrap()[0].path);
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let rg = reader.metadata().row_group(0);
        (0..4)
            .map(|c| {
                let column = rg.column(c);
                (
                    column.dictionary_page_offset().is_some(),
                    column.compression(),
                )
            })
            .collect()
    };
    let dictionary_pages =
        |t: &deltalite::DeltaLiteTable| -> Vec<bool> { encodings(t).iter().map(|e| e.0).collect() };
    let codecs = |t: &deltalite::DeltaLiteTable| -> Vec<Compression> {
        encodings(t).iter().map(|e| e.1).collect()
    };
    assert_eq!(
        dictionary_pages(&t),
        [true, true, true, true],
        "delta-rs tries a dictionary everywhere"
    );
    assert_eq!(codecs(&t), [Compression::SNAPPY; 4]);
    let update = batch(vec![
        ("id", i64s(&[Some(7)])),
        ("kind", strings(&[Some("b")])),
        ("payload", strings(&[Some("new")])),
        (
            "noise",
            Arc::new(deltalite::arrow::array::BinaryArray::from_iter_values([
                b"n",
            ])),
        ),
    ]);
    let s = upsert(&mut t, &update, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!((s.files_removed, s.files_added, s.rows_updated), (1, 1, 1));
    // payload and noise (50,000 distinct values each) outgrew the dictionary in the
    // stored file and fell back to plain pages; kind fit its own. id fit its dictionary
    // too, but it is the upsert's single key, whose values are unique: the upsert writes
    // it without one (io/writer.rs::lookup_properties).
    assert_eq!(dictionary_pages(&t), [false, true, false, false]);
    // Random bytes did not shrink under Snappy; zero-padded hex digits did.
    assert_eq!(
        codecs(&t),
        [
            Compression::SNAPPY,
            Compression::SNAPPY,
            Compression::SNAPPY,
            Compression::UNCOMPRESSED
        ]
    );
    let got = rows(&uri).await;
    assert_eq!(got.len() as i64, n);
    assert!(got.contains(&vec!["7".into(), "b".into(), "new".into(), "6e".into()]));
    let untouched: Vec<String> = vec![
        "8".into(),
        "c".into(),
        payloads[8].clone().unwrap(),
        noise[8].iter().map(|b| format!("{b:02x}")).collect(),
    ];
    assert!(got.contains(&untouched), "stored rows survive the rewrite");
}
