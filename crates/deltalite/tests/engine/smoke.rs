use crate::common;

use std::sync::Arc;

use common::*;
use deltalite::UpsertOptions;
use deltalite::arrow::array::{ArrayRef, Int64Array};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_updates_and_inserts_across_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ]);
    let mut table = create(&uri, &schema, &["day"]).await;
    let initial = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        ("day", strings(&[Some("d1"), Some("d1"), Some("d2")])),
        ("val", strings(&[Some("a"), Some("b"), Some("c")])),
    ]);
    table
        .append([Ok(initial)], &WriteOptions::default())
        .await
        .unwrap();
    let update = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![2, 4])) as ArrayRef),
        ("day", strings(&[Some("d1"), Some("d2")])),
        ("val", strings(&[Some("B"), Some("d")])),
    ]);
    let mut opts = UpsertOptions::new(["id"]);
    opts.partition_key = Some(vec!["day".into()]);
    let stats = upsert(&mut table, &update, &opts).await.unwrap();
    assert_eq!(stats.rows_updated, 1);
    assert_eq!(stats.rows_inserted, 1);
    assert_eq!(stats.partitions_touched, 2);
    assert_eq!(
        stats.files_removed, 1,
        "only d1's file holds a match: {stats:?}"
    );
    assert_eq!(stats.files_carried_over, 1, "{stats:?}");
    assert_eq!(stats.rows_copied, 1);
    assert_eq!(stats.version, 2);
    assert_eq!(
        rows(&uri).await,
        vec![
            vec!["1", "d1", "a"],
            vec!["2", "d1", "B"],
            vec!["3", "d2", "c"],
            vec!["4", "d2", "d"],
        ]
    );
}
