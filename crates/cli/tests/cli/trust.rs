//! Server trust, against a real `deltalite serve` process: no statement reaches files or
//! other catalogs however it is wrapped (over HTTP and over Flight SQL), DELETE/UPDATE take any predicate through the
//! engine, no statement answers 500, probes answer without credentials, streamed results
//! are never cut short silently, and writes that create a table make one commit.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use serde_json::{Value, json};

const ALICE: (&str, &str) = ("alice", "secret");
const BOB: (&str, &str) = ("bob", "pw");

/// Every file under `dir`, relative, with its size: what "nothing changed" compares.
fn files(dir: &Path) -> BTreeSet<(String, u64)> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                let rel = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                out.insert((rel, size));
            }
        }
    }
    out
}

/// The error a statement answers (the NDJSON protocol's error line), as `user`.
fn error_as(s: &Server, user: (&str, &str), sql: &str) -> String {
    let lines = s.query_json_as(user, json!({ "statement": sql }));
    assert_eq!(
        lines.len(),
        2,
        "{sql}: an error right after the metadata: {lines:?}"
    );
    lines[1]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{sql}: expected an error, got {lines:?}"))
        .to_string()
}

fn rows_as(s: &Server, user: (&str, &str), sql: &str) -> Vec<Vec<Value>> {
    let lines = s.query_json_as(user, json!({ "statement": sql }));
    for l in &lines {
        assert!(l.get("error").is_none(), "{sql}: {l}");
    }
    lines[2..]
        .iter()
        .map(|l| l.as_array().expect("row").clone())
        .collect()
}

