//! What the transaction path records: an empty batch's commit, the checkpoints of
//! `delta.checkpointInterval` written after (not inside) commits.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::{DeltaLiteTable, UpsertOptions};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
    ])
}

fn rows(ids: &[i64], day: &str) -> deltalite::arrow::array::RecordBatch {
    let ids: ArrayRef = Arc::new(Int64Array::from(ids.to_vec()));
    batch(vec![
        ("id", ids.clone()),
        ("day", strings(&vec![Some(day); ids.len()])),
    ])
}

async fn history(t: &DeltaLiteTable) -> Vec<serde_json::Value> {
    t.history(Some(1)).await.unwrap()
}

/// An empty batch changes nothing, yet commits (no actions) with the call's metadata: a
/// pipeline that looks for its batch's commit before redelivering it finds it.
#[tokio::test]
async fn an_empty_batch_commits_its_metadata_and_no_actions() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &["day"]).await;
    upsert(&mut t, &rows(&[1], "d"), &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    let files = t.files().unwrap();
    let mut o = UpsertOptions::new(["id"]);
    o.commit_metadata = HashMap::from([("run_uuid".to_string(), "run-empty".into())]);
    let s = upsert(&mut t, &rows(&[], "d"), &o).await.unwrap();
    assert_eq!(
        (
            s.version,
            s.partitions_touched,
            s.files_added,
            s.files_removed
        ),
        (2, 0, 0, 0)
    );
    assert_eq!(t.version(), 2);
    assert_eq!(t.files().unwrap(), files, "no file changed");
    let info = &history(&t).await[0];
    assert_eq!(info["run_uuid"], "run-empty");
    let log =
        std::fs::read_to_string(dir.path().join("t/_delta_log/00000000000000000002.json")).unwrap();
    assert_eq!(log.lines().count(), 1, "commit info only: {log}");
    assert!(log.starts_with("{\"commitInfo\""), "{log}");
}

/// Checkpoints come at the interval's boundaries, written after the commit (a failure
/// there would not be the commit's), and their time is reported apart.
#[tokio::test]
async fn checkpoints_are_written_at_the_interval_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = DeltaLiteTable::create(
        &uri,
        HashMap::new(),
        &schema(),
        &[],
        HashMap::from([("delta.checkpointInterval".to_string(), "2".to_string())]),
    )
    .await
    .unwrap();
    let log = dir.path().join("t/_delta_log");
    let checkpoints = || {
        let mut names: Vec<String> = std::fs::read_dir(&log)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".checkpoint."))
            .collect();
        names.sort();
        names
    };
    assert!(checkpoints().is_empty());
    let s = upsert(&mut t, &rows(&[1], "d"), &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(s.version, 1);
    assert_eq!(
        checkpoints(),
        vec!["00000000000000000001.checkpoint.parquet"]
    );
    assert!(log.join("_last_checkpoint").exists());
    assert!(s.timings.maintenance > std::time::Duration::ZERO);
    let s = upsert(&mut t, &rows(&[2], "d"), &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(s.version, 2);
    assert_eq!(checkpoints().len(), 1, "no checkpoint between boundaries");
    assert_eq!(s.timings.maintenance, std::time::Duration::ZERO);
    // The checkpointed table loads and holds both rows.
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(reopened.version(), 2);
    assert_eq!(common::rows(&uri).await.len(), 2);
}
