//! Non-nullable columns that must hold a NULL: relaxed in the upsert's own commit
//! (`Nullability::Relax`, the default) or refused (`Nullability::Refuse`, the server).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, ErrorKind, Nullability, UpsertOptions};

fn i64s(v: &[Option<i64>]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

/// `id` (key), `v`, `p` (partition), all non-nullable.
fn strict() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
        Field::new("p", DataType::Utf8, false),
    ])
}

fn rows(ids: &[&str], v: &[Option<i64>]) -> RecordBatch {
    let ids: Vec<Option<&str>> = ids.iter().map(|i| Some(*i)).collect();
    batch(vec![
        ("id", strings(&ids)),
        ("v", i64s(v)),
        ("p", strings(&vec![Some("p"); ids.len()])),
    ])
}

async fn strict_table(dir: &tempfile::TempDir) -> (String, DeltaLiteTable) {
    let uri = tmp_uri(dir, "t");
    let mut t = create(&uri, &strict(), &["p"]).await;
    t.append(
        [Ok(rows(&["a", "b"], &[Some(1), Some(1)]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    (uri, t)
}

/// Nullability of each column as the log's current schema says.
fn nullable(t: &DeltaLiteTable) -> HashMap<String, bool> {
    t.schema()
        .unwrap()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.is_nullable()))
        .collect()
}

/// The actions of one commit file, by kind.
fn actions(dir: &tempfile::TempDir, version: u64) -> Vec<String> {
    let path = dir.path().join(format!("t/_delta_log/{version:020}.json"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object().unwrap().keys().next().unwrap().clone()
        })
        .collect()
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
async fn a_null_in_a_non_nullable_column_relaxes_it_in_the_same_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = strict_table(&dir).await;
    let s = upsert(
        &mut t,
        &rows(&["b", "c"], &[Some(2), None]),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!((s.version, s.columns_relaxed), (2, 1), "{s:?}");
    let n = nullable(&t);
    assert_eq!((n["v"], n["id"], n["p"]), (true, false, false));
    // The schema change travels with the rows that need it: one commit.
    let kinds = actions(&dir, 2);
    assert!(kinds.contains(&"metaData".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"add".to_string()), "{kinds:?}");
    assert_eq!(
        rows_of(&uri).await,
        expect(&[("a", "1", "p"), ("b", "2", "p"), ("c", "NULL", "p")])
    );
}

#[tokio::test]
async fn a_non_nullable_column_the_batch_lacks_is_relaxed() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = strict_table(&dir).await;
    let b = batch(vec![
        ("id", strings(&[Some("b"), Some("c")])),
        ("p", strings(&[Some("p"), Some("p")])),
    ]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(s.columns_relaxed, 1);
    assert!(nullable(&t)["v"]);
    assert_eq!(
        rows_of(&uri).await,
        expect(&[("a", "1", "p"), ("b", "NULL", "p"), ("c", "NULL", "p")])
    );
}

/// A table whose files hold NULLs in a column its schema says is non-nullable (older
/// writers allowed it): the log statistics prove the NULLs, a clean batch relaxes the
/// column, and the rewrite that reads those NULLs succeeds.
#[tokio::test]
async fn a_table_poisoned_by_historic_nulls_is_healed_by_a_clean_batch() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let lenient = Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
        Field::new("p", DataType::Utf8, false),
    ]);
    let mut t = create(&uri, &lenient, &["p"]).await;
    t.append(
        [Ok(rows(&["a", "b", "c"], &[Some(1), Some(1), None]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    // What an older writer left: the schema denies the NULLs the file holds.
    let first = dir.path().join("t/_delta_log/00000000000000000000.json");
    let poisoned = std::fs::read_to_string(&first).unwrap().replace(
        r#"\"name\":\"v\",\"type\":\"long\",\"nullable\":true"#,
        r#"\"name\":\"v\",\"type\":\"long\",\"nullable\":false"#,
    );
    std::fs::write(&first, &poisoned).unwrap();
    let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert!(!nullable(&t)["v"], "the test must produce the lying schema");

    let s = upsert(
        &mut t,
        &rows(&["a", "d"], &[Some(5), Some(5)]),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(s.columns_relaxed, 1);
    assert!(nullable(&t)["v"]);
    assert_eq!(
        rows_of(&uri).await,
        expect(&[
            ("a", "5", "p"),
            ("b", "1", "p"),
            ("c", "NULL", "p"),
            ("d", "5", "p")
        ])
    );
}

#[tokio::test]
async fn clean_batches_relax_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_uri, mut t) = strict_table(&dir).await;
    let s = upsert(
        &mut t,
        &rows(&["b", "c"], &[Some(2), Some(3)]),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(s.columns_relaxed, 0);
    assert!(nullable(&t).values().all(|n| !n));
    assert!(!actions(&dir, 2).contains(&"metaData".to_string()));
}

/// `Nullability::Refuse`: the batch is refused as a schema mismatch and nothing is written.
#[tokio::test]
async fn refuse_mode_keeps_the_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = strict_table(&dir).await;
    let mut o = UpsertOptions::new(["id"]);
    o.nullability = Nullability::Refuse;
    let err = upsert(&mut t, &rows(&["c"], &[None]), &o)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch, "{err}");
    assert!(err.to_string().contains("\"v\" is not nullable"), "{err}");
    assert_eq!(t.version(), 1);
    assert!(!nullable(&t)["v"]);
    assert_eq!(rows_of(&uri).await.len(), 2);
}

async fn rows_of(uri: &str) -> Vec<Vec<String>> {
    common::rows(uri).await
}
