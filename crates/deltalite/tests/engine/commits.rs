//! What the transaction path records: an empty batch's commit, the checkpoints of
//! `delta.checkpointInterval` written after (not inside) commits, and those of a log that
//! outgrew its last checkpoint.

use crate::common;

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
    assert_eq!(info["info"]["run_uuid"], "\"run-empty\"", "{info}");
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
    // The checkpointed table loads and holds both rows.
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(reopened.version(), 2);
    assert_eq!(common::rows(&uri).await.len(), 2);
}

/// Besides the interval, a commit is followed by a checkpoint once the JSON commits since
/// the last one reach 1 KiB per live file and 1 MiB: readers then never replay much more
/// log than a checkpoint of the whole table holds. Every upsert here rewrites each of 200
/// files (a wide schema: big `add`s), so the log grows by about 1 MB a commit while the
/// interval (1000) never fires.
#[tokio::test]
async fn a_log_that_outgrows_its_checkpoint_is_checkpointed() {
    const FILES: i64 = 200;
    let mut fields = vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
    ];
    fields.extend((0..30).map(|c| Field::new(format!("c{c:02}"), DataType::Int64, true)));
    let schema = Schema::new(fields);
    let rows = |round: i64| {
        let ids: Vec<i64> = (0..FILES).collect();
        let days: Vec<String> = ids.iter().map(|i| format!("d{i:03}")).collect();
        let mut columns = vec![
            (
                "id".to_string(),
                Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
            ),
            (
                "day".to_string(),
                strings(&days.iter().map(|d| Some(d.as_str())).collect::<Vec<_>>()),
            ),
        ];
        columns.extend((0..30).map(|c| {
            let values: Vec<i64> = ids.iter().map(|i| i * 1000 + c + round).collect();
            (
                format!("c{c:02}"),
                Arc::new(Int64Array::from(values)) as ArrayRef,
            )
        }));
        batch(
            columns
                .iter()
                .map(|(n, a)| (n.as_str(), a.clone()))
                .collect(),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = DeltaLiteTable::create(
        &uri,
        HashMap::new(),
        &schema,
        &["day".to_string()],
        HashMap::from([("delta.checkpointInterval".to_string(), "1000".to_string())]),
    )
    .await
    .unwrap();
    let log = dir.path().join("t/_delta_log");
    // (version, bytes) of the commits, and the versions with a checkpoint.
    let listing = || {
        let mut commits = Vec::new();
        let mut checkpoints = Vec::new();
        for entry in std::fs::read_dir(&log).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(version) = name[..20.min(name.len())].parse::<u64>() else {
                continue;
            };
            if name.ends_with(".checkpoint.parquet") {
                checkpoints.push(version);
            } else if name.len() == 25 && name.ends_with(".json") {
                commits.push((version, entry.metadata().unwrap().len()));
            }
        }
        checkpoints.sort();
        (commits, checkpoints)
    };
    let o = UpsertOptions::new(["id"]);
    let mut checkpointed = Vec::new();
    for round in 0..6 {
        let (_, before) = listing();
        let s = upsert(&mut t, &rows(round), &o).await.unwrap();
        assert_eq!(t.num_files().unwrap(), FILES as usize);
        let (commits, after) = listing();
        let last = before.last().copied();
        let since: u64 = commits
            .iter()
            .filter(|(v, _)| last.is_none_or(|c| *v > c) && *v <= s.version)
            .map(|(_, bytes)| bytes)
            .sum();
        let due = since >= (FILES as u64 * 1024).max(1 << 20);
        let new: Vec<u64> = after
            .iter()
            .copied()
            .filter(|v| !before.contains(v))
            .collect();
        assert_eq!(
            new,
            if due { vec![s.version] } else { vec![] },
            "round {round}: {since} bytes of commits since checkpoint {last:?}"
        );
        checkpointed.extend(new);
    }
    assert!(
        !checkpointed.is_empty() && checkpointed.len() < 6,
        "some commits checkpoint, not all: {checkpointed:?}"
    );
    // Readers start from the checkpoint and see the last round.
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(reopened.version(), 6);
    assert_eq!(common::rows(&uri).await.len(), FILES as usize);
}

