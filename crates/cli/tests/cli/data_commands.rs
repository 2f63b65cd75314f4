//! The data commands of the real `deltalite` binary on real tables: `create`, `upsert`,
//! `append`, `overwrite` from Parquet, CSV, JSON and NDJSON files (globs, stdin), `query`
//! in every output format, local and on a real S3-compatible server (moto), their exit
//! codes, what a failure leaves behind, and the progress bar a person sees in a terminal
//! (tmux).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use deltalite::DeltaLiteTable;
use deltalite_testkit::moto::Moto;
use serde_json::{Value, json};

fn deltalite(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deltalite"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("DELTALITE_STORAGE_OPTIONS")
        .output()
        .expect("run deltalite")
}

fn ok(args: &[&str]) -> String {
    let out = deltalite(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn json_of(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).expect("one JSON document on stdout")
}

/// A failed command: exit status `code`, stdout empty, and stderr's one line.
fn fails(args: &[&str], code: i32) -> String {
    let out = deltalite(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    String::from_utf8_lossy(&out.stderr).trim_end().to_string()
}

/// The rows of `sql` over the table at `uri` (named `t`), through `deltalite query`.
fn rows(uri: &str, sql: &str) -> Vec<Value> {
    ok(&[
        "query",
        sql,
        "--table",
        &format!("t={uri}"),
        "--format",
        "ndjson",
    ])
    .lines()
    .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
    .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn parquet(dir: &Path, name: &str, ids: &[i64], names: &[&str]) -> PathBuf {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(StringArray::from(names.to_vec())) as ArrayRef,
        ],
    )
    .unwrap();
    let path = dir.join(name);
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

async fn version(uri: &str) -> u64 {
    DeltaLiteTable::open(uri, Default::default())
        .await
        .unwrap()
        .version()
}

#[tokio::test]
async fn create_from_csv_then_query_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("people").to_str().unwrap().to_string();
    let csv = write(
        dir.path(),
        "people.csv",
        "id,name,team,score\n1,ann,red,1.5\n2,bob,blue,2.5\n3,cy,red,\n",
    );
    let report = json_of(&["create", &uri, s(&csv), "--partition", "team", "--json"]);
    let size = std::fs::metadata(&csv).unwrap().len();
    assert_eq!(
        report,
        json!({
            "table": uri, "operation": "create", "version": 0, "created": true,
            "rows_written": 3, "files_added": 2, "files_removed": 0,
            "files_read": 1, "bytes_read": size, "rows_read": 3,
        })
    );
    let info = json_of(&["info", &uri, "--json"]);
    assert_eq!(info["partition_columns"], json!(["team"]));
    assert_eq!(info["rows"], json!(3));

    let sql = "SELECT id, name, team, score FROM t ORDER BY id";
    let t = format!("t={uri}");
    assert_eq!(
        ok(&["query", sql, "--table", &t, "--format", "csv"]),
        "id,name,team,score\n1,ann,red,1.5\n2,bob,blue,2.5\n3,cy,red,\n"
    );
    let array: Value =
        serde_json::from_str(&ok(&["query", sql, "--table", &t, "--format", "json"])).unwrap();
    assert_eq!(
        array,
        json!([
            {"id": 1, "name": "ann", "team": "red", "score": 1.5},
            {"id": 2, "name": "bob", "team": "blue", "score": 2.5},
            {"id": 3, "name": "cy", "team": "red"},
        ])
    );
    // The URI alone names the table by its last segment.
    assert_eq!(
        ok(&[
            "query",
            "SELECT team, count(*) AS n FROM people GROUP BY team ORDER BY team",
            "--table",
            &uri,
        ]),
        "+------+---+\n| team | n |\n+------+---+\n| blue | 1 |\n| red  | 2 |\n+------+---+\n2 rows\n"
    );
    // No rows still prints the columns.
    assert_eq!(
        ok(&[
            "query",
            "SELECT id FROM t WHERE id > 9",
            "--table",
            &t,
            "--format",
            "csv"
        ]),
        "id\n"
    );
    let out = dir.path().join("out.parquet");
    assert_eq!(
        ok(&[
            "query",
            sql,
            "--table",
            &t,
            "--format",
            "parquet",
            "--output",
            s(&out)
        ]),
        ""
    );
    let read: Vec<RecordBatch> =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&out).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(read.iter().map(RecordBatch::num_rows).sum::<usize>(), 3);

    // A second create is refused and writes nothing.
    assert_eq!(
        fails(&["create", &uri, s(&csv)], 1),
        format!(
            "error: a table exists at {uri} already (append, overwrite and upsert write into it)"
        )
    );
    assert_eq!(version(&uri).await, 0);
    assert_eq!(
        fails(&["query", "SELECT * FROM nope", "--table", &t], 1),
        "error: Error during planning: table 'datafusion.public.nope' not found"
    );
}