#[test]
fn every_wrapper_of_a_forbidden_statement_is_refused_and_leaves_nothing() {
    let s = Server::start();
    rows_as(
        &s,
        ALICE,
        "CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1), (2); \
         CREATE VIEW v AS SELECT a FROM t",
    );
    rows_as(
        &s,
        BOB,
        "CREATE TABLE other.main.o (a BIGINT); INSERT INTO other.main.o VALUES (7)",
    );
    let marker = std::env::temp_dir().join(format!("deltalite-trust-{}.csv", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let m = marker.display();
    let before = files(&s.data());
    let copy = "Permission Error: COPY is not allowed";
    let explain = "Permission Error: EXPLAIN is only allowed for queries";
    let nested =
        "Permission Error: INSERT, UPDATE, DELETE and MERGE are not allowed inside a query";
    let no_lakehouse = "Catalog Error: Catalog with name lakehouse does not exist!";
    let cases: Vec<((&str, &str), String, String)> = vec![
        // Writing files, plain and under every EXPLAIN flavour.
        (ALICE, format!("COPY (SELECT 1) TO '{m}'"), copy.into()),
        (ALICE, format!("COPY t TO '{m}'"), copy.into()),
        (ALICE, format!("EXPLAIN COPY (SELECT 1) TO '{m}'"), explain.into()),
        (ALICE, format!("EXPLAIN ANALYZE COPY (SELECT 1) TO '{m}'"), explain.into()),
        (ALICE, format!("EXPLAIN VERBOSE COPY (SELECT 1) TO '{m}'"), explain.into()),
        (ALICE, format!("EXPLAIN ANALYZE VERBOSE COPY (SELECT 1) TO '{m}'"), explain.into()),
        (ALICE, format!("EXPLAIN FORMAT TREE COPY (SELECT 1) TO '{m}'"), explain.into()),
        // Writes that would bypass the engine, under EXPLAIN and inside a query.
        (ALICE, "EXPLAIN ANALYZE INSERT INTO t VALUES (5)".into(), explain.into()),
        (ALICE, "EXPLAIN ANALYZE DELETE FROM t".into(), explain.into()),
        (ALICE, "EXPLAIN UPDATE t SET a = 0".into(), explain.into()),
        (ALICE, "WITH x AS (SELECT 5 AS a) INSERT INTO t SELECT a FROM x".into(), nested.into()),
        // External tables, plain and explained.
        (
            ALICE,
            "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'".into(),
            "Permission Error: external tables are not allowed".into(),
        ),
        (
            ALICE,
            "EXPLAIN CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'".into(),
            explain.into(),
        ),
        // Several statements: a refused one anywhere stops the whole request first.
        (ALICE, format!("SELECT 1; COPY (SELECT 1) TO '{m}'"), copy.into()),
        (
            ALICE,
            format!("CREATE TABLE stacked (a INT); EXPLAIN ANALYZE COPY (SELECT 1) TO '{m}'"),
            explain.into(),
        ),
        // Reading files: table functions, URL tables.
        (
            ALICE,
            "SELECT * FROM read_parquet('/etc/passwd')".into(),
            "Catalog Error: Table with name read_parquet does not exist!".into(),
        ),
        (
            ALICE,
            "SELECT 1; SELECT * FROM read_csv('/etc/passwd')".into(),
            "Catalog Error: Table with name read_csv does not exist!".into(),
        ),
        (
            ALICE,
            "EXPLAIN ANALYZE SELECT * FROM parquet_metadata('/etc/passwd')".into(),
            "Catalog Error: Table with name parquet_metadata does not exist!".into(),
        ),
        (
            ALICE,
            "SELECT * FROM 'file:///etc/passwd'".into(),
            "Invalid table name \"file:///etc/passwd\": names are identifiers and may not contain '/', '\\', '%', control characters or start with '.'".into(),
        ),
        // Other settings and objects.
        (
            ALICE,
            "SET datafusion.catalog.location = '/etc'".into(),
            "Permission Error: only SET schema is allowed".into(),
        ),
        (
            ALICE,
            "CREATE MATERIALIZED VIEW v AS SELECT 1".into(),
            "Permission Error: statement not allowed: CREATE MATERIALIZED VIEW".into(),
        ),
        (
            ALICE,
            "ATTACH '/tmp/x.db' AS x".into(),
            "Permission Error: statement not allowed: ATTACH '/tmp/x.db' AS".into(),
        ),
        // Another user's catalog, through every wrapper.
        (BOB, "SELECT * FROM lakehouse.main.t".into(), no_lakehouse.into()),
        (
            BOB,
            "SELECT * FROM other.main.o WHERE EXISTS (SELECT 1 FROM lakehouse.main.t)".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "WITH s AS (SELECT * FROM lakehouse.main.t) SELECT * FROM s".into(),
            no_lakehouse.into(),
        ),
        // A recursive CTE reads its own rows freely, and nothing else it is not granted:
        // in its seed, in its recursive step.
        (
            BOB,
            "WITH RECURSIVE r(n) AS (SELECT a FROM lakehouse.main.t UNION ALL \
             SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL \
             SELECT t.a FROM r JOIN lakehouse.main.t AS t ON t.a > r.n) SELECT * FROM r"
                .into(),
            no_lakehouse.into(),
        ),
        (BOB, "EXPLAIN SELECT * FROM lakehouse.main.t".into(), no_lakehouse.into()),
        (BOB, "EXPLAIN ANALYZE SELECT * FROM lakehouse.main.t".into(), no_lakehouse.into()),
        (BOB, "SELECT 1; SELECT * FROM lakehouse.main.t".into(), no_lakehouse.into()),
        (BOB, "SELECT * FROM lakehouse.information_schema.tables".into(), no_lakehouse.into()),
        (BOB, "DELETE FROM lakehouse.main.t".into(), no_lakehouse.into()),
        (
            BOB,
            "DELETE FROM other.main.o WHERE a IN (SELECT a FROM lakehouse.main.t)".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "UPDATE other.main.o SET a = (SELECT max(a) FROM lakehouse.main.t)".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "INSERT INTO other.main.o SELECT a FROM lakehouse.main.t".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "CREATE TABLE other.main.c AS SELECT * FROM lakehouse.main.t".into(),
            no_lakehouse.into(),
        ),
        (BOB, "DESCRIBE lakehouse.main.t".into(), no_lakehouse.into()),
        (
            BOB,
            "CREATE VIEW other.main.peek AS SELECT * FROM lakehouse.main.t".into(),
            no_lakehouse.into(),
        ),
        (BOB, "DESCRIBE SELECT * FROM lakehouse.main.t".into(), no_lakehouse.into()),
        // SQL writes of every form: the target and every table the source, the
        // conditions or the assignments read.
        (
            BOB,
            "MERGE INTO other.main.o AS d USING lakehouse.main.t AS s ON d.a = s.a \
             WHEN MATCHED THEN DELETE"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "MERGE INTO lakehouse.main.t AS d USING other.main.o AS s ON d.a = s.a \
             WHEN NOT MATCHED THEN INSERT BY NAME"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "MERGE INTO other.main.o AS d USING (SELECT a FROM lakehouse.main.t) AS s \
             ON d.a = s.a WHEN MATCHED THEN UPDATE SET a = s.a"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "MERGE INTO other.main.o AS d USING other.main.o AS s ON d.a = s.a \
             WHEN MATCHED AND EXISTS (SELECT 1 FROM lakehouse.main.t) THEN DELETE"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "MERGE INTO other.main.o AS d USING other.main.o AS s ON d.a = s.a \
             WHEN MATCHED THEN UPDATE SET a = (SELECT max(a) FROM lakehouse.main.t)"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "UPDATE other.main.o SET a = 1 FROM lakehouse.main.t AS s WHERE o.a = s.a".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "DELETE FROM other.main.o USING lakehouse.main.t AS s WHERE o.a = s.a".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "BEGIN TRANSACTION; DELETE FROM lakehouse.main.t; COMMIT;".into(),
            no_lakehouse.into(),
        ),
        (BOB, "COMMENT ON TABLE lakehouse.main.t IS 'x'".into(), no_lakehouse.into()),
        (BOB, "COMMENT ON COLUMN lakehouse.main.t.a IS 'x'".into(), no_lakehouse.into()),
        (
            BOB,
            "ALTER TABLE lakehouse.main.t SET PARTITIONED BY (a)".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "ALTER TABLE lakehouse.main.t SET TBLPROPERTIES \
             ('delta.enableDeletionVectors' = 'true')"
                .into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "SELECT 1; ALTER TABLE lakehouse.main.t SET TBLPROPERTIES \
             ('delta.enableDeletionVectors' = 'true')"
                .into(),
            no_lakehouse.into(),
        ),
        // Schema changes and the views' own statements, plain and second in a script.
        (
            BOB,
            "ALTER TABLE lakehouse.main.t RENAME COLUMN a TO b".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "SELECT 1; ALTER TABLE lakehouse.main.t RENAME COLUMN a TO b".into(),
            no_lakehouse.into(),
        ),
        (
            BOB,
            "ALTER TABLE lakehouse.main.t ADD COLUMN d VARCHAR DEFAULT 'x'".into(),
            no_lakehouse.into(),
        ),
        (BOB, "ALTER TABLE lakehouse.main.t DROP COLUMN a".into(), no_lakehouse.into()),
        (BOB, "TRUNCATE lakehouse.main.t".into(), no_lakehouse.into()),
        (BOB, "DROP TABLE lakehouse.main.t".into(), no_lakehouse.into()),
        (BOB, "COMMENT ON VIEW lakehouse.main.v IS 'x'".into(), no_lakehouse.into()),
        (
            BOB,
            "SELECT 1; COMMENT ON VIEW lakehouse.main.v IS 'x'".into(),
            no_lakehouse.into(),
        ),
        (BOB, "ALTER VIEW lakehouse.main.v RENAME TO w".into(), no_lakehouse.into()),
        (BOB, "DROP VIEW lakehouse.main.v".into(), no_lakehouse.into()),
        (
            BOB,
            "CREATE OR REPLACE VIEW lakehouse.main.v AS SELECT 1 AS a".into(),
            no_lakehouse.into(),
        ),
        // A default is a constant, never a query: it cannot read another catalog.
        (
            BOB,
            "CREATE TABLE other.main.d (a BIGINT DEFAULT (SELECT max(a) FROM lakehouse.main.t))"
                .into(),
            "Not implemented Error: the DEFAULT of column a is not a constant (it calls a \
             function, names a column or runs a query): a default is stored once, not \
             computed for each row"
                .into(),
        ),
        (
            ALICE,
            "EXPLAIN MERGE INTO t USING t AS s ON t.a = s.a WHEN MATCHED THEN DELETE".into(),
            explain.into(),
        ),
        (
            ALICE,
            "ALTER TABLE t SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')".into(),
            "Not implemented Error: ALTER TABLE SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true') is not supported".into(),
        ),
    ];
    for (user, sql, expected) in &cases {
        let err = error_as(&s, *user, sql);
        assert_eq!(&err, expected, "{} ran {sql}", user.0);
        assert_eq!(
            files(&s.data()),
            before,
            "{} ran {sql}: the data root changed",
            user.0
        );
        assert!(!marker.exists(), "{sql} wrote {m}");
    }
    // The same refusals, word for word, over Flight SQL, on every path a client sends a
    // statement by: GetFlightInfo (executes), DoPut (update), a prepared statement.
    let mut over_flight = [
        (ALICE, flight::Flight::login(&s, ALICE)),
        (BOB, flight::Flight::login(&s, BOB)),
    ];
    for (user, sql, expected) in &cases {
        let (_, f) = over_flight
            .iter_mut()
            .find(|(u, _)| u == user)
            .expect("a connection for the user");
        // Inside a transaction too (which first names the tables a statement writes),
        // rolled back after.
        let txn = f.rt.block_on(f.client.begin_transaction()).expect("begin");
        let in_transaction =
            f.rt.block_on(f.client.execute_update(sql.to_string(), Some(txn.clone())))
                .map(|_| ())
                .map_err(flight::status_of);
        f.rt.block_on(
            f.client
                .end_transaction(txn, arrow_flight::sql::EndTransaction::Rollback),
        )
        .expect("rollback");
        let outcomes = [
            ("query", f.query(sql).map(|_| ())),
            ("update", f.update(sql).map(|_| ())),
            ("prepared", f.prepared_query(sql, None).map(|_| ())),
            ("transaction", in_transaction),
        ];
        for (path, outcome) in outcomes {
            let status = outcome
                .err()
                .unwrap_or_else(|| panic!("{} ran {sql} over flight ({path})", user.0));
            assert_eq!(
                (status.code(), status.message()),
                (tonic::Code::InvalidArgument, expected.as_str()),
                "{} ran {sql} over flight ({path})",
                user.0
            );
            assert_eq!(
                files(&s.data()),
                before,
                "{} ran {sql} over flight ({path}): the data root changed",
                user.0
            );
            assert!(!marker.exists(), "{sql} over flight ({path}) wrote {m}");
        }
    }
    // Both catalogs hold what they held.
    assert_eq!(
        rows_as(&s, ALICE, "SELECT a FROM t ORDER BY a"),
        vec![vec![json!(1)], vec![json!(2)]]
    );
    assert_eq!(
        rows_as(&s, BOB, "SELECT a FROM other.main.o"),
        vec![vec![json!(7)]]
    );
    // information_schema shows a user only their own catalogs.
    assert_eq!(
        rows_as(
            &s,
            BOB,
            "SELECT DISTINCT table_catalog FROM information_schema.tables"
        ),
        vec![vec![json!("other")]]
    );
    assert_eq!(
        rows_as(
            &s,
            BOB,
            "SELECT DISTINCT table_catalog FROM information_schema.columns"
        ),
        vec![vec![json!("other")]]
    );
    // The generators read no storage and stay usable.
    assert_eq!(
        rows_as(&s, BOB, "SELECT count(*) FROM generate_series(1, 5)"),
        vec![vec![json!(5)]]
    );
}

/// Versions of a local table: its commit files.
fn versions(s: &Server, table: &str) -> usize {
    std::fs::read_dir(
        s.data()
            .join("lakehouse/main")
            .join(table)
            .join("_delta_log"),
    )
    .expect("log")
    .flatten()
    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
    .count()
}

/// The files a local table's current version references, read from its log.
fn data_files(s: &Server, table: &str) -> BTreeSet<String> {
    let uri = s.data().join("lakehouse/main").join(table);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let t = deltalite::DeltaLiteTable::open(uri.to_str().expect("path"), Default::default())
            .await
            .expect("open");
        t.files()
            .expect("files")
            .into_iter()
            .map(|f| f.path)
            .collect()
    })
}

