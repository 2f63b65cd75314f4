//! `delete_column`: delete-marked source rows remove their key under the cursor rule and
//! are never written.

use crate::common;

use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, BooleanArray, Int64Array};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteError, PruneStrategy, UpsertOptions};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("c", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
        Field::new("deleted", DataType::Boolean, true),
    ])
}

type Row<'a> = (i64, Option<i64>, &'a str, Option<bool>);

fn rows_batch(rows: &[Row<'_>]) -> deltalite::arrow::array::RecordBatch {
    batch(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
        ),
        (
            "c",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
        ),
        (
            "v",
            strings(&rows.iter().map(|r| Some(r.2)).collect::<Vec<_>>()),
        ),
        (
            "deleted",
            Arc::new(BooleanArray::from(
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            )),
        ),
    ])
}

fn options(cursor: bool, strategy: PruneStrategy) -> UpsertOptions {
    let mut o = UpsertOptions::new(["id"]);
    if cursor {
        o.cursor_fields = vec!["c".into()];
    }
    o.delete_column = Some("deleted".into());
    o.knobs.prune_strategy = strategy;
    o
}

/// The ids and values left, in id order.
async fn left(uri: &str) -> Vec<(String, String)> {
    rows(uri)
        .await
        .into_iter()
        .map(|r| (r[0].clone(), r[2].clone()))
        .collect()
}

async fn seeded(dir: &tempfile::TempDir) -> (String, deltalite::DeltaLiteTable) {
    let uri = tmp_uri(dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    let stored = rows_batch(&[
        (1, Some(5), "s1", Some(false)),
        (2, Some(5), "s2", None),
        (3, Some(5), "s3", Some(false)),
        (4, Some(5), "s4", Some(false)),
    ]);
    t.append([Ok(stored)], &WriteOptions::default())
        .await
        .unwrap();
    (uri, t)
}

#[tokio::test]
async fn marked_rows_remove_their_key_and_are_never_written() {
    for strategy in [
        PruneStrategy::Probe,
        PruneStrategy::Stats,
        PruneStrategy::None,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (uri, mut t) = seeded(&dir).await;
        let incoming = rows_batch(&[
            (1, None, "gone", Some(true)),  // matched, marked: removed
            (2, None, "kept", Some(false)), // matched, not marked: updated
            (3, None, "null", None),        // a NULL mark is not a delete
            (9, None, "never", Some(true)), // unmatched, marked: not inserted
            (10, None, "new", Some(false)), // unmatched: inserted
        ]);
        let s = upsert(&mut t, &incoming, &options(false, strategy))
            .await
            .unwrap();
        assert_eq!(
            (
                s.rows_deleted,
                s.delete_markers,
                s.rows_updated,
                s.rows_inserted,
                s.rows_copied
            ),
            (1, 2, 2, 1, 1),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(
            s.rows_updated + s.rows_inserted + s.rows_dropped_by_cursor + s.delete_markers,
            s.source_rows - s.duplicates_resolved
        );
        assert_eq!(
            left(&uri).await,
            [("10", "new"), ("2", "kept"), ("3", "null"), ("4", "s4")]
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .to_vec(),
            "{strategy:?}"
        );
    }
}

#[tokio::test]
async fn a_stale_delete_does_not_remove_a_newer_row() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir).await;
    let incoming = rows_batch(&[
        (1, Some(4), "stale", Some(true)), // older than stored c=5: lost
        (2, Some(5), "equal", Some(true)), // equal: lost (only strictly newer wins)
        (3, Some(6), "newer", Some(true)), // newer: removes
    ]);
    let s = upsert(&mut t, &incoming, &options(true, PruneStrategy::Probe))
        .await
        .unwrap();
    assert_eq!((s.rows_deleted, s.rows_dropped_by_cursor), (1, 2), "{s:?}");
    assert_eq!(
        left(&uri).await,
        [("1", "s1"), ("2", "s2"), ("4", "s4")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .to_vec()
    );
}

#[tokio::test]
async fn within_a_batch_the_newest_event_of_a_key_decides() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir).await;
    let incoming = rows_batch(&[
        (1, Some(7), "update", Some(false)),
        (1, Some(8), "delete", Some(true)), // newest: the key goes
        (4, Some(9), "delete", Some(true)),
        (4, Some(10), "revived", Some(false)), // newest: updated, not deleted
    ]);
    let s = upsert(&mut t, &incoming, &options(true, PruneStrategy::Probe))
        .await
        .unwrap();
    assert_eq!((s.rows_deleted, s.rows_updated), (1, 1), "{s:?}");
    assert_eq!(
        left(&uri).await,
        [("2", "s2"), ("3", "s3"), ("4", "revived")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .to_vec()
    );
}

#[tokio::test]
async fn every_stored_copy_of_a_deleted_key_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = seeded(&dir).await;
    t.append(
        [Ok(rows_batch(&[(2, Some(5), "s2-again", None)]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let s = upsert(
        &mut t,
        &rows_batch(&[(2, None, "x", Some(true))]),
        &options(false, PruneStrategy::Probe),
    )
    .await
    .unwrap();
    assert_eq!((s.rows_deleted, s.rows_updated), (2, 0), "{s:?}");
    assert_eq!(left(&uri).await.len(), 3);
}

#[tokio::test]
async fn a_non_boolean_mark_deletes_when_not_null() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("deleted_at", DataType::Utf8, true),
    ]);
    let mut t = create(&uri, &schema, &[]).await;
    let ids = |v: &[i64]| Arc::new(Int64Array::from_iter_values(v.iter().copied())) as ArrayRef;
    t.append(
        [Ok(batch(vec![
            ("id", ids(&[1, 2])),
            ("deleted_at", strings(&[None, None])),
        ]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let mut o = UpsertOptions::new(["id"]);
    o.delete_column = Some("deleted_at".into());
    let s = upsert(
        &mut t,
        &batch(vec![
            ("id", ids(&[1, 2])),
            ("deleted_at", strings(&[Some("2024-01-01"), None])),
        ]),
        &o,
    )
    .await
    .unwrap();
    assert_eq!((s.rows_deleted, s.rows_updated), (1, 1), "{s:?}");
    assert_eq!(
        rows(&uri).await,
        vec![vec!["2".to_string(), "NULL".to_string()]]
    );
}

#[tokio::test]
async fn a_delete_column_must_be_a_plain_column_of_the_table_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut t) = seeded(&dir).await;
    let b = rows_batch(&[(1, None, "x", Some(true))]);
    let mut o = UpsertOptions::new(["id"]);
    o.delete_column = Some("nope".into());
    let e = upsert(&mut t, &b, &o).await.unwrap_err();
    assert!(
        matches!(&e, DeltaLiteError::SchemaMismatch(m) if m == "delete column \"nope\" is not in the table"),
        "{e:?}"
    );
    let mut o = UpsertOptions::new(["id"]);
    o.delete_column = Some("id".into());
    let e = upsert(&mut t, &b, &o).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid argument: delete column \"id\" must not be a partition, key or cursor column"
    );
    let mut o = UpsertOptions::new(["id"]);
    o.delete_column = Some("deleted".into());
    let without = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![1i64])) as ArrayRef),
        ("v", strings(&[Some("x")])),
    ]);
    let e = upsert(&mut t, &without, &o).await.unwrap_err();
    assert!(
        matches!(&e, DeltaLiteError::SchemaMismatch(m) if m == "the batch must carry column \"deleted\" (delete column)"),
        "{e:?}"
    );
}