/// Restore: one RESTORE commit that adds back the target version's files and removes the
/// others; the handle moves to it; history shows it with the caller's metadata.
#[tokio::test]
async fn restore_brings_back_an_earlier_version_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &["day"]).await;
    let o = UpsertOptions::new(["id"]);
    upsert(&mut t, &rows(&[1, 2], "d1"), &o).await.unwrap();
    upsert(&mut t, &rows(&[3], "d2"), &o).await.unwrap();
    let then = common::rows(&uri).await;
    let files_then = t.files().unwrap();
    assert_eq!(t.version(), 2);
    // Version 3 rewrites d1's file, version 4 adds d3.
    upsert(&mut t, &rows(&[1], "d1"), &o).await.unwrap();
    upsert(&mut t, &rows(&[4], "d3"), &o).await.unwrap();
    assert_eq!(t.files().unwrap().len(), 3);

    let metadata = HashMap::from([("rolled_back_run_uuid".to_string(), "run-1".into())]);
    let s = t.restore(2, &metadata, 15).await.unwrap();
    assert_eq!(
        (s.version, s.files_removed, s.files_restored),
        (5, 2, 1),
        "{s:?}"
    );
    assert_eq!(t.version(), 5);
    let mut files_now = t.files().unwrap();
    let mut expected = files_then.clone();
    files_now.sort_by(|a, b| a.path.cmp(&b.path));
    expected.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(
        files_now.iter().map(|f| &f.path).collect::<Vec<_>>(),
        expected.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    assert_eq!(common::rows(&uri).await, then);
    let info = &history(&t).await[0];
    assert_eq!(info["operation"], "RESTORE");
    assert_eq!(info["rolled_back_run_uuid"], "run-1");
    assert_eq!(info["operationParameters"]["version"], "2");
    assert_eq!(
        info["operationMetrics"],
        serde_json::json!({"numRemovedFile": 2, "numRestoredFile": 1})
    );

    // Not older than the current version: refused, nothing committed.
    let err = t.restore(5, &HashMap::new(), 15).await.unwrap_err();
    assert_eq!(err.kind(), deltalite::ErrorKind::InvalidInput, "{err}");
    assert_eq!(t.version(), 5);
}

/// A version whose files a vacuum deleted cannot come back: refused before committing.
#[tokio::test]
async fn restore_refuses_a_version_whose_files_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    let o = UpsertOptions::new(["id"]);
    upsert(&mut t, &rows(&[1], "d"), &o).await.unwrap();
    upsert(&mut t, &rows(&[1], "e"), &o).await.unwrap();
    let deleted = vacuum_now(&mut t).await;
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    let err = t.restore(1, &HashMap::new(), 15).await.unwrap_err();
    assert!(err.to_string().contains("no longer exists"), "{err}");
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(reopened.version(), t.version());
    assert_eq!(common::rows(&uri).await, vec![vec!["1", "e"]]);
}

/// `table_exists` answers from the log's presence (a damaged log still exists), and a
/// store that cannot be reached is an error, not "no table".
#[tokio::test]
async fn table_exists_looks_for_a_log_without_loading_it() {
    let dir = tempfile::tempdir().unwrap();
    let exists =
        |uri: String| async move { DeltaLiteTable::table_exists(&uri, HashMap::new()).await };
    assert!(!exists(tmp_uri(&dir, "missing")).await.unwrap());
    std::fs::create_dir_all(dir.path().join("empty/_delta_log")).unwrap();
    assert!(!exists(tmp_uri(&dir, "empty")).await.unwrap());
    std::fs::create_dir_all(dir.path().join("damaged/_delta_log")).unwrap();
    std::fs::write(
        dir.path()
            .join("damaged/_delta_log/00000000000000000000.json"),
        "not a commit",
    )
    .unwrap();
    assert!(exists(tmp_uri(&dir, "damaged")).await.unwrap());
    assert!(
        !DeltaLiteTable::is_deltatable(&tmp_uri(&dir, "empty"), HashMap::new())
            .await
            .unwrap()
    );
    create(&tmp_uri(&dir, "real"), &schema(), &[]).await;
    assert!(exists(tmp_uri(&dir, "real")).await.unwrap());

    let unreachable = HashMap::from(
        [
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("max_retries", "0"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let err = DeltaLiteTable::table_exists("s3://bucket/table", unreachable)
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
}

/// Snapshot reads match the log: id, properties, schema JSON, files with their times.
#[tokio::test]
async fn snapshot_reads_come_from_the_loaded_log() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = DeltaLiteTable::create(
        &uri,
        HashMap::new(),
        &schema(),
        &["day".to_string()],
        HashMap::from([("delta.appendOnly".to_string(), "false".to_string())]),
    )
    .await
    .unwrap();
    upsert(&mut t, &rows(&[1], "d1"), &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    let log =
        std::fs::read_to_string(dir.path().join("t/_delta_log/00000000000000000000.json")).unwrap();
    let metadata = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find_map(|a| a.get("metaData").cloned())
        .unwrap();
    assert_eq!(t.table_id().unwrap(), metadata["id"].as_str().unwrap());
    assert_eq!(
        t.configuration().unwrap(),
        HashMap::from([("delta.appendOnly".to_string(), "false".to_string())])
    );
    let schema_json: serde_json::Value = serde_json::from_str(&t.schema_json().unwrap()).unwrap();
    let stored: serde_json::Value =
        serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
    assert_eq!(schema_json, stored);
    assert_eq!(t.num_files().unwrap(), 1);
    let file = &t.files().unwrap()[0];
    assert!(file.path.starts_with("day=d1/"), "{file:?}");
    let on_disk = std::fs::metadata(dir.path().join("t").join(&file.path)).unwrap();
    assert_eq!(file.size, on_disk.len());
    let written = on_disk
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!((file.modification_time - written).abs() < 5_000, "{file:?}");
}