#[test]
fn delete_and_update_take_any_predicate_and_replace_only_matching_files() {
    let s = Server::start();
    // Three commits, three files: ids 1-2 / 3-4 / 5-6.
    rows_as(&s, ALICE, "CREATE TABLE t (id BIGINT, k VARCHAR, v BIGINT)");
    for (a, b) in [(1, 2), (3, 4), (5, 6)] {
        rows_as(
            &s,
            ALICE,
            &format!("INSERT INTO t VALUES ({a}, 'k{a}', {a}0), ({b}, 'k{b}', {b}0)"),
        );
    }
    rows_as(
        &s,
        ALICE,
        "CREATE TABLE s (id BIGINT, k VARCHAR); INSERT INTO s VALUES (3, 'k3'), (4, 'nope')",
    );
    let all = |s: &Server| rows_as(s, ALICE, "SELECT id, k, v FROM t ORDER BY id");
    let files_before = data_files(&s, "t");
    let v = versions(&s, "t");
    // Row-value IN with a subquery (dlt's hard-delete form): one match, in file 2.
    let n = rows_as(
        &s,
        ALICE,
        "DELETE FROM t WHERE (id, k) IN (SELECT id, k FROM s)",
    );
    assert_eq!(n, vec![vec![json!(1)]]);
    assert_eq!(versions(&s, "t"), v + 1, "one commit");
    let files_after = data_files(&s, "t");
    // Files 1 and 3 untouched (still referenced); file 2 replaced by one new file.
    assert_eq!(files_before.intersection(&files_after).count(), 2);
    assert_eq!(
        files_after.len(),
        3,
        "the matching file replaced by one new file"
    );
    // Correlated EXISTS with an alias (`DELETE … AS alias WHERE EXISTS`).
    let n = rows_as(
        &s,
        ALICE,
        "DELETE FROM t AS d WHERE EXISTS (SELECT 1 FROM s WHERE s.id + 1 = d.id)",
    );
    assert_eq!(
        n,
        vec![vec![json!(2)]],
        "ids 4 and 5 are s.id 3 + 1 and 4 + 1"
    );
    // A predicate matching nothing commits nothing.
    let v = versions(&s, "t");
    assert_eq!(
        rows_as(&s, ALICE, "DELETE FROM t WHERE id > 100"),
        vec![vec![json!(0)]]
    );
    assert_eq!(versions(&s, "t"), v, "no commit for no match");
    // UPDATE with an uncorrelated scalar subquery and an IN subquery.
    let n = rows_as(
        &s,
        ALICE,
        "UPDATE t SET v = (SELECT max(id) FROM s) * 100, k = k || '!' WHERE id IN (SELECT max(id) FROM t)",
    );
    assert_eq!(n, vec![vec![json!(1)]]);
    assert_eq!(
        all(&s),
        vec![
            vec![json!(1), json!("k1"), json!(10)],
            vec![json!(2), json!("k2"), json!(20)],
            vec![json!(6), json!("k6!"), json!(400)],
        ]
    );
    // A subquery naming the target reads the table as it was before the statement.
    let n = rows_as(&s, ALICE, "DELETE FROM t WHERE v < (SELECT avg(v) FROM t)");
    assert_eq!(n, vec![vec![json!(2)]], "avg is 143.3: ids 1 and 2 go");
    assert_eq!(rows_as(&s, ALICE, "SELECT id FROM t"), vec![vec![json!(6)]]);
    // Errors inside the predicate are the client's, typed, and write nothing.
    let v = versions(&s, "t");
    assert_eq!(
        error_as(&s, ALICE, "DELETE FROM t WHERE nope = 1"),
        "Binder Error: No field named nope.\nValid fields are t.id, t.k, t.v."
    );
    assert_eq!(versions(&s, "t"), v);
}

