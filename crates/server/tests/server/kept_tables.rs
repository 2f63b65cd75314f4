//! Tables kept open between queries (`snapshots.rs`): a query reads only the log entries
//! written since the query before it, yet sees every commit, the server's own and another
//! writer's, and never reads a table dropped and created again under the same name
//! through the old one's snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use deltalite::DeltaLiteTable;
use deltalite::write::WriteOptions;
use deltalite_testkit::store::{Fault, Op, Target};
use serde_json::json;

use crate::transient::InProcess;

fn count(s: &InProcess) -> i64 {
    s.rows("SELECT count(*) FROM t")[0][0]
        .as_i64()
        .expect("count")
}

/// Append `ids` to table `t` as a writer other than the server: the engine, straight on
/// the table's folder.
fn append_elsewhere(s: &InProcess, ids: &[i64]) {
    let uri = s.table("t").display().to_string();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(vec!["other"; ids.len()])),
        ],
    )
    .expect("batch");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut table = DeltaLiteTable::open(&uri, HashMap::new())
            .await
            .expect("open");
        table
            .append([Ok(batch)], &WriteOptions::default())
            .await
            .expect("append");
    });
}

/// Make every read of the commit entries of `versions` fail.
fn fail_entries(s: &InProcess, versions: std::ops::Range<u64>) {
    for version in versions {
        s.store.inject(
            Op::Get,
            Target::File(format!("{version:020}.json")),
            1,
            usize::MAX,
            Fault::Fail,
        );
    }
}

#[test]
fn a_kept_table_reads_only_new_log_entries_and_sees_every_commit() {
    let s = InProcess::start();
    assert_eq!(
        s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)")
            .status()
            .as_u16(),
        200
    );
    for i in 0..3 {
        s.sql(&format!("INSERT INTO t VALUES ({i}, 'a')"));
    }
    assert_eq!(count(&s), 3, "the first query opens the table");
    // Nothing was committed since: the next query reads no commit entry but the kept
    // version's (checked, not replayed), where a fresh open replays all four.
    fail_entries(&s, 0..3);
    assert_eq!(count(&s), 3, "from the kept table");
    assert_eq!(s.store.take_fired(), 0, "no commit entry read");
    // Commits since: the server's own, then another writer's.
    s.sql("INSERT INTO t VALUES (10, 'b'), (11, 'b')");
    assert_eq!(count(&s), 5, "the server's own commit");
    append_elsewhere(&s, &[20, 21, 22]);
    assert_eq!(count(&s), 8, "another writer's commit");
    assert_eq!(
        s.rows("SELECT id FROM t WHERE v = 'other' ORDER BY id"),
        vec![vec![json!(20)], vec![json!(21)], vec![json!(22)]]
    );
    // Only the new entry is read: with reads of the older ones failing, a query after
    // one more commit still answers.
    append_elsewhere(&s, &[30]);
    fail_entries(&s, 0..5);
    assert_eq!(count(&s), 9, "the newest commit, read alone");
    assert_eq!(s.store.take_fired(), 0, "no older commit entry read");
}

#[test]
fn a_table_dropped_and_created_again_is_not_read_through_the_old_ones_snapshot() {
    let s = InProcess::start();
    s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)");
    s.sql("INSERT INTO t VALUES (1, 'old'), (2, 'old')");
    assert_eq!(count(&s), 2);
    // The same name, a new log at the same version: a listing after the kept version
    // finds nothing new, so only the check of that version's entry tells them apart.
    assert_eq!(s.sql("DROP TABLE t").status().as_u16(), 200);
    s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)");
    s.sql("INSERT INTO t VALUES (3, 'new')");
    assert_eq!(
        s.rows("SELECT id, v FROM t"),
        vec![vec![json!(3), json!("new")]]
    );
    // And a new log that grew past the kept version, dropped by another writer: its
    // commits must not be applied to the kept table.
    std::fs::remove_dir_all(s.table("t")).expect("drop elsewhere");
    s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)");
    for i in 0..3 {
        s.sql(&format!("INSERT INTO t VALUES ({}, 'newer')", 100 + i));
    }
    assert_eq!(
        s.rows("SELECT id, v FROM t ORDER BY id"),
        vec![
            vec![json!(100), json!("newer")],
            vec![json!(101), json!("newer")],
            vec![json!(102), json!("newer")],
        ]
    );
}
