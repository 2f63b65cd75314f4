//! Degenerate key layouts must upsert like any other, never panic: keys (or cursors) made
//! only of partition columns (an empty key tuple within the partition), a partition column
//! among several keys, NULL partition values in a key, and empty partitions on either side
//! (an empty batch, a partition without files, a file without rows). Every case runs with
//! and without the probe, and both must leave the same table.

use crate::common;

use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteError, ErrorKind, OnDuplicate, PruneStrategy, UpsertOptions};

const STRATEGIES: [PruneStrategy; 3] = [
    PruneStrategy::Probe,
    PruneStrategy::Stats,
    PruneStrategy::None,
];

fn i64s(v: &[Option<i64>]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

type Row = (Option<i64>, Option<&'static str>, Option<&'static str>);

/// `(id, day, val)` rows; the table is partitioned by `day`.
fn id_day_val(rows: &[Row]) -> RecordBatch {
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

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ])
}

/// A table partitioned by `day` holding `rows`, one append (one file per partition).
async fn table_with(
    dir: &tempfile::TempDir,
    name: &str,
    rows: &[Row],
) -> (String, deltalite::DeltaLiteTable) {
    let uri = tmp_uri(dir, name);
    let mut t = create(&uri, &schema(), &["day"]).await;
    if !rows.is_empty() {
        t.append([Ok(id_day_val(rows))], &WriteOptions::default())
            .await
            .unwrap();
    }
    (uri, t)
}

fn expect(rows: &[(&str, &str, &str)]) -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = rows
        .iter()
        .map(|(a, b, c)| vec![a.to_string(), b.to_string(), c.to_string()])
        .collect();
    v.sort();
    v
}

fn options(keys: &[&str], strategy: PruneStrategy) -> UpsertOptions {
    let mut o = UpsertOptions::new(keys.iter().copied());
    o.knobs.prune_strategy = strategy;
    o
}

/// The issue's case: the primary key is the partition column, so every stored row of the
/// partition holds the source row's key (an empty tuple within the partition). It used to
/// panic in the source preparation ("row index out of bounds" inside arrow-row).
#[tokio::test]
async fn a_key_made_of_the_partition_column_replaces_every_row_of_its_partition() {
    let dir = tempfile::tempdir().unwrap();
    for strategy in STRATEGIES {
        let name = format!("t-{strategy:?}");
        let (uri, mut t) = table_with(
            &dir,
            &name,
            &[
                (Some(1), Some("p1"), Some("a")),
                (Some(2), Some("p1"), Some("b")),
                (Some(3), Some("p2"), Some("c")),
            ],
        )
        .await;
        let v0 = t.version();
        let s = upsert(
            &mut t,
            &id_day_val(&[(Some(9), Some("p1"), Some("z"))]),
            &options(&["day"], strategy),
        )
        .await
        .unwrap();
        assert_eq!(s.version, v0 + 1, "{strategy:?}");
        assert_eq!(
            (
                s.partitions_touched,
                s.files_removed,
                s.files_carried_over,
                s.rows_updated,
                s.rows_replaced,
                s.rows_inserted,
                s.rows_copied,
            ),
            (1, 1, 0, 1, 2, 0, 0),
            "{strategy:?}: {s:?}"
        );
        // Every stored copy of the key is replaced, as MERGE replaces every matching row.
        assert_eq!(
            rows(&uri).await,
            expect(&[("3", "p2", "c"), ("9", "p1", "z"), ("9", "p1", "z")]),
            "{strategy:?}"
        );

        // A partition the table does not have yet: an insert.
        let s = upsert(
            &mut t,
            &id_day_val(&[(Some(7), Some("p3"), Some("new"))]),
            &options(&["day"], strategy),
        )
        .await
        .unwrap();
        assert_eq!((s.rows_updated, s.rows_inserted), (0, 1), "{strategy:?}");
        assert_eq!(rows(&uri).await.len(), 4);
    }
}