/// Statements built from pieces of every kind the parser takes, valid and broken.
mod generated {
    use super::*;
    use proptest::prelude::*;

    fn table() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "t",
            "lakehouse.main.t",
            "other.main.o",
            "missing",
            "\"we ird\"",
            "information_schema.tables",
            "generate_series(1, 3)",
        ])
    }

    fn expr() -> impl Strategy<Value = String> {
        let leaf = prop::sample::select(vec![
            "a",
            "1",
            "NULL",
            "'x'",
            "a + 1",
            "-a",
            "a / 0",
            "a // 0",
            "CAST(a AS VARCHAR)",
            "now()",
            "E'it''s'",
            "from_base64('eA==')",
        ])
        .prop_map(String::from);
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("{x} = {y}")),
                (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("({x} AND {y})")),
                inner.clone().prop_map(|x| format!("NOT ({x})")),
                (inner.clone(), table()).prop_map(|(x, t)| format!("{x} IN (SELECT a FROM {t})")),
                (inner.clone(), table())
                    .prop_map(|(x, t)| format!("({x}, a) IN (SELECT a, a FROM {t})")),
                table().prop_map(|t| format!("EXISTS (SELECT 1 FROM {t} s WHERE s.a = t.a)")),
                table().prop_map(|t| format!("(SELECT max(a) FROM {t})")),
                inner
                    .clone()
                    .prop_map(|x| format!("CASE WHEN {x} THEN 1 ELSE 0 END")),
                inner.prop_map(|x| format!("coalesce({x}, 0)")),
            ]
        })
    }

    fn statement() -> impl Strategy<Value = String> {
        prop_oneof![
            (expr(), table(), expr())
                .prop_map(|(e, t, w)| format!("SELECT {e} FROM {t} WHERE {w}")),
            (table(), expr()).prop_map(|(t, w)| format!("DELETE FROM {t} WHERE {w}")),
            (table(), expr(), expr())
                .prop_map(|(t, e, w)| format!("UPDATE {t} SET a = {e} WHERE {w}")),
            (table(), expr(), table())
                .prop_map(|(t, e, f)| format!("INSERT INTO {t} SELECT {e} FROM {f}")),
            (expr(), table()).prop_map(|(e, t)| format!("EXPLAIN ANALYZE SELECT {e} FROM {t}")),
            (expr(), table())
                .prop_map(|(e, t)| format!("WITH c AS (SELECT {e} AS a FROM {t}) SELECT * FROM c")),
            (expr(), table()).prop_map(|(e, t)| format!(
                "CREATE OR REPLACE TABLE g AS SELECT {e} AS a FROM {t}"
            )),
            (table(), expr()).prop_map(|(t, e)| format!(
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS b BIGINT; SELECT {e}"
            )),
            (table(), table(), expr(), expr(), merge_action()).prop_map(|(t, s, on, c, act)| {
                format!(
                    "MERGE INTO {t} AS d USING {s} AS s ON {on} WHEN MATCHED AND {c} THEN {act} \
                     WHEN NOT MATCHED THEN INSERT BY NAME"
                )
            }),
            (table(), table(), expr()).prop_map(|(t, s, w)| format!(
                "UPDATE {t} SET a = s.a FROM {s} AS s WHERE {w}"
            )),
            (table(), table(), expr())
                .prop_map(|(t, s, w)| format!("DELETE FROM {t} USING {s} AS s WHERE {w}")),
            (table(), expr()).prop_map(|(t, e)| format!(
                "BEGIN; ALTER TABLE {t} SET PARTITIONED BY (a, month(a)); COMMENT ON COLUMN {t}.a IS 'x'; DESCRIBE SELECT {e}; COMMIT"
            )),
        ]
    }

    fn merge_action() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "UPDATE SET a = s.a",
            "UPDATE BY NAME",
            "UPDATE SET *",
            "DELETE",
            "DO NOTHING",
            "ERROR",
            "UPDATE",
        ])
    }

    /// A statement, sometimes broken: a token dropped, a prefix cut, a stray character.
    fn maybe_broken() -> impl Strategy<Value = String> {
        (
            statement(),
            0..4usize,
            any::<prop::sample::Index>(),
            prop::sample::select(vec!["(", ")", "'", ",", ";", "\"", "::"]),
        )
            .prop_map(|(sql, how, at, junk)| {
                let cut = at.index(sql.len().max(1));
                let cut = (0..=cut)
                    .rev()
                    .find(|&i| sql.is_char_boundary(i))
                    .unwrap_or(0);
                match how {
                    0 => sql[..cut].to_string(),
                    1 => format!("{}{junk}{}", &sql[..cut], &sql[cut..]),
                    2 => sql
                        .split_whitespace()
                        .enumerate()
                        .filter(|(i, _)| *i != cut % 7)
                        .map(|(_, w)| w)
                        .collect::<Vec<_>>()
                        .join(" "),
                    _ => sql,
                }
            })
    }

    #[test]
    fn generated_statements_never_answer_500() {
        let s = Server::start();
        rows_as(
            &s,
            ALICE,
            "CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1), (2), (NULL)",
        );
        rows_as(
            &s,
            ALICE,
            "CREATE TABLE other.main.o (a BIGINT); INSERT INTO other.main.o VALUES (3)",
        );
        // More cases for a longer hunt: DELTALITE_SQL_FUZZ_CASES=5000.
        let cases = std::env::var("DELTALITE_SQL_FUZZ_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256);
        let config = ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        };
        let mut runner = proptest::test_runner::TestRunner::new(config);
        let result = runner.run(
            &(maybe_broken(), prop::bool::ANY, prop::bool::ANY),
            |(sql, as_bob, csv)| {
                let user = if as_bob { BOB } else { ALICE };
                let body = if csv {
                    json!({ "statement": sql, "format": "csv" })
                } else {
                    json!({ "statement": sql })
                };
                let r = s.post_as(
                    user,
                    "/query",
                    "application/json",
                    body.to_string().into_bytes(),
                    &[],
                );
                let status = r.status().as_u16();
                let text = r.text().unwrap_or_default();
                prop_assert!(
                    matches!(status, 200 | 400 | 404),
                    "{sql} ({}, csv {csv}) answered {status}: {text}",
                    user.0
                );
                // A panic caught mid-stream would still answer 200 with an error line.
                prop_assert!(
                    !text.to_lowercase().contains("panick"),
                    "{sql} ({}, csv {csv}) reported a panic: {text}",
                    user.0
                );
                Ok(())
            },
        );
        if let Err(e) = result {
            panic!("{e}");
        }
        assert!(s.healthy());
    }
}