#[tokio::test]
async fn upsert_from_parquet_then_globbed_ndjson_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_string();
    let first = parquet(dir.path(), "first.parquet", &[1, 2, 3], &["a", "b", "c"]);
    let report = json_of(&["upsert", &uri, s(&first), "--key", "id", "--json"]);
    assert_eq!(report["version"], json!(0));
    assert_eq!(report["created"], json!(true));
    assert_eq!(report["rows_inserted"], json!(3));

    let batch = dir.path().join("batch");
    std::fs::create_dir(&batch).unwrap();
    write(&batch, "1.ndjson", "{\"id\": 2, \"name\": \"B\"}\n");
    write(&batch, "2.ndjson", "{\"id\": 4, \"name\": \"d\"}\n");
    let glob = format!("{}/*.ndjson", batch.display());
    let report = json_of(&["upsert", &uri, &glob, "--key", "id", "--json"]);
    assert_eq!(
        (
            &report["version"],
            &report["rows_updated"],
            &report["rows_inserted"],
            &report["files_read"],
            &report["rows_read"],
        ),
        (&json!(1), &json!(1), &json!(1), &json!(2), &json!(2))
    );
    assert_eq!(
        rows(&uri, "SELECT id, name FROM t ORDER BY id"),
        vec![
            json!({"id": 1, "name": "a"}),
            json!({"id": 2, "name": "B"}),
            json!({"id": 3, "name": "c"}),
            json!({"id": 4, "name": "d"}),
        ]
    );

    // One key twice in the input: refused by default, the later file wins with `last`.
    let x = write(dir.path(), "x.ndjson", "{\"id\": 1, \"name\": \"x\"}\n");
    let y = write(dir.path(), "y.csv", "id,name\n1,y\n");
    let refused = fails(&["upsert", &uri, s(&x), s(&y), "--key", "id"], 1);
    assert!(
        refused.starts_with("error: ") && refused.contains("duplicate"),
        "{refused}"
    );
    assert_eq!(version(&uri).await, 1);
    let human = ok(&[
        "upsert",
        &uri,
        s(&x),
        s(&y),
        "--key",
        "id",
        "--on-duplicate",
        "last",
    ]);
    assert_eq!(
        human,
        format!(
            "upsert {uri}: 0 inserted, 1 updated, 0 deleted from 2 rows in 2 files ({} B); version 2\n",
            std::fs::metadata(&x).unwrap().len() + std::fs::metadata(&y).unwrap().len()
        )
    );
    assert_eq!(
        rows(&uri, "SELECT name FROM t WHERE id = 1"),
        vec![json!({"name": "y"})]
    );

    // A cursor keeps the newer row.
    let c = dir.path().join("c");
    std::fs::create_dir(&c).unwrap();
    write(&c, "a.csv", "id,v,ts\n1,new,5\n2,new,5\n");
    let uri2 = c.join("t").to_str().unwrap().to_string();
    ok(&[
        "upsert",
        &uri2,
        s(&c.join("a.csv")),
        "--key",
        "id",
        "--cursor",
        "ts",
    ]);
    write(&c, "b.csv", "id,v,ts\n1,old,4\n2,newer,6\n");
    let report = json_of(&[
        "upsert",
        &uri2,
        s(&c.join("b.csv")),
        "--key",
        "id",
        "--cursor",
        "ts",
        "--json",
    ]);
    assert_eq!(report["rows_updated"], json!(1));
    assert_eq!(
        rows(&uri2, "SELECT id, v FROM t ORDER BY id"),
        vec![json!({"id": 1, "v": "new"}), json!({"id": 2, "v": "newer"})]
    );
}