/// Two partition columns, both keys: the same, per partition.
#[tokio::test]
async fn keys_made_of_several_partition_columns_match_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("region", DataType::Utf8, true),
    ]);
    for strategy in STRATEGIES {
        let uri = tmp_uri(&dir, &format!("t-{strategy:?}"));
        let mut t = create(&uri, &schema, &["day", "region"]).await;
        let stored = batch(vec![
            ("id", i64s(&[Some(1), Some(2), Some(3)])),
            ("day", strings(&[Some("d1"), Some("d1"), Some("d1")])),
            ("region", strings(&[Some("eu"), Some("us"), Some("us")])),
        ]);
        t.append([Ok(stored)], &WriteOptions::default())
            .await
            .unwrap();
        let update = batch(vec![
            ("id", i64s(&[Some(20), Some(30)])),
            ("day", strings(&[Some("d1"), Some("d2")])),
            ("region", strings(&[Some("us"), Some("us")])),
        ]);
        let s = upsert(&mut t, &update, &options(&["region", "day"], strategy))
            .await
            .unwrap();
        assert_eq!(
            (s.partitions_touched, s.rows_updated, s.rows_inserted),
            (2, 1, 1),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(
            rows(&uri).await,
            expect(&[
                ("1", "d1", "eu"),
                ("20", "d1", "us"),
                ("20", "d1", "us"),
                ("30", "d2", "us"),
            ]),
            "{strategy:?}"
        );
    }
}

/// With an empty key, two rows of one partition are duplicates: refused by default (and
/// nothing is written), the last one wins with `on_duplicate = last`.
#[tokio::test]
async fn two_rows_of_one_partition_under_a_partition_key_are_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = table_with(&dir, "t", &[(Some(1), Some("p1"), Some("a"))]).await;
    let dupes = id_day_val(&[
        (Some(8), Some("p1"), Some("first")),
        (Some(9), Some("p1"), Some("last")),
    ]);
    let err = upsert(&mut t, &dupes, &options(&["day"], PruneStrategy::Probe))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DeltaLiteError::DuplicateKeys { partition, count: 1 } if partition == "day=p1"),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(t.version(), 1);
    assert_eq!(rows(&uri).await, expect(&[("1", "p1", "a")]));

    let mut o = options(&["day"], PruneStrategy::Probe);
    o.on_duplicate = OnDuplicate::Last;
    let s = upsert(&mut t, &dupes, &o).await.unwrap();
    assert_eq!((s.duplicates_resolved, s.rows_updated), (1, 1));
    assert_eq!(rows(&uri).await, expect(&[("9", "p1", "last")]));
}