#[test]
fn probes_answer_without_credentials_and_say_nothing_else() {
    let s = Server::start();
    let get = |path: &str| s.client.get(s.url(path)).send().expect("request");
    for path in ["/livez", "/readyz"] {
        let r = get(path);
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(
            r.json::<Value>().expect("json"),
            json!({"status": "ok"}),
            "{path}"
        );
    }
    assert_eq!(
        get("/healthz").status().as_u16(),
        401,
        "healthz keeps its auth"
    );
    assert_eq!(get("/metrics").status().as_u16(), 401);
    // The data root gone: not ready, retry later, and no detail for an anonymous caller.
    std::fs::remove_dir_all(s.data()).expect("remove the data root");
    let r = get("/readyz");
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(
        r.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    assert_eq!(
        r.json::<Value>().expect("json"),
        json!({"status": "unavailable"})
    );
    assert_eq!(
        get("/livez").status().as_u16(),
        200,
        "the process is still up"
    );
}

/// Every batch of this query fails (integer division by zero in every row).
const EARLY_ERROR: &str = "SELECT x, 10 // (x - x) AS q FROM generate_series(1, 200000) AS s(x)";
/// One batch of this query fails (x = 150000). Batches arrive in no fixed order (the
/// plan spreads them over partitions), so the failure may come first or after others.
const SOME_BATCH_FAILS: &str =
    "SELECT x, 10 // (x - 150000) AS q FROM generate_series(1, 200000) AS s(x)";
/// Endless rows, slowly: its first batch comes at once, the query timeout much later.
const ENDLESS: &str =
    "SELECT x, sha256(CAST(x AS VARCHAR)) AS h FROM generate_series(1, 1000000000000) AS s(x)";

#[test]
fn a_truncated_result_is_never_a_clean_success() {
    let s = Server::start_with(&["--query-timeout-secs", "2"]);
    let post = |sql: &str, format: Option<&str>| {
        let mut body = json!({ "statement": sql });
        if let Some(f) = format {
            body["format"] = json!(f);
        }
        s.post_as(
            ALICE,
            "/query",
            "application/json",
            body.to_string().into_bytes(),
            &[],
        )
    };
    for format in ["csv", "jsonl"] {
        // Found before the first batch: a proper error status with the message.
        let r = post(EARLY_ERROR, Some(format));
        assert_eq!(r.status().as_u16(), 400, "{format}");
        assert!(
            r.text().unwrap_or_default().contains("Division by zero"),
            "{format}"
        );
        // Found after the headers (the deadline passes mid-stream): the body is aborted,
        // so the client sees an incomplete body, not a short result that looks complete.
        let r = post(ENDLESS, Some(format));
        assert_eq!(r.status().as_u16(), 200, "{format}");
        let body = r.bytes();
        assert!(
            body.is_err(),
            "{format}: a stop after the headers must abort the body, got {} bytes",
            body.map(|b| b.len()).unwrap_or(0)
        );
        // Whenever the failing batch comes: a 400, or an aborted body, never a clean 200.
        let r = post(SOME_BATCH_FAILS, Some(format));
        match r.status().as_u16() {
            400 => assert!(r.text().unwrap_or_default().contains("Division by zero")),
            200 => assert!(
                r.bytes().is_err(),
                "{format}: a clean 200 with a short body"
            ),
            other => panic!("{format}: {other}"),
        }
    }
    // Parquet is spooled whole first: every error is a proper status.
    let r = post(EARLY_ERROR, Some("parquet"));
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap_or_default().contains("Division by zero"));
    let r = post(SOME_BATCH_FAILS, Some("parquet"));
    assert_eq!(r.status().as_u16(), 400);
    let r = post(ENDLESS, Some("parquet"));
    assert_eq!(r.status().as_u16(), 504);
    assert_eq!(
        r.text().unwrap_or_default(),
        "INTERRUPT Error: Query timed out\n"
    );
    // The NDJSON protocol: an early error right after the metadata; a late one as an
    // in-stream error line, the last line.
    let lines = s.query(EARLY_ERROR);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1]["error"]
            .as_str()
            .unwrap_or("")
            .contains("Division by zero")
    );
    let lines = s.query(ENDLESS);
    assert!(lines.len() > 3, "rows came before the stop");
    assert_eq!(
        lines.last().expect("lines")["error"],
        json!("INTERRUPT Error: Query timed out")
    );
    // And complete results are complete, in every format.
    for format in ["csv", "jsonl", "parquet"] {
        let r = post(
            "SELECT x FROM generate_series(1, 20000) AS s(x)",
            Some(format),
        );
        assert_eq!(r.status().as_u16(), 200);
        assert!(r.bytes().expect("complete body").len() > 20000, "{format}");
    }
}

