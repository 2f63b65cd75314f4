//! The engine on `s3://` tables, against a real S3-compatible server (moto's standalone
//! server, started by the test on a free loopback port).

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, UpsertOptions};
use futures::TryStreamExt;
use object_store::{PutMode, PutOptions, PutPayload};

struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_binary() -> String {
    if let Ok(bin) = std::env::var("MOTO_SERVER") {
        return bin;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/moto_server");
    if std::path::Path::new(venv).exists() {
        return venv.to_string();
    }
    "moto_server".to_string()
}

fn http(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn start_moto(bucket: &str) -> Moto {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(moto_binary())
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server must be installed (scripts/test.sh installs it into .venv; or set MOTO_SERVER)");
    let moto = Moto { child, port };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "moto_server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let reply = http(
        port,
        &format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    );
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "bucket creation failed: {reply}"
    );
    moto
}

fn options(moto: &Moto) -> HashMap<String, String> {
    HashMap::from([
        (
            "AWS_ENDPOINT_URL".to_string(),
            format!("http://127.0.0.1:{}", moto.port),
        ),
        ("AWS_ALLOW_HTTP".to_string(), "true".to_string()),
        ("AWS_ACCESS_KEY_ID".to_string(), "test".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "test".to_string()),
        ("AWS_REGION".to_string(), "us-east-1".to_string()),
    ])
}

fn ids_batch(ids: &[i64], day: &str, val: &str) -> RecordBatch {
    batch(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("day", strings(&vec![Some(day); ids.len()])),
        ("val", strings(&vec![Some(val); ids.len()])),
    ])
}

/// All rows through the table's own object store (sorted display strings).
async fn s3_rows(t: &DeltaLiteTable) -> Vec<Vec<String>> {
    #[allow(deprecated)]
    use deltalite::parquet::arrow::async_reader::ParquetObjectReader;
    use deltalite::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
    let store = t.delta_table().object_store();
    let mut out = Vec::new();
    for f in t.files().unwrap() {
        #[allow(deprecated)]
        let reader = ParquetObjectReader::new(
            store.clone(),
            object_store::path::Path::from(f.path.as_str()),
        );
        let batches: Vec<RecordBatch> = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .unwrap()
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let day = f.partition_values[0].1.clone().unwrap();
        for b in batches {
            for r in 0..b.num_rows() {
                out.push(vec![
                    display(b.column(0), r),
                    day.clone(),
                    display(b.column(1), r),
                ]);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_on_s3_commit_once_and_race_correctly() {
    let moto = start_moto("lake");
    let opts = options(&moto);
    let uri = "s3://lake/tables/events";

    // The server must honour conditional creates, or concurrent commits could both win.
    let probe = DeltaLiteTable::create(
        "s3://lake/probe",
        opts.clone(),
        &Schema::new(vec![Field::new("x", DataType::Int64, true)]),
        &[],
        HashMap::new(),
    )
    .await
    .unwrap();
    let store = probe.delta_table().object_store();
    let key = object_store::path::Path::from("_delta_log/00000000000000000099.json");
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    store
        .put_opts(&key, PutPayload::from_static(b"a"), create.clone())
        .await
        .unwrap();
    let second = store
        .put_opts(&key, PutPayload::from_static(b"b"), create)
        .await;
    assert!(
        matches!(
            second,
            Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. })
        ),
        "a second conditional create must lose: {second:?}"
    );

    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ]);
    let mut t = DeltaLiteTable::create(uri, opts.clone(), &schema, &["day".into()], HashMap::new())
        .await
        .unwrap();
    t.append(
        [Ok(ids_batch(&[1, 2, 3], "d1", "a"))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        DeltaLiteTable::is_deltatable(uri, opts.clone())
            .await
            .unwrap()
    );

    let mut a = DeltaLiteTable::open(uri, opts.clone()).await.unwrap();
    let mut b = DeltaLiteTable::open(uri, opts.clone()).await.unwrap();
    let s = upsert(
        &mut a,
        &ids_batch(&[2, 4], "d1", "from-a"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(
        (s.rows_updated, s.rows_inserted, s.files_removed),
        (1, 1, 1)
    );
    // B read the old snapshot: it loses the race, re-plans, and still ends with one row per key.
    let s = upsert(
        &mut b,
        &ids_batch(&[4, 5], "d1", "from-b"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(
        (s.replans, s.rows_updated, s.rows_inserted),
        (1, 1, 1),
        "{s:?}"
    );
    let got = s3_rows(&b).await;
    assert_eq!(
        got,
        vec![
            vec!["1", "d1", "a"],
            vec!["2", "d1", "from-a"],
            vec!["3", "d1", "a"],
            vec!["4", "d1", "from-b"],
            vec!["5", "d1", "from-b"],
        ]
    );
}
