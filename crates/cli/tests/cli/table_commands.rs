//! The table commands of the real `deltalite` binary on real tables: `info`, `history`,
//! `compact`, `vacuum`, `restore`, `checkpoint`, their JSON and human output, exit codes,
//! and what a person sees in a terminal (tmux).

use std::collections::HashMap;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use deltalite::DeltaLiteTable;
use deltalite::write::WriteOptions;

fn deltalite(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deltalite"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run deltalite")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = deltalite(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

fn batch(ids: std::ops::Range<i64>, part: &str) -> RecordBatch {
    let n = ids.end - ids.start;
    RecordBatch::try_new(
        Arc::new(schema()),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
            Arc::new(StringArray::from(vec![part; n as usize])) as ArrayRef,
        ],
    )
    .unwrap()
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("p", DataType::Utf8, true),
    ])
}

/// A table with `appends` one-file appends to each of partitions a and b.
async fn small_files(dir: &std::path::Path, appends: i64) -> String {
    let uri = dir.join("t").to_string_lossy().to_string();
    let mut t = DeltaLiteTable::create(
        &uri,
        HashMap::new(),
        &schema(),
        &["p".to_string()],
        HashMap::new(),
    )
    .await
    .unwrap();
    for i in 0..appends {
        for p in ["a", "b"] {
            t.append(
                [Ok(batch(i * 10..i * 10 + 10, p))],
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        }
    }
    uri
}

async fn ids(uri: &str) -> Vec<i64> {
    let t = DeltaLiteTable::open(uri, HashMap::new()).await.unwrap();
    let mut out = Vec::new();
    for f in t.files().unwrap() {
        let file = std::fs::File::open(std::path::Path::new(uri).join(&f.path)).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024).unwrap();
        for b in reader {
            let b = b.unwrap();
            let col = b
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            out.extend(col.iter().flatten());
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn info_and_history_describe_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let uri = small_files(dir.path(), 3).await;
    let info = json(&["info", &uri, "--json"]);
    assert_eq!(info["version"], 6);
    assert_eq!(info["files"], 6);
    assert_eq!(info["rows"], 60);
    assert_eq!(info["partition_columns"], serde_json::json!(["p"]));
    assert_eq!(
        info["columns"],
        serde_json::json!([
            {"name": "id", "type": "Int64", "nullable": true},
            {"name": "p", "type": "Utf8", "nullable": true},
        ])
    );
    let history = json(&["history", &uri, "--limit", "2", "--json"]);
    let ops: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, vec!["WRITE", "WRITE"]);
    let human = deltalite(&["info", &uri]);
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(
        text.starts_with(&format!("table      {uri}\nversion    6\nfiles      6 (")),
        "{text}"
    );
    assert!(
        text.contains("\nrows       60\npartitions p\ncolumns\n  id "),
        "{text}"
    );
}

#[tokio::test]
async fn compact_vacuum_restore_and_checkpoint_change_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    let uri = small_files(dir.path(), 4).await;
    let before = ids(&uri).await;
    let plan = json(&["compact", &uri, "--dry-run", "--json"]);
    assert_eq!(
        (plan["files_removed"].as_u64(), plan["dry_run"].as_bool()),
        (Some(8), Some(true))
    );
    assert_eq!(json(&["info", &uri, "--json"])["files"], 8);
    let done = json(&["compact", &uri, "--partition", "a", "--json"]);
    assert_eq!(
        (done["files_removed"].as_u64(), done["files_added"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(done["version"], 9);
    let out = deltalite(&["compact", &uri]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("merged 4 files (")
            && text.ends_with(" into 1 in 1 partitions; 40 rows rewritten; version 10\n"),
        "{text}"
    );
    assert_eq!(json(&["info", &uri, "--json"])["files"], 2);
    assert_eq!(ids(&uri).await, before);

    // Restore to before b was compacted: its four small files come back.
    let restored = json(&["restore", &uri, "--version", "9", "--json"]);
    assert_eq!(
        (
            restored["version"].as_u64(),
            restored["restored_version"].as_u64()
        ),
        (Some(11), Some(9))
    );
    assert_eq!(json(&["info", &uri, "--json"])["files"], 5);
    assert_eq!(ids(&uri).await, before);

    // Vacuum: the table's retention (7 days) holds unless forced.
    let refused = deltalite(&["vacuum", &uri, "--retain-hours", "0"]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(refused.stderr).unwrap(),
        "error: --retain-hours 0: a retention of 0 hours is below the table's \
         delta.deletedFileRetentionDuration (168 hours): files younger than that may still be \
         read by older versions or by writes in flight; add --force if you mean it\n"
    );
    let listed = json(&[
        "vacuum",
        &uri,
        "--retain-hours",
        "0",
        "--force",
        "--dry-run",
        "--json",
    ]);
    let listed: Vec<String> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    // a's four small files and b's compacted one, which the restore removed.
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|f| std::path::Path::new(&uri).join(f).exists())
    );
    let deleted = json(&["vacuum", &uri, "--retain-hours", "0", "--force", "--json"]);
    assert_eq!(deleted["files"].as_array().unwrap().len(), 5);
    assert!(
        listed
            .iter()
            .all(|f| !std::path::Path::new(&uri).join(f).exists())
    );
    assert_eq!(ids(&uri).await, before);
    let version = json(&["info", &uri, "--json"])["version"].as_u64().unwrap();

    // A version whose files are gone cannot be restored; nothing is committed.
    let gone = deltalite(&["restore", &uri, "--version", "2"]);
    assert_eq!(gone.status.code(), Some(1));
    let message = String::from_utf8(gone.stderr).unwrap();
    assert!(
        message.starts_with("error: ") && message.contains("no longer exists (vacuumed?)"),
        "{message}"
    );
    assert_eq!(json(&["info", &uri, "--json"])["version"], version);

    let checkpoint = json(&["checkpoint", &uri, "--json"]);
    assert_eq!(checkpoint["version"], version);
    let name = format!("_delta_log/{version:020}.checkpoint.parquet");
    assert!(std::path::Path::new(&uri).join(name).exists());
}

#[test]
fn usage_errors_exit_2_and_missing_tables_exit_1() {
    let usage = deltalite(&["restore", "/tmp/x"]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(
        String::from_utf8(usage.stderr)
            .unwrap()
            .contains("--version <VERSION>")
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = deltalite(&["info", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: cannot open the Delta table at {0}: table not found: {0}\n",
            missing.display()
        )
    );
    assert!(out.stdout.is_empty());
}

/// In a terminal the work shows a spinner on stderr and ends with a `done:` line and
/// the summary: what a person sees, captured from a real tmux pane.
#[tokio::test]
async fn a_terminal_shows_the_work_and_its_summary() {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this test (apt-get install tmux)");
    }
    let dir = tempfile::tempdir().unwrap();
    let uri = small_files(dir.path(), 3).await;
    let session = format!("deltalite-test-{}", std::process::id());
    let script = format!(
        "{} compact {uri}; echo EXIT=$?; sleep 30",
        env!("CARGO_BIN_EXE_deltalite")
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "160",
            "-y",
            "20",
            &script,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let mut pane = String::new();
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session])
            .output()
            .unwrap();
        pane = String::from_utf8_lossy(&out.stdout).to_string();
        if pane.contains("EXIT=") {
            break;
        }
    }
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .status();
    let lines: Vec<&str> = pane.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 3, "{pane}");
    assert!(
        lines[0].starts_with(&format!("done: compacting {uri} (")) && lines[0].ends_with(" s)"),
        "{pane}"
    );
    assert!(
        lines[1].starts_with("merged 6 files (")
            && lines[1].ends_with(" into 2 in 2 partitions; 60 rows rewritten; version 7"),
        "{pane}"
    );
    assert_eq!(lines[2], "EXIT=0", "{pane}");
}