#[tokio::test]
async fn append_from_stdin_and_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_deltalite"))
        .args(["append", &uri, "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"[{\"id\": 1, \"name\": \"a\"}, {\"id\": 2, \"name\": \"b\"}]")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&report["created"], &report["rows_written"]),
        (&json!(true), &json!(2))
    );

    // A later file without a column: NULL there.
    let ids = write(dir.path(), "ids.csv", "id\n3\n");
    let report = json_of(&["append", &uri, s(&ids), "--json"]);
    assert_eq!(
        (&report["version"], &report["rows_written"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        rows(&uri, "SELECT id, name FROM t ORDER BY id"),
        vec![
            json!({"id": 1, "name": "a"}),
            json!({"id": 2, "name": "b"}),
            json!({"id": 3})
        ]
    );
    assert_eq!(
        fails(&["append", &uri, s(&ids), "--partition", "id"], 1),
        "error: the table is partitioned by [], not [id] (overwrite re-lays it out)"
    );

    let new = parquet(dir.path(), "new.parquet", &[7, 8], &["g", "h"]);
    let report = json_of(&["overwrite", &uri, s(&new), "--json"]);
    assert_eq!(
        (
            &report["version"],
            &report["rows_written"],
            &report["files_removed"]
        ),
        (&json!(2), &json!(2), &json!(2))
    );
    assert_eq!(
        rows(&uri, "SELECT id, name FROM t ORDER BY id"),
        vec![json!({"id": 7, "name": "g"}), json!({"id": 8, "name": "h"})]
    );
    let history = json_of(&["history", &uri, "--json"]);
    assert_eq!(
        history
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["deltalite.operation"].clone())
            .collect::<Vec<_>>(),
        vec![
            json!("cli overwrite"),
            json!("cli append"),
            json!("cli append")
        ],
        "{history:#}"
    );
}

/// What a person gets wrong gets one line that says what, exit status 1 (2 for a usage
/// error), and leaves no table and no files behind.
#[tokio::test]
async fn bad_input_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_string();
    let csv = write(dir.path(), "a.csv", "id,name\n1,a\n");
    let other = write(dir.path(), "b.csv", "id,name,extra\n2,b,x\n");
    assert_eq!(
        fails(&["upsert", &uri, s(&csv), "--key", "key"], 1),
        "error: column \"key\" is not in the input files"
    );
    assert_eq!(
        fails(&["create", &uri, s(&csv), s(&other)], 1),
        format!(
            "error: {}: has a column \"extra\" that the first file does not have",
            other.display()
        )
    );
    let missing = dir.path().join("missing.csv");
    assert_eq!(
        fails(&["append", &uri, s(&missing)], 1),
        format!(
            "error: cannot open {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
    let pattern = format!("{}/*.parquet", dir.path().display());
    assert_eq!(
        fails(&["append", &uri, &pattern], 1),
        format!("error: no file matches {pattern:?}")
    );
    let broken = write(dir.path(), "broken.json", "[{\"id\": 1}, 7]");
    assert_eq!(
        fails(&["append", &uri, s(&broken)], 1),
        format!(
            "error: {}: invalid JSON: array elements must be objects",
            broken.display()
        )
    );
    let usage = fails(&["upsert", &uri, s(&csv)], 2);
    assert!(usage.contains("--key <COLUMN>"), "{usage}");
    assert!(
        !DeltaLiteTable::table_exists(&uri, Default::default())
            .await
            .unwrap()
    );
    let left: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The same commands on a real S3-compatible server.
#[tokio::test]
async fn upsert_and_query_on_s3() {
    let moto = Moto::start("cli");
    let options: Vec<String> = moto
        .options()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let uri = "s3://cli/tables/t";
    let first = parquet(dir.path(), "first.parquet", &[1, 2], &["a", "b"]);
    let second = write(dir.path(), "second.csv", "id,name\n2,B\n3,c\n");
    let with = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        for o in &options {
            all.push("--storage-option".into());
            all.push(o.clone());
        }
        all
    };
    for file in [&first, &second] {
        let args = with(&["upsert", uri, s(file), "--key", "id", "--json"]);
        let report: Value =
            serde_json::from_str(&ok(&args.iter().map(String::as_str).collect::<Vec<_>>()))
                .unwrap();
        assert!(report["version"].is_u64(), "{report}");
    }
    let args = with(&[
        "query",
        "SELECT id, name FROM t ORDER BY id",
        "--table",
        &format!("t={uri}"),
        "--format",
        "csv",
    ]);
    assert_eq!(
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>()),
        "id,name\n1,a\n2,B\n3,c\n"
    );
    let table = DeltaLiteTable::open(uri, moto.options()).await.unwrap();
    assert_eq!(table.version(), 1);
}

/// In a terminal the write shows a progress bar on stderr (bytes, rows, files), left at
/// its last state, then a `done:` line and the summary: captured from a real tmux pane.
#[tokio::test]
async fn a_terminal_shows_the_progress_bar_and_summary() {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this test (apt-get install tmux)");
    }
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_string();
    let ids: Vec<i64> = (0..20_000).collect();
    let names = vec!["n"; ids.len()];
    let a = parquet(dir.path(), "a.parquet", &ids[..10_000], &names[..10_000]);
    let b = parquet(dir.path(), "b.parquet", &ids[10_000..], &names[10_000..]);
    let bytes = std::fs::metadata(&a).unwrap().len() + std::fs::metadata(&b).unwrap().len();
    let session = format!("deltalite-data-test-{}", std::process::id());
    let script = format!(
        "{} upsert {uri} {} {} --key id; echo EXIT=$?; sleep 30",
        env!("CARGO_BIN_EXE_deltalite"),
        s(&a),
        s(&b)
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "220",
            "-y",
            "20",
            &script,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let mut pane = String::new();
    for _ in 0..300 {
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
    assert_eq!(lines.len(), 4, "{pane}");
    let size = if bytes < 1024 * 1024 {
        format!("{:.2} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
    };
    let bar = format!(
        "upsert {uri} [{}] {size}/{size} · 20000 rows · file 2/2 · ",
        "#".repeat(30)
    );
    assert!(lines[0].starts_with(&bar), "{pane}\nexpected: {bar}");
    assert!(lines[0].ends_with("(ETA 0s)"), "{pane}");
    assert!(
        lines[1].starts_with(&format!("done: upsert {uri} (")) && lines[1].ends_with(" s)"),
        "{pane}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "upsert {uri}: 20000 inserted, 0 updated, 0 deleted from 20000 rows in 2 files ("
        )) && lines[2].ends_with("); version 0 (table created)"),
        "{pane}"
    );
    assert_eq!(lines[3], "EXIT=0", "{pane}");
}
