//! Randomized batch sequences checked against a plain reference model of the contract,
//! under random (often tiny) resource knobs.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::{OnDuplicate, PruneStrategy, UpsertOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Debug)]
struct Row {
    id: Option<i64>,
    day: String,
    cursor: Option<i64>,
    val: String,
}

/// The contract, written as plainly as possible.
#[derive(Default)]
struct Model {
    keyed: HashMap<(String, i64), (Option<i64>, String)>,
    null_keyed: Vec<Row>,
}

impl Model {
    fn apply(&mut self, batch: &[Row], with_cursor: bool) {
        let mut winners: HashMap<(String, i64), Row> = HashMap::new();
        let mut order: Vec<(String, i64)> = Vec::new();
        for row in batch {
            let Some(id) = row.id else {
                self.null_keyed.push(row.clone());
                continue;
            };
            let key = (row.day.clone(), id);
            match winners.get(&key) {
                None => {
                    order.push(key.clone());
                    winners.insert(key, row.clone());
                }
                Some(current) => {
                    // NULL ranks lowest; ties go to the later row.
                    if !with_cursor || row.cursor >= current.cursor {
                        winners.insert(key, row.clone());
                    }
                }
            }
        }
        for key in order {
            let row = &winners[&key];
            match self.keyed.get(&key) {
                Some((stored, _)) if with_cursor && row.cursor <= *stored => {}
                _ => {
                    self.keyed.insert(key, (row.cursor, row.val.clone()));
                }
            }
        }
    }

    fn rows(&self) -> Vec<Vec<String>> {
        let show = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
        let mut out: Vec<Vec<String>> = self
            .keyed
            .iter()
            .map(|((day, id), (c, v))| vec![id.to_string(), day.clone(), show(*c), v.clone()])
            .chain(
                self.null_keyed
                    .iter()
                    .map(|r| vec!["NULL".into(), r.day.clone(), show(r.cursor), r.val.clone()]),
            )
            .collect();
        out.sort();
        out
    }
}

fn to_batch(rows: &[Row]) -> RecordBatch {
    batch(vec![
        (
            "id",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "day",
            strings(
                &rows
                    .iter()
                    .map(|r| Some(r.day.as_str()))
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "cursor",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.cursor).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "val",
            strings(
                &rows
                    .iter()
                    .map(|r| Some(r.val.as_str()))
                    .collect::<Vec<_>>(),
            ),
        ),
    ])
}

async fn run_sequence(seed: u64, with_cursor: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("cursor", DataType::Int64, true),
        Field::new("val", DataType::Utf8, true),
    ]);
    let mut table = create(&uri, &schema, &["day"]).await;
    let mut model = Model::default();
    for round in 0..8 {
        let n = rng.random_range(1..40);
        let source: Vec<Row> = (0..n)
            .map(|i| Row {
                id: (!rng.random_bool(0.05)).then(|| rng.random_range(0..60)),
                day: ["a", "b", "c"][rng.random_range(0..3)].to_string(),
                cursor: (!rng.random_bool(0.2)).then(|| rng.random_range(0..6)),
                val: format!("s{seed}r{round}i{i}"),
            })
            .collect();
        let mut o = UpsertOptions::new(["id"]);
        o.on_duplicate = OnDuplicate::Last;
        if with_cursor {
            o.cursor_fields = vec!["cursor".into()];
        }
        o.knobs.max_parallel_files = rng.random_range(1..4);
        o.knobs.max_parallel_partitions = rng.random_range(1..3);
        o.knobs.probe_concurrency = rng.random_range(1..4);
        o.knobs.max_buffered_bytes = if rng.random_bool(0.5) { 1 } else { 8 << 20 };
        o.knobs.read_batch_size = rng.random_range(1..50);
        o.knobs.prune_strategy = if rng.random_bool(0.3) {
            PruneStrategy::None
        } else {
            PruneStrategy::Probe
        };
        let stats = upsert(&mut table, &to_batch(&source), &o).await.unwrap();
        model.apply(&source, with_cursor);
        assert_eq!(
            stats.rows_updated + stats.rows_inserted + stats.rows_dropped_by_cursor,
            stats.source_rows - stats.duplicates_resolved,
            "seed {seed} round {round}: {stats:?}"
        );
        assert_eq!(rows(&uri).await, model.rows(), "seed {seed} round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sequences_match_the_reference_model_without_cursor() {
    for seed in 0..4 {
        run_sequence(seed, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sequences_match_the_reference_model_with_cursor() {
    for seed in 100..104 {
        run_sequence(seed, true).await;
    }
}