/// A partition column among other keys: identity is the other keys within the partition.
/// A NULL partition value in a key column is a NULL key: it never matches, so the row is
/// inserted and the NULL partition's stored rows stay.
#[tokio::test]
async fn a_partition_column_among_the_keys_and_null_partition_values() {
    let dir = tempfile::tempdir().unwrap();
    for strategy in STRATEGIES {
        let name = format!("t-{strategy:?}");
        let (uri, mut t) = table_with(
            &dir,
            &name,
            &[
                (Some(1), Some("p1"), Some("a")),
                (Some(1), None, Some("null-part")),
                (Some(2), Some("p2"), Some("b")),
            ],
        )
        .await;
        let update = id_day_val(&[
            (Some(1), Some("p1"), Some("a2")),
            (Some(1), None, Some("null-again")),
            (Some(2), Some("p1"), Some("moved")),
        ]);
        let s = upsert(&mut t, &update, &options(&["id", "day"], strategy))
            .await
            .unwrap();
        assert_eq!(
            (s.rows_updated, s.rows_inserted, s.null_pk_rows),
            (1, 2, 1),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(
            rows(&uri).await,
            expect(&[
                ("1", "NULL", "null-again"),
                ("1", "NULL", "null-part"),
                ("1", "p1", "a2"),
                ("2", "p1", "moved"),
                ("2", "p2", "b"),
            ]),
            "{strategy:?}"
        );

        // Only the partition column as key, NULL partition: still never a match.
        let s = upsert(
            &mut t,
            &id_day_val(&[(Some(5), None, Some("x"))]),
            &options(&["day"], strategy),
        )
        .await
        .unwrap();
        // Without a probe every file of the partition is rewritten (copied as it is).
        let rewritten = match strategy {
            PruneStrategy::None => 2,
            _ => 0,
        };
        assert_eq!(
            (
                s.rows_updated,
                s.rows_inserted,
                s.null_pk_rows,
                s.files_removed
            ),
            (0, 1, 1, rewritten),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(rows(&uri).await.len(), 6);
    }
}

/// A cursor made only of partition columns is equal for every row of a partition: among
/// duplicates the later row wins, and against a stored row it is never newer.
#[tokio::test]
async fn a_cursor_made_of_partition_columns_never_beats_a_stored_row() {
    let dir = tempfile::tempdir().unwrap();
    for strategy in STRATEGIES {
        let name = format!("t-{strategy:?}");
        let (uri, mut t) = table_with(&dir, &name, &[(Some(1), Some("p1"), Some("a"))]).await;
        let mut o = options(&["id"], strategy);
        o.cursor_fields = vec!["day".into()];
        let b = id_day_val(&[
            (Some(1), Some("p1"), Some("loses")),
            (Some(2), Some("p1"), Some("first")),
            (Some(2), Some("p1"), Some("second")),
        ]);
        let s = upsert(&mut t, &b, &o).await.unwrap();
        assert_eq!(
            (
                s.duplicates_resolved,
                s.rows_dropped_by_cursor,
                s.rows_inserted,
                s.rows_updated
            ),
            (1, 1, 1, 0),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(
            rows(&uri).await,
            expect(&[("1", "p1", "a"), ("2", "p1", "second")]),
            "{strategy:?}"
        );
    }
}

/// Empty partitions on the source side: an empty batch touches no partition, with any
/// key layout, partitioned or not.
#[tokio::test]
async fn an_empty_batch_touches_no_partition() {
    let dir = tempfile::tempdir().unwrap();
    let empty = id_day_val(&[]);
    for (name, partitions) in [("partitioned", vec!["day"]), ("flat", vec![])] {
        let uri = tmp_uri(&dir, name);
        let mut t = create(&uri, &schema(), &partitions).await;
        t.append(
            [Ok(id_day_val(&[(Some(1), Some("p1"), Some("a"))]))],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
        for keys in [&["id"][..], &["day"], &["id", "day"]] {
            for strategy in STRATEGIES {
                let s = upsert(&mut t, &empty, &options(keys, strategy))
                    .await
                    .unwrap();
                assert_eq!(
                    (
                        s.partitions_touched,
                        s.source_rows,
                        s.files_added,
                        s.files_removed
                    ),
                    (0, 0, 0, 0),
                    "{name} {keys:?} {strategy:?}"
                );
            }
        }
        assert_eq!(rows(&uri).await, expect(&[("1", "p1", "a")]), "{name}");
    }
}

/// Empty partitions on the table side: a partition whose every file was replaced by a
/// file of no rows, and a partition the table never had.
#[tokio::test]
async fn a_target_partition_holding_only_a_file_without_rows() {
    let dir = tempfile::tempdir().unwrap();
    for strategy in STRATEGIES {
        let name = format!("t-{strategy:?}");
        let (uri, mut t) = table_with(&dir, &name, &[(Some(1), Some("p2"), Some("b"))]).await;
        // A writer that closes a file without rows (delta-rs writes one for an empty
        // batch): Add with numRecords 0 in partition p1.
        write_empty_file(&uri, "p1").await;
        t.reload().await.unwrap();
        assert_eq!(t.files().unwrap().len(), 2);
        for keys in [&["id"][..], &["day"]] {
            let s = upsert(
                &mut t,
                &id_day_val(&[(Some(1), Some("p1"), Some("a"))]),
                &options(keys, strategy),
            )
            .await
            .unwrap();
            assert_eq!(s.rows_inserted + s.rows_updated, 1, "{keys:?} {strategy:?}");
        }
        let mut got = rows(&uri).await;
        got.dedup();
        assert_eq!(
            got,
            expect(&[("1", "p1", "a"), ("1", "p2", "b")]),
            "{strategy:?}"
        );
    }
}

/// Commit, beside the table's other files, a Parquet file of no rows in partition `day`
/// (Add with `numRecords: 0`), as a writer that closed an empty file would.
async fn write_empty_file(uri: &str, day: &str) {
    use deltalite::deltalake::kernel::transaction::CommitBuilder;
    use deltalite::deltalake::kernel::{Action, Add};
    use deltalite::deltalake::protocol::{DeltaOperation, SaveMode};
    use deltalite::parquet::arrow::ArrowWriter;

    let data = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("val", DataType::Utf8, true),
    ]);
    let relative = format!("day={day}/part-00000-empty.parquet");
    let path = dir_of(uri).join(&relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), Arc::new(data), None).unwrap();
    writer.flush().unwrap();
    writer.close().unwrap();
    let add = Add {
        path: relative,
        partition_values: [("day".to_string(), Some(day.to_string()))].into(),
        size: std::fs::metadata(&path).unwrap().len() as i64,
        modification_time: 0,
        data_change: true,
        stats: Some(r#"{"numRecords":0,"minValues":{},"maxValues":{},"nullCount":{}}"#.into()),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    };
    let mut table = deltalite::deltalake::DeltaTableBuilder::from_url(
        deltalite::table::table_url(uri).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    table.load().await.unwrap();
    CommitBuilder::default()
        .with_actions(vec![Action::Add(add)])
        .build(
            Some(table.snapshot().unwrap()),
            table.log_store(),
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
        )
        .await
        .unwrap();
}

fn dir_of(uri: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(uri)
}
