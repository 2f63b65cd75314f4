//! Process-global budgets (read once from the environment) layered over per-call knobs:
//! many concurrent calls under tiny budgets must all finish, correctly. This file is its
//! own test binary so that the environment is set before the engine first reads it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use deltalite::UpsertOptions;
use deltalite::arrow::array::{ArrayRef, Int64Array};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::options::EnvDefaults;
use deltalite::write::WriteOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_under_tiny_process_budgets_finish() {
    // SAFETY: the only test in this binary; no other thread reads the environment yet.
    unsafe {
        std::env::set_var("DELTALITE_PROCESS_MAX_PARALLEL_PARTITIONS", "1");
        std::env::set_var("DELTALITE_PROCESS_MAX_PARALLEL_FILES", "1");
        std::env::set_var("DELTALITE_PROCESS_MAX_BUFFERED_BYTES", "1");
    }
    let env = EnvDefaults::get();
    assert_eq!(
        (
            env.process_max_parallel_partitions,
            env.process_max_parallel_files
        ),
        (1, 1)
    );
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]);
    let mut tasks = Vec::new();
    for t in 0..6 {
        let uri = tmp_uri(&dir, &format!("t{t}"));
        let mut table = create(&uri, &schema, &["day"]).await;
        let mk = |v: i64| {
            batch(vec![
                (
                    "id",
                    Arc::new(Int64Array::from((0..50).collect::<Vec<i64>>())) as ArrayRef,
                ),
                (
                    "day",
                    strings(
                        &(0..50)
                            .map(|i| Some(["a", "b", "c"][i % 3]))
                            .collect::<Vec<_>>(),
                    ),
                ),
                ("v", Arc::new(Int64Array::from(vec![v; 50])) as ArrayRef),
            ])
        };
        table
            .append([Ok(mk(0))], &WriteOptions::default())
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            for round in 1..=3 {
                let mut o = UpsertOptions::new(["id"]);
                o.knobs.max_parallel_partitions = 3;
                o.knobs.max_parallel_files = 3;
                upsert(&mut table, &mk(round), &o).await.unwrap();
            }
            uri
        }));
    }
    for task in tasks {
        let uri = tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("no deadlock under tiny budgets")
            .unwrap();
        let got = rows(&uri).await;
        assert_eq!(got.len(), 50);
        assert!(got.iter().all(|r| r[2] == "3"), "{uri}: {got:?}");
    }
}