/// Upload `body` to a new table and return the table's commit count and rows.
fn created(s: &Server, table: &str) -> (usize, i64) {
    let count = rows_as(s, ALICE, &format!("SELECT count(*) FROM {table}"));
    (versions(s, table), count[0][0].as_i64().expect("count"))
}

#[test]
fn a_request_that_creates_a_table_makes_one_commit_holding_the_rows() {
    let s = Server::start();
    let csv = "id,v\n1,a\n2,b\n2,c\n";
    for (path, table) in [
        (
            "/upload?catalog=lakehouse&schema=main&mode=create&table=c1",
            "c1",
        ),
        (
            "/upload?catalog=lakehouse&schema=main&mode=create_append&table=c2",
            "c2",
        ),
        (
            "/upload?catalog=lakehouse&schema=main&mode=overwrite&table=c3",
            "c3",
        ),
        (
            "/upsert?catalog=lakehouse&schema=main&primary_key=id&table=c4",
            "c4",
        ),
    ] {
        let r = s.post(path, "text/csv", csv);
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let summary: Value = r.json().expect("summary");
        assert_eq!(summary["version"], json!(0), "{path}: {summary}");
        assert_eq!(summary["created"], json!(true), "{path}");
        let rows = if table == "c4" { 2 } else { 3 };
        assert_eq!(
            created(&s, table),
            (1, rows),
            "{path}: version 0 holds the rows"
        );
    }
    // Parquet, stored as it is in version 0.
    let batch = sample_batch();
    let r = s.post(
        "/upload?catalog=lakehouse&schema=main&mode=create&table=p1",
        "application/parquet",
        parquet_bytes(&batch),
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(created(&s, "p1"), (1, batch.num_rows() as i64));
    // /append of JSON.
    let r = s.post(
        "/append?catalog=lakehouse&schema=main&table=j1",
        "application/json",
        r#"[{"a": 1}, {"a": 2}]"#,
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(created(&s, "j1"), (1, 2));
    // CREATE TABLE AS.
    rows_as(
        &s,
        ALICE,
        "CREATE TABLE q1 AS SELECT x FROM generate_series(1, 10) AS s(x)",
    );
    assert_eq!(created(&s, "q1"), (1, 10));
    // A create whose rows fail leaves no table, no folder.
    let r = s.post(
        "/upload?catalog=lakehouse&schema=main&mode=create&table=bad",
        "text/csv",
        "a,b\n1,2\n3\n",
    );
    assert_eq!(r.status().as_u16(), 400);
    assert!(!s.data().join("lakehouse/main/bad").exists());
    assert_eq!(
        error_as(
            &s,
            ALICE,
            "CREATE TABLE bad2 AS SELECT 1 // (x - 3) AS y FROM generate_series(1, 5) AS s(x)"
        ),
        "Invalid Input Error: Division by zero"
    );
    assert!(!s.data().join("lakehouse/main/bad2").exists());
}

fn sample_batch() -> arrow::record_batch::RecordBatch {
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;
    arrow::record_batch::RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from(vec![1, 2, 3])) as arrow::array::ArrayRef,
        ),
        (
            "v",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as arrow::array::ArrayRef,
        ),
    ])
    .expect("batch")
}

#[test]
fn an_upsert_body_is_bounded_by_the_source_guard_while_it_decodes() {
    let s = Server::start_env(&[], &[("DELTALITE_MAX_SOURCE_BYTES", "200000")]);
    // Over the source guard: refused while decoding, before a table exists.
    let mut big = String::from("id,v\n");
    for i in 0..40_000 {
        big.push_str(&format!("{i},{}\n", "x".repeat(20)));
    }
    let r = s.post(
        "/upsert?catalog=lakehouse&schema=main&table=big&primary_key=id",
        "text/csv",
        big,
    );
    assert_eq!(r.status().as_u16(), 400);
    let text = r.text().unwrap_or_default();
    assert!(
        text.starts_with("Failed to execute ingest: source too large: "),
        "{text}"
    );
    assert!(text.contains("exceeds the limit of 200000 bytes"), "{text}");
    assert!(!s.data().join("lakehouse/main/big").exists());
}
