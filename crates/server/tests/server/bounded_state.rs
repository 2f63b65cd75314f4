//! The server state that outlives requests stays within its caps however many requests
//! come: the query log (entries and bytes), the task list and the per-table writer locks.
//! A soak of the server used to grow these with every request (a query log of up to
//! 10,000 `serde_json` objects with 64 KiB statements each, a lock per table name ever
//! named); these tests fail if one of them grows past its cap again.

use std::collections::HashMap;
use std::sync::Arc;

use deltalite_server::catalog::{Storage, TableName};
use deltalite_server::registry::{
    Cancel, ClientInterface, MAX_LOGGED_REQUESTED_BY_BYTES, MAX_LOGGED_STATEMENT_BYTES,
    QueryIdTaken, QueryLog, QueryStart, TaskLog,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn start(id: &str, statement: &str) -> QueryStart {
    QueryStart {
        interface: ClientInterface::HttpQuery,
        query_id: id.to_string(),
        user: "alice".into(),
        session_id: "s".into(),
        statement: statement.to_string(),
        start_time: "2026-11-30T00:00:00Z".into(),
        visible: true,
        requested_by: None,
        user_agent: Some("test".into()),
    }
}

fn run(log: &mut QueryLog, id: &str, statement: &str) {
    log.start(start(id, statement), CancellationToken::new())
        .unwrap();
    log.finish(id, "2026-11-30T00:00:01Z".into(), 1000, 1, None);
}

#[test]
fn query_log_keeps_the_newest_entries_up_to_its_entry_cap() {
    let mut log = QueryLog::new(100, usize::MAX);
    // Ids of one width, so that every entry counts the same bytes.
    for i in 0..1_000 {
        run(&mut log, &format!("q{i:05}"), "SELECT 1");
    }
    assert_eq!(log.len(), 100);
    assert!(log.get("q00899", "alice").is_none(), "oldest are dropped");
    let last = log.get("q00999", "alice").expect("newest kept");
    assert_eq!(last["query"], json!("SELECT 1"));
    assert_eq!(last["stats"], json!({"rows": 1}));
    assert!(log.get("q00900", "alice").is_some());
    // The byte count follows the entries: it does not creep up as entries churn.
    let bytes = log.bytes();
    for i in 1_000..2_000 {
        run(&mut log, &format!("q{i:05}"), "SELECT 1");
    }
    assert_eq!(log.bytes(), bytes);
}

#[test]
fn query_log_stays_within_its_byte_budget_with_large_statements() {
    let budget = 4 * 1024 * 1024;
    let mut log = QueryLog::new(10_000, budget);
    let big = "x".repeat(10 * MAX_LOGGED_STATEMENT_BYTES);
    for i in 0..500 {
        run(&mut log, &format!("big{i}"), &big);
        assert!(log.bytes() <= budget, "{} > {budget}", log.bytes());
    }
    // 64 KiB per statement: about 60 fit in 4 MiB, not 500.
    assert!(log.len() < 64, "{} entries", log.len());
    assert!(log.len() > 50, "{} entries", log.len());
    let entry = log.get("big499", "alice").expect("newest kept");
    assert_eq!(
        entry["query"].as_str().map(str::len),
        Some(MAX_LOGGED_STATEMENT_BYTES)
    );
}

#[test]
fn oversized_requested_by_is_not_kept() {
    let mut log = QueryLog::new(10, usize::MAX);
    let mut q = start("r", "SELECT 1");
    q.requested_by = Some(json!({"blob": "y".repeat(MAX_LOGGED_REQUESTED_BY_BYTES)}));
    log.start(q, CancellationToken::new()).unwrap();
    assert_eq!(
        log.get("r", "alice").expect("entry")["requested_by"],
        Value::Null
    );
    let mut q = start("s", "SELECT 1");
    q.requested_by = Some(json!({"id": 1}));
    log.start(q, CancellationToken::new()).unwrap();
    assert_eq!(
        log.get("s", "alice").expect("entry")["requested_by"],
        json!({"id": 1})
    );
}

#[test]
fn running_queries_stay_cancellable_while_finished_ones_are_evicted() {
    let mut log = QueryLog::new(10, usize::MAX);
    let token = CancellationToken::new();
    log.start(start("long", "SELECT 42"), token.clone())
        .unwrap();
    for i in 0..100 {
        run(&mut log, &format!("q{i}"), "SELECT 1");
    }
    assert_eq!(log.len(), 10);
    assert_eq!(log.cancel("long", "bob", None), Cancel::NotFound);
    assert_eq!(log.cancel("long", "alice", Some("other")), Cancel::NotFound);
    assert_eq!(log.cancel("long", "alice", Some("s")), Cancel::Cancelled);
    assert!(token.is_cancelled());
    log.finish(
        "long",
        "t".into(),
        1,
        0,
        Some("INTERRUPT Error: Query cancelled".into()),
    );
    assert_eq!(log.cancel("long", "alice", None), Cancel::AlreadyFinished);
    // Finished, it is evicted like the others.
    for i in 100..120 {
        run(&mut log, &format!("q{i}"), "SELECT 1");
    }
    assert!(log.get("long", "alice").is_none());
    assert_eq!(log.len(), 10);
}

#[test]
fn a_reused_query_id_cancels_the_old_query_and_holds_one_entry() {
    let mut log = QueryLog::new(10, usize::MAX);
    let first = CancellationToken::new();
    log.start(start("same", "SELECT 1"), first.clone()).unwrap();
    let bytes = log.bytes();
    log.start(start("same", "SELECT 2"), CancellationToken::new())
        .unwrap();
    assert!(first.is_cancelled());
    assert_eq!(log.len(), 1);
    assert_eq!(log.bytes(), bytes);
    assert_eq!(
        log.get("same", "alice").expect("entry")["query"],
        json!("SELECT 2")
    );
}

/// A query id is per user: another user reusing it must neither cancel the running
/// query nor replace its log entry.
#[test]
fn another_users_query_id_is_refused_and_the_query_keeps_running() {
    let mut log = QueryLog::new(10, usize::MAX);
    let alices = CancellationToken::new();
    log.start(start("mine", "SELECT 1"), alices.clone())
        .unwrap();
    let mut mallory = start("mine", "SELECT 2");
    mallory.user = "mallory".into();
    let refused = log.start(mallory, CancellationToken::new());
    assert_eq!(refused, Err(QueryIdTaken));
    assert!(!alices.is_cancelled(), "alice's query was cancelled");
    assert_eq!(
        log.get("mine", "alice").expect("alice's entry")["query"],
        json!("SELECT 1")
    );
    assert!(log.get("mine", "mallory").is_none());
    assert_eq!(log.cancel("mine", "mallory", None), Cancel::NotFound);
}

#[test]
fn task_list_keeps_the_newest_task_ids_up_to_its_cap() {
    let mut tasks = TaskLog::new(50);
    for i in 0..1_000 {
        tasks.insert(format!("t{i}"), "alice".into());
    }
    assert_eq!(tasks.len(), 50);
    assert!(tasks.owned_by("t999", "alice"));
    assert!(!tasks.owned_by("t999", "bob"));
    assert!(tasks.owned_by("t950", "alice"));
    assert!(!tasks.owned_by("t949", "alice"));
}

#[tokio::test]
async fn table_locks_are_shared_while_held_and_forgotten_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage =
        Storage::open(dir.path().to_str().expect("utf-8 path"), HashMap::new()).expect("storage");
    let name = |t: &str| TableName::new("lakehouse", "main", t).expect("name");

    // Two requests for one table at the same time get one lock.
    let a = storage.table_lock(&name("t"));
    let b = storage.table_lock(&name("t"));
    assert!(Arc::ptr_eq(&a, &b));
    let guard = a.lock().await;
    assert!(b.try_lock().is_err(), "the second writer waits");
    drop(guard);
    drop((a, b));

    // Thousands of table names (written once, or never existing) leave no lasting trace.
    for i in 0..5_000 {
        let lock = storage.table_lock(&name(&format!("t{i}")));
        let _held = lock.lock().await;
    }
    assert!(
        storage.table_lock_count() <= 64,
        "{} lock entries after 5,000 names",
        storage.table_lock_count()
    );

    // A lock held across the churn is still the one handed out.
    let held = storage.table_lock(&name("kept"));
    for i in 0..1_000 {
        drop(storage.table_lock(&name(&format!("u{i}"))));
    }
    assert!(Arc::ptr_eq(&held, &storage.table_lock(&name("kept"))));
}
