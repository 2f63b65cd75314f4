//! End-to-end tests of `deltalite serve`: a real process on loopback, real Delta tables.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use base64::Engine;
use common::{Server, parquet_bytes, read_parquet};
use serde_json::{Value, json};

const T: &str = "catalog=lakehouse&schema=main";

#[test]
fn auth_health_and_metrics() {
    let s = Server::start();
    let get = |auth: Option<&str>| {
        let mut r = s.client.get(s.url("/healthz"));
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        r.send().expect("send").status().as_u16()
    };
    assert_eq!(get(None), 401);
    let wrong = base64::engine::general_purpose::STANDARD.encode("alice:nope");
    assert_eq!(get(Some(&format!("Basic {wrong}"))), 401);
    assert_eq!(get(Some("Basic !!notbase64")), 401);
    let good = base64::engine::general_purpose::STANDARD.encode("alice:secret");
    assert_eq!(get(Some(&format!("Basic {good}"))), 200);
    assert_eq!(get(Some(&format!("Bearer {good}"))), 200);
    // Every endpoint needs auth, including /query and /metrics.
    let r = s
        .client
        .post(s.url("/query"))
        .body("{}")
        .send()
        .expect("send");
    assert_eq!(r.status().as_u16(), 401);
    let r = s.client.get(s.url("/metrics")).send().expect("send");
    assert_eq!(r.status().as_u16(), 401);
    let (status, _) = s.upload(&format!("{T}&table=m&mode=create"), "text/csv", "a\n1\n");
    assert_eq!(status, 200);
    let metrics = s
        .client
        .get(s.url("/metrics"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send")
        .text()
        .expect("text");
    assert!(
        metrics.contains("deltalite_http_requests_total"),
        "{metrics}"
    );
}

/// The value of an unlabelled gauge in Prometheus text.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok()).flatten()
    })
}

#[test]
fn query_log_and_lock_map_stay_at_their_caps() {
    let s = Server::start_with(&["--query-log-entries", "5"]);
    let (st, body) = s.upload(&format!("{T}&table=q&mode=create"), "text/csv", "a\n1\n");
    assert_eq!(st, 200, "{body}");
    for i in 0..12 {
        let lines = s.query_json_as(
            ("alice", "secret"),
            json!({"statement": "SELECT a FROM q", "query_id": format!("cap-{i}")}),
        );
        assert_eq!(lines[2], json!([1]));
    }
    // Appends to tables that do not exist: each takes (and used to keep) a writer lock.
    for i in 0..200 {
        let (st, _) = s.upload(
            &format!("{T}&table=missing{i}&mode=append"),
            "text/csv",
            "a\n1\n",
        );
        assert_eq!(st, 400);
    }
    let status = |id: &str| {
        s.client
            .get(s.url(&format!("/query/{id}")))
            .basic_auth("alice", Some("secret"))
            .send()
            .expect("send")
            .status()
            .as_u16()
    };
    assert_eq!(status("cap-0"), 404, "the oldest entries are forgotten");
    assert_eq!(status("cap-6"), 404);
    assert_eq!(status("cap-7"), 200);
    assert_eq!(status("cap-11"), 200);
    let metrics = s
        .client
        .get(s.url("/metrics"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send")
        .text()
        .expect("text");
    assert_eq!(
        gauge(&metrics, "deltalite_query_log_entries"),
        Some(5.0),
        "{metrics}"
    );
    let bytes = gauge(&metrics, "deltalite_query_log_bytes").expect("bytes gauge");
    assert!(
        bytes > 0.0 && bytes < 5.0 * 2048.0,
        "{bytes} bytes for 5 short queries"
    );
    let locks = gauge(&metrics, "deltalite_table_locks").expect("locks gauge");
    assert!(locks <= 64.0, "{locks} lock entries after 201 table names");
    assert!(
        metrics.contains("deltalite_query_cache_bytes{cache=\"file_metadata\"}"),
        "{metrics}"
    );
}

#[test]
fn tables_kept_open_between_queries_stay_within_their_file_bound() {
    // `--query-table-cache-files 5`: tables of two files each, so two fit and a third
    // pushes out the least recently used; the hits and misses are in /metrics.
    let s = Server::start_with(&["--query-table-cache-files", "5"]);
    for table in ["k1", "k2", "k3"] {
        for row in ["a\n1\n", "a\n2\n"] {
            let mode = if row.contains('1') {
                "create"
            } else {
                "append"
            };
            let (st, body) = s.upload(&format!("{T}&table={table}&mode={mode}"), "text/csv", row);
            assert_eq!(st, 200, "{body}");
        }
    }
    let sum = |table: &str| {
        let lines = s.query_json_as(
            ("alice", "secret"),
            json!({"statement": format!("SELECT sum(a) FROM {table}")}),
        );
        assert_eq!(lines[2], json!([3]), "{table}");
    };
    let metrics = || {
        s.client
            .get(s.url("/metrics"))
            .basic_auth("alice", Some("secret"))
            .send()
            .expect("send")
            .text()
            .expect("text")
    };
    // k1 and k2 opened (misses), k1 again (a hit), k3 opened: k2 goes, the least recently
    // used; k1 again (a hit), k2 again (opened afresh).
    for table in ["k1", "k2", "k1", "k3", "k1", "k2"] {
        sum(table);
    }
    let m = metrics();
    assert_eq!(gauge(&m, "deltalite_query_tables_kept"), Some(2.0), "{m}");
    assert_eq!(
        gauge(&m, "deltalite_query_tables_kept_files"),
        Some(4.0),
        "{m}"
    );
    assert_eq!(
        gauge(&m, "deltalite_query_tables_kept_limit_files"),
        Some(5.0),
        "{m}"
    );
    let opens = |event: &str| {
        m.lines().find_map(|l| {
            let rest = l.strip_prefix(&format!(
                "deltalite_query_table_opens_total{{event=\"{event}\"}} "
            ))?;
            rest.trim().parse::<f64>().ok()
        })
    };
    assert_eq!(opens("hit"), Some(2.0), "{m}");
    assert_eq!(opens("miss"), Some(4.0), "{m}");
}

#[test]
fn upload_modes_and_formats() {
    let s = Server::start();
    let (st, body) = s.upload(
        &format!("{T}&table=people&mode=create"),
        "text/csv",
        "id,name\n1,ann\n2,bob\n",
    );
    assert_eq!(st, 200, "{body}");
    let (st, body) = s.upload(
        &format!("{T}&table=people&mode=create"),
        "text/csv",
        "id,name\n3,cy\n",
    );
    assert_eq!(st, 400);
    assert!(body.starts_with("Failed to execute ingest: "), "{body}");
    // append (default mode): JSON array, then NDJSON, content type sniffed.
    let (st, body) = s.upload(
        &format!("{T}&table=people"),
        "application/octet-stream",
        r#"[{"id": 3, "name": "cy"}]"#,
    );
    assert_eq!(st, 200, "{body}");
    let (st, body) = s.upload(
        &format!("{T}&table=people&mode=append"),
        "application/json; charset=utf-8",
        "{\"id\": 4}\n{\"id\": 5, \"name\": \"eve\"}\n",
    );
    assert_eq!(st, 200, "{body}");
    // A column the table lacks is an error.
    let (st, body) = s.upload(
        &format!("{T}&table=people&mode=append"),
        "text/csv",
        "id,zzz\n9,1\n",
    );
    assert_eq!(st, 400, "{body}");
    // append to a missing table is an error; create_append creates it.
    let (st, _) = s.upload(&format!("{T}&table=nope&mode=append"), "text/csv", "a\n1\n");
    assert_eq!(st, 400);
    let (st, body) = s.upload(
        &format!("{T}&table=ca&mode=create_append"),
        "text/csv",
        "a\n1\n",
    );
    assert_eq!(st, 200, "{body}");
    let (st, _) = s.upload(
        &format!("{T}&table=ca&mode=create_append"),
        "text/csv",
        "a\n2\n",
    );
    assert_eq!(st, 200);
    assert_eq!(s.rows("SELECT count(*) FROM ca"), vec![vec![json!(2)]]);
    let rows = s.rows("SELECT id, name FROM \"lakehouse\".\"main\".\"people\" ORDER BY id");
    assert_eq!(
        rows,
        vec![
            vec![json!(1), json!("ann")],
            vec![json!(2), json!("bob")],
            vec![json!(3), json!("cy")],
            vec![json!(4), Value::Null],
            vec![json!(5), json!("eve")],
        ]
    );
    // overwrite keeps the table but replaces contents and schema.
    let (st, body) = s.upload(
        &format!("{T}&table=people&mode=overwrite"),
        "text/csv",
        "id,name,age\n7,zed,40\n",
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        s.rows("SELECT id, name, age FROM people"),
        vec![vec![json!(7), json!("zed"), json!(40)]]
    );
    // Parquet upload, append stored as is.
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec!["a", "b"])),
        ],
    )
    .expect("batch");
    let (st, body) = s.upload(
        &format!("{T}&table=pq&mode=create"),
        "application/parquet",
        parquet_bytes(&batch),
    );
    assert_eq!(st, 200, "{body}");
    let (st, body) = s.upload(
        &format!("{T}&table=pq&mode=append"),
        "application/octet-stream",
        parquet_bytes(&batch),
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        s.rows("SELECT count(*), sum(k) FROM pq"),
        vec![vec![json!(4), json!(6)]]
    );
    // Legacy shape: format= hint and mode=upsert.
    let (st, body) = s.upload(
        &format!("{T}&table=pq&format=csv&mode=upsert&primary_key=k"),
        "",
        "k,v\n2,B\n3,c\n",
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        s.rows("SELECT k, v FROM pq ORDER BY k, v"),
        vec![
            vec![json!(1), json!("a")],
            vec![json!(1), json!("a")],
            // Both stored rows with key 2 match and are replaced.
            vec![json!(2), json!("B")],
            vec![json!(2), json!("B")],
            vec![json!(3), json!("c")]
        ]
    );
}

#[test]
fn ndjson_result_grammar() {
    let s = Server::start();
    let (st, body) = s.upload(
        &format!("{T}&table=g&mode=create"),
        "application/json",
        "[{\"id\": 9007199254740993, \"s\": \"line\\u2028sep\\u2029x\\u0085\", \"f\": 1.5}]",
    );
    assert_eq!(st, 200, "{body}");
    let r = s.post(
        "/query",
        "text/plain",
        json!({"statement": "SELECT id, s, f FROM g", "query_id": "qid-1", "session_id": "sess"})
            .to_string(),
    );
    let text = r.text().expect("text");
    assert!(
        text.contains("\\u2028") && text.contains("\\u2029") && text.contains("\\u0085"),
        "{text}"
    );
    assert!(!text.contains('\u{2028}'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let meta = &lines[0];
    for key in [
        "statement",
        "rows_limit",
        "rows_offset",
        "init_time_ms",
        "connections_errors",
        "session_id",
        "query_id",
        "worker_slug",
    ] {
        assert!(meta.get(key).is_some(), "metadata lacks {key}: {meta}");
    }
    assert_eq!(meta["query_id"], json!("qid-1"));
    assert_eq!(meta["session_id"], json!("sess"));
    assert_eq!(
        lines[1],
        json!([{"name": "id", "type": "BIGINT"}, {"name": "s", "type": "VARCHAR"}, {"name": "f", "type": "DOUBLE"}])
    );
    // 64-bit integers stay exact JSON numbers.
    assert!(text.contains("9007199254740993"));
    assert_eq!(lines[2][1], json!("line\u{2028}sep\u{2029}x\u{0085}"));
    // Columns are typed even when the result is empty.
    let lines = s.query("SELECT id, s FROM g WHERE false");
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1],
        json!([{"name": "id", "type": "BIGINT"}, {"name": "s", "type": "VARCHAR"}])
    );
    // Error before columns: line 2 is the error.
    let lines = s.query("SELECT * FROM \"lakehouse\".\"main\".\"missing\"");
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1],
        json!({"error": "Catalog Error: Table with name missing does not exist!"})
    );
    // Several statements: the result is the last one's; limit/offset apply.
    let lines = s.query_json_as(
        ("alice", "secret"),
        json!({"statement": "SELECT 1; SELECT * FROM (VALUES (1),(2),(3),(4)) t(x) ORDER BY x", "limit": 2, "offset": 1}),
    );
    assert_eq!(lines[2..].to_vec(), vec![json!([2]), json!([3])]);
    // Unknown and loosely typed optional fields are accepted.
    let lines = s.query_json_as(
        ("alice", "secret"),
        json!({"statement": "SELECT 1", "limit": "5", "offset": null, "compute_size": "S",
               "ephemeral": true, "sanitize": false, "cache": 1, "visible": "yes",
               "timezone": "UTC", "requested_by": {"id": 1}, "dialect": "duckdb"}),
    );
    assert_eq!(lines[2], json!([1]));
    assert_eq!(lines[0]["rows_limit"], json!(5));
    // Timestamps are ISO strings; dates too; decimals exact.
    let rows = s.rows("SELECT CAST('2024-05-01 10:20:30.123456' AS TIMESTAMP), CAST('2024-05-01T10:20:30Z' AS TIMESTAMPTZ), DATE '2024-05-01', CAST(12.50 AS DECIMAL(10,2))");
    assert_eq!(rows[0][0], json!("2024-05-01T10:20:30.123456"));
    assert_eq!(rows[0][1], json!("2024-05-01T10:20:30+00:00"));
    assert_eq!(rows[0][2], json!("2024-05-01"));
    assert_eq!(rows[0][3], json!(12.5));
    let raw = s
        .post(
            "/query",
            "application/json",
            json!({"statement": "SELECT CAST(12.50 AS DECIMAL(10,2))"}).to_string(),
        )
        .text()
        .expect("text");
    assert!(raw.contains("[12.50]"), "decimals keep their scale: {raw}");
    // Query log.
    let log: Value = s
        .client
        .get(s.url("/query/qid-1"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send")
        .json()
        .expect("json");
    assert_eq!(log["uuid"], json!("qid-1"));
    assert_eq!(log["session_id"], json!("sess"));
    assert!(log["end_time"].is_string());
    let r = s
        .client
        .get(s.url("/query/qid-1"))
        .basic_auth("bob", Some("pw"))
        .send()
        .expect("send");
    assert_eq!(r.status().as_u16(), 404);
    let r = s
        .client
        .get(s.url("/query/nope"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send");
    assert_eq!(r.status().as_u16(), 404);
}

#[test]
fn csv_jsonl_parquet_formats() {
    let s = Server::start();
    s.rows("CREATE TABLE lakehouse.main.typed (id BIGINT, big DECIMAL(20,0), ts TIMESTAMP WITH TIME ZONE, name VARCHAR)");
    s.rows("INSERT INTO lakehouse.main.typed VALUES (1, 18446744073709551615, '2024-01-02 03:04:05+00', 'a,b'), (2, NULL, NULL, NULL)");
    let post = |format: &str| {
        s.post(
            "/query",
            "application/json",
            json!({"statement": "SELECT * FROM typed ORDER BY id", "format": format}).to_string(),
        )
    };
    let r = post("parquet");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "application/parquet");
    let batches = read_parquet(r.bytes().expect("bytes").to_vec());
    let schema = batches[0].schema();
    assert_eq!(schema.field(0).data_type(), &DataType::Int64);
    assert_eq!(schema.field(1).data_type(), &DataType::Decimal128(20, 0));
    assert_eq!(
        schema.field(2).data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(schema.field(3).data_type(), &DataType::Utf8);
    let ts = batches[0]
        .column(2)
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .expect("ts");
    assert_eq!(ts.value(0), 1_704_164_645_000_000);
    assert!(ts.is_null(1));
    let r = post("csv");
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().expect("csv");
    assert!(text.starts_with("id,big,ts,name\n"), "{text}");
    assert!(text.contains("\"a,b\""), "{text}");
    let r = post("jsonl");
    let text = r.text().expect("jsonl");
    let first: Value = serde_json::from_str(text.lines().next().expect("line")).expect("json");
    assert_eq!(first["id"], json!(1));
    assert_eq!(first["name"], json!("a,b"));
    // A SQL error in these formats is a non-200 with the message.
    let r = s.post(
        "/query",
        "application/json",
        json!({"statement": "SELECT * FROM nope", "format": "parquet"}).to_string(),
    );
    assert_eq!(r.status().as_u16(), 400);
    assert!(
        r.text()
            .expect("text")
            .contains("Table with name nope does not exist")
    );
}

#[test]
fn dlt_ddl_information_schema_and_dml() {
    let s = Server::start();
    // What the dlt destination sends before its first load.
    s.rows("CREATE SCHEMA IF NOT EXISTS \"lakehouse\".\"ds\"");
    s.rows("CREATE SCHEMA IF NOT EXISTS \"lakehouse\".\"ds\"");
    s.rows(
        "CREATE TABLE IF NOT EXISTS \"lakehouse\".\"ds\".\"items\" (\"id\" BIGINT NOT NULL, \"name\" VARCHAR, \
         \"price\" DECIMAL(38,9), \"u\" DECIMAL(20,0), \"x\" DOUBLE, \"flag\" BOOLEAN, \
         \"ts\" TIMESTAMP WITH TIME ZONE, \"naive\" TIMESTAMP, \"d\" DATE, \"t\" TIME, \"b\" BLOB, \
         \"_dlt_load_id\" VARCHAR NOT NULL, \"_dlt_id\" VARCHAR NOT NULL)",
    );
    s.rows("CREATE TABLE IF NOT EXISTS \"lakehouse\".\"ds\".\"items\" (\"id\" BIGINT)");
    s.rows("ALTER TABLE \"lakehouse\".\"ds\".\"items\" ADD COLUMN IF NOT EXISTS \"extra\" VARCHAR");
    s.rows("ALTER TABLE \"lakehouse\".\"ds\".\"items\" ADD COLUMN IF NOT EXISTS \"extra\" VARCHAR");
    let err = s.error("ALTER TABLE \"lakehouse\".\"ds\".\"items\" ADD COLUMN \"extra\" VARCHAR");
    assert!(err.contains("already exists"), "{err}");
    let rows = s.rows(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns \
         WHERE table_catalog = 'lakehouse' AND table_schema = 'ds' AND table_name = 'items' ORDER BY ordinal_position",
    );
    let got: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or("").to_string(),
                r[1].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected = [
        ("id", "BIGINT"),
        ("name", "VARCHAR"),
        ("price", "DECIMAL(38,9)"),
        ("u", "DECIMAL(20,0)"),
        ("x", "DOUBLE"),
        ("flag", "BOOLEAN"),
        ("ts", "TIMESTAMP WITH TIME ZONE"),
        ("naive", "TIMESTAMP"),
        ("d", "DATE"),
        ("t", "TIME"),
        ("b", "BLOB"),
        ("_dlt_load_id", "VARCHAR"),
        ("_dlt_id", "VARCHAR"),
        ("extra", "VARCHAR"),
    ];
    assert_eq!(
        got,
        expected
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    assert_eq!(rows[0][2], json!("NO"));
    assert_eq!(
        s.rows("SELECT table_name, table_type FROM \"lakehouse\".information_schema.tables WHERE table_schema = 'ds'"),
        vec![vec![json!("items"), json!("BASE TABLE")]]
    );
    assert_eq!(
        s.rows("SELECT schema_name FROM information_schema.schemata WHERE catalog_name = 'lakehouse' AND schema_name = 'ds'"),
        vec![vec![json!("ds")]]
    );
    // DML: INSERT with E-strings and from_base64, DELETE.
    let count = s.rows(
        "INSERT INTO \"lakehouse\".\"ds\".\"items\" (\"id\", \"name\", \"b\", \"_dlt_load_id\", \"_dlt_id\", \"ts\") VALUES \
         (1, E'it''s', from_base64('AAEC'), 'l1', 'a', '2024-01-01T00:00:00+00:00'), (2, 'two', NULL, 'l1', 'b', NULL)",
    );
    assert_eq!(count, vec![vec![json!(2)]]);
    assert_eq!(
        s.rows("SELECT id, name, b, ts FROM ds.items ORDER BY id"),
        vec![
            vec![
                json!(1),
                json!("it's"),
                json!("AAEC"),
                json!("2024-01-01T00:00:00+00:00")
            ],
            vec![json!(2), json!("two"), Value::Null, Value::Null]
        ]
    );
    assert_eq!(
        s.rows("DELETE FROM \"lakehouse\".\"ds\".\"items\" WHERE id = 1"),
        vec![vec![json!(1)]]
    );
    assert_eq!(
        s.rows("SELECT id FROM lakehouse.ds.items"),
        vec![vec![json!(2)]]
    );
    assert_eq!(
        s.rows("UPDATE lakehouse.ds.items SET name = 'deux', x = 2.5 WHERE id = 2"),
        vec![vec![json!(1)]]
    );
    assert_eq!(
        s.rows("SELECT name, x FROM lakehouse.ds.items"),
        vec![vec![json!("deux"), json!(2.5)]]
    );
    // Widening type change.
    s.rows("CREATE TABLE lakehouse.ds.w (a INTEGER)");
    s.rows("INSERT INTO lakehouse.ds.w VALUES (1)");
    s.rows("ALTER TABLE lakehouse.ds.w ALTER COLUMN a TYPE BIGINT");
    s.rows("INSERT INTO lakehouse.ds.w VALUES (5000000000)");
    assert_eq!(
        s.rows("SELECT a FROM lakehouse.ds.w ORDER BY a"),
        vec![vec![json!(1)], vec![json!(5000000000i64)]]
    );
    let err = s.error("ALTER TABLE lakehouse.ds.w ALTER COLUMN a TYPE INTEGER");
    assert!(err.contains("widening"), "{err}");
    // Joins, aggregates, windows, CTEs over three-part names.
    let rows = s.rows(
        "WITH x AS (SELECT a, row_number() OVER (ORDER BY a DESC) AS rn FROM \"lakehouse\".\"ds\".\"w\") \
         SELECT x.a, x.rn, i.id FROM x LEFT JOIN lakehouse.ds.items i ON i.id = x.rn ORDER BY x.rn",
    );
    assert_eq!(
        rows,
        vec![
            vec![json!(5000000000i64), json!(1), Value::Null],
            vec![json!(1), json!(2), json!(2)]
        ]
    );
    // Drops.
    s.rows("DROP TABLE IF EXISTS lakehouse.ds.nothing");
    let err = s.error("DROP TABLE lakehouse.ds.nothing");
    assert_eq!(
        err,
        "Catalog Error: Table with name nothing does not exist!"
    );
    let err = s.error("DROP SCHEMA lakehouse.ds");
    assert!(err.contains("depend"), "{err}");
    s.rows("DROP SCHEMA IF EXISTS lakehouse.ds CASCADE");
    assert!(
        s.rows("SELECT * FROM information_schema.tables WHERE table_schema = 'ds'")
            .is_empty()
    );
    let err = s.error("SELECT * FROM lakehouse.ds.items");
    assert_eq!(err, "Catalog Error: Table with name items does not exist!");
    let lines = s.query_json_as(
        ("alice", "secret"),
        json!({"statement": "SELECT * FROM items", "catalog": "lakehouse", "schema": "nowhere"}),
    );
    assert_eq!(
        lines[1]["error"],
        json!("Catalog Error: SET schema: No catalog + schema named \"nowhere\" found.")
    );
    let err = s.error("USE lakehouse.nowhere");
    assert_eq!(
        err,
        "Catalog Error: SET schema: No catalog + schema named \"lakehouse.nowhere\" found."
    );
    // /validate
    let v: Value = s
        .post(
            "/validate",
            "application/json",
            json!({"statement": "SELECT 1"}).to_string(),
        )
        .json()
        .expect("json");
    assert_eq!(v["valid"], json!(true));
    let v: Value = s
        .post(
            "/validate",
            "application/json",
            json!({"statement": "SELEC 1"}).to_string(),
        )
        .json()
        .expect("json");
    assert_eq!(v["valid"], json!(false));
    assert!(v["error"].is_string());
}

#[test]
fn upsert_cursor_and_partial_columns() {
    let s = Server::start();
    let up = |q: &str, body: &str| {
        let r = s.post(
            &format!("/upsert?{T}&table=u&{q}"),
            "text/csv",
            body.to_string(),
        );
        (r.status().as_u16(), r.text().unwrap_or_default())
    };
    let (st, body) = up(
        "primary_key=id&cursor_field=ver",
        "id,ver,name,city\n1,1,ann,paris\n2,1,bob,rome\n2,3,bob3,rome3\n",
    );
    assert_eq!(st, 200, "{body}");
    // Older or equal cursor loses; newer wins; new key inserted.
    let (st, body) = up(
        "primary_key=id&cursor_field=ver",
        "id,ver,name,city\n1,0,old,x\n2,3,same,x\n3,1,cy,oslo\n",
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        s.rows("SELECT id, ver, name, city FROM u ORDER BY id"),
        vec![
            vec![json!(1), json!(1), json!("ann"), json!("paris")],
            vec![json!(2), json!(3), json!("bob3"), json!("rome3")],
            vec![json!(3), json!(1), json!("cy"), json!("oslo")],
        ]
    );
    // Partial columns: omitted columns keep their stored values.
    let (st, body) = up(
        "primary_key=%20id%20,&cursor_field=ver",
        "id,ver,name\n1,5,ANN\n",
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        s.rows("SELECT name, city FROM u WHERE id = 1"),
        vec![vec![json!("ANN"), json!("paris")]]
    );
    // Errors.
    let (st, body) = up("primary_key=,%20,", "id\n1\n");
    assert_eq!(st, 400);
    assert!(
        body.contains("primary_key must name at least one column"),
        "{body}"
    );
    let (st, body) = up("primary_key=id", "id,unknown\n1,2\n");
    assert_eq!(st, 400, "{body}");
    assert!(body.starts_with("Failed to execute ingest"), "{body}");
}

#[test]
fn failed_requests_leave_no_trace() {
    let s = Server::start();
    // The schema is inferred as VARCHAR, then the number fails to decode, after the
    // table was created: the table must disappear again.
    let (st, body) = s.upload(
        &format!("{T}&table=atom&mode=create_append"),
        "application/json",
        r#"[{"a": 1}, {"a": "x"}]"#,
    );
    assert_eq!(st, 400, "{body}");
    assert!(body.starts_with("Failed to execute ingest"), "{body}");
    assert!(!s.data().join("lakehouse/main/atom").exists());
    let err = s.error("SELECT * FROM atom");
    assert_eq!(err, "Catalog Error: Table with name atom does not exist!");
    let (st, _) = s.upload(
        &format!("{T}&table=atom2&mode=create"),
        "application/json",
        r#"[{"a": 1}, {"a": "x"}]"#,
    );
    assert_eq!(st, 400);
    assert!(!s.data().join("lakehouse/main/atom2").exists());
    let r = s.post(
        &format!("/upsert?{T}&table=atom3&primary_key=a"),
        "application/json",
        r#"[{"a": 1}, {"a": "x"}]"#,
    );
    assert_eq!(r.status().as_u16(), 400);
    assert!(!s.data().join("lakehouse/main/atom3").exists());
    // A schema made on demand for the failed request goes too.
    let (st, _) = s.upload(
        "catalog=lakehouse&schema=fresh&table=t&mode=create",
        "application/json",
        r#"[{"a": 1}, {"a": "x"}]"#,
    );
    assert_eq!(st, 400);
    assert!(!s.data().join("lakehouse/fresh").exists());
    assert!(
        s.rows("SELECT table_name FROM information_schema.tables")
            .is_empty()
    );
}

#[test]
fn security_and_malformed_inputs() {
    let s = Server::start_with(&["--max-body-bytes", "100000"]);
    // Path-like names are rejected before touching storage.
    for q in [
        "catalog=lakehouse&schema=..&table=x",
        "catalog=lakehouse&schema=main&table=../../etc",
        "catalog=lakehouse&schema=a%2Fb&table=x",
        "catalog=lakehouse&schema=main&table=x%00y",
        "catalog=..&schema=main&table=x",
    ] {
        let (st, body) = s.upload(&format!("{q}&mode=create"), "text/csv", "a\n1\n");
        assert_eq!(st, 400, "{q}: {body}");
    }
    assert!(!s.dir.path().join("etc").exists());
    // bob only sees `other`.
    let (st, _) = s.upload(
        &format!("{T}&table=secret&mode=create"),
        "text/csv",
        "a\n1\n",
    );
    assert_eq!(st, 200);
    let r = s.post_as(
        ("bob", "pw"),
        &format!("/upload?{T}&table=x&mode=create"),
        "text/csv",
        b"a\n1\n".to_vec(),
        &[],
    );
    assert_eq!(r.status().as_u16(), 404);
    let lines = s.query_json_as(
        ("bob", "pw"),
        json!({"statement": "SELECT * FROM lakehouse.main.secret"}),
    );
    let err = lines[1]["error"].as_str().unwrap_or("").to_string();
    assert!(err.starts_with("Catalog Error"), "{err}");
    let lines = s.query_json_as(
        ("bob", "pw"),
        json!({"statement": "SELECT * FROM information_schema.tables"}),
    );
    assert_eq!(lines.len(), 2, "bob sees no tables of lakehouse: {lines:?}");
    // SQL cannot reach files.
    for sql in [
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM \"/etc/passwd\"",
        "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
        "COPY (SELECT 1) TO '/tmp/deltalite-copy-test.csv'",
        "SET datafusion.catalog.location = '/etc'",
        "CREATE MATERIALIZED VIEW v AS SELECT 1",
    ] {
        let err = s.error(sql);
        assert!(!err.is_empty(), "{sql}");
    }
    assert!(!std::path::Path::new("/tmp/deltalite-copy-test.csv").exists());
    // Oversized body: 413, also without Content-Length (chunked).
    let big = vec![b'a'; 200_000];
    // Bodies moderately over the limit are drained, so the client reads the 413.
    let r = s
        .client
        .post(s.url(&format!("/upload?{T}&table=big&mode=create")))
        .basic_auth("alice", Some("secret"))
        .header("content-type", "text/csv")
        .body(big.clone())
        .send()
        .expect("send");
    assert_eq!(r.status().as_u16(), 413);
    assert!(r.text().unwrap_or_default().contains("exceeds the limit"));
    let chunks = futures_like_body(big);
    let r = s
        .client
        .post(s.url(&format!("/upload?{T}&table=big&mode=create")))
        .basic_auth("alice", Some("secret"))
        .body(chunks)
        .send()
        .expect("send");
    assert_eq!(r.status().as_u16(), 413);
    assert!(!s.data().join("lakehouse/main/big").exists());
    // Malformed files.
    let (st, body) = s.upload(
        &format!("{T}&table=bad&mode=create"),
        "application/parquet",
        b"PAR1garbagegarbagePAR1".to_vec(),
    );
    assert_eq!(st, 400);
    assert!(body.starts_with("Failed to execute ingest"), "{body}");
    let (st, body) = s.upload(
        &format!("{T}&table=bad&mode=create"),
        "application/json",
        "[{\"a\": 1,",
    );
    assert_eq!(st, 400, "{body}");
    let (st, body) = s.upload(
        &format!("{T}&table=bad&mode=create"),
        "text/csv",
        "a,b\n1,2,3\n",
    );
    assert_eq!(st, 400, "{body}");
    let (st, _) = s.upload(&format!("{T}&table=bad&mode=create"), "text/csv", "");
    assert_eq!(st, 400);
    let r = s.post("/query", "application/json", "{not json");
    assert_eq!(r.status().as_u16(), 400);
    assert!(!s.data().join("lakehouse/main/bad").exists());
    assert!(s.healthy());
}

/// A body without Content-Length (chunked transfer).
fn futures_like_body(data: Vec<u8>) -> reqwest::blocking::Body {
    reqwest::blocking::Body::new(std::io::Cursor::new(data))
}

#[test]
fn idempotency_key_writes_once() {
    let s = Server::start();
    let key = [("Idempotency-Key", "load-1/file-1")];
    let post = |path: &str, body: &str, headers: &[(&str, &str)]| {
        let r = s.post_as(
            ("alice", "secret"),
            path,
            "text/csv",
            body.as_bytes().to_vec(),
            headers,
        );
        (
            r.status().as_u16(),
            r.json::<Value>().unwrap_or(Value::Null),
        )
    };
    let (st, first) = post(
        &format!("/upload?{T}&table=i&mode=create_append"),
        "a\n1\n2\n",
        &key,
    );
    assert_eq!(st, 200);
    assert_eq!(first["idempotent_replay"], json!(false));
    let (st, second) = post(
        &format!("/upload?{T}&table=i&mode=create_append"),
        "a\n1\n2\n",
        &key,
    );
    assert_eq!(st, 200);
    assert_eq!(second["idempotent_replay"], json!(true));
    let (st, _) = post(
        &format!("/upload?{T}&table=i&mode=append"),
        "a\n3\n",
        &[("Idempotency-Key", "other")],
    );
    assert_eq!(st, 200);
    assert_eq!(s.rows("SELECT count(*) FROM i"), vec![vec![json!(3)]]);
    let ukey = [("Idempotency-Key", "u-1")];
    let (st, _) = post(
        &format!("/upsert?{T}&table=i&primary_key=a"),
        "a\n9\n",
        &ukey,
    );
    assert_eq!(st, 200);
    let (st, again) = post(
        &format!("/upsert?{T}&table=i&primary_key=a"),
        "a\n9\n",
        &ukey,
    );
    assert_eq!(st, 200);
    assert_eq!(again["idempotent_replay"], json!(true));
    assert_eq!(s.rows("SELECT count(*) FROM i"), vec![vec![json!(4)]]);
}

/// Idempotency records expire with the table's `delta.setTransactionRetentionDuration`:
/// a retry inside the window is a replay, the same key after it is a new write.
#[test]
fn idempotency_keys_expire_with_the_tables_retention() {
    let s = Server::start();
    let post = |body: &str| {
        let r = s.post_as(
            ("alice", "secret"),
            &format!("/upload?{T}&table=x&mode=create_append"),
            "text/csv",
            body.as_bytes().to_vec(),
            &[("Idempotency-Key", "load-7")],
        );
        assert_eq!(r.status().as_u16(), 200);
        r.json::<Value>().expect("json")["idempotent_replay"].clone()
    };
    assert_eq!(post("a\n1\n"), json!(false));
    s.rows(
        "ALTER TABLE lakehouse.main.x SET TBLPROPERTIES ('delta.setTransactionRetentionDuration' = 'interval 5 seconds')",
    );
    assert_eq!(post("a\n1\n"), json!(true));
    std::thread::sleep(Duration::from_millis(6000));
    assert_eq!(post("a\n1\n"), json!(false));
    assert_eq!(post("a\n1\n"), json!(true));
    assert_eq!(
        s.rows("SELECT count(*) FROM lakehouse.main.x"),
        vec![vec![json!(2)]]
    );
}

#[test]
fn append_endpoint_and_tasks() {
    let s = Server::start();
    let r = s.post(
        &format!("/append?{T}&table=ev"),
        "application/json",
        r#"{"id": 1, "kind": "a"}"#,
    );
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().expect("json");
    assert_eq!(v["ok"], json!(true));
    assert_eq!(v["error_code"], Value::Null);
    let task_id = v["task_id"].as_str().expect("task id").to_string();
    let r = s.post(
        &format!("/append?{T}&table=ev"),
        "application/json",
        r#"[{"id": 2, "extra": true}]"#,
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        s.rows("SELECT id, kind, extra FROM ev ORDER BY id"),
        vec![
            vec![json!(1), json!("a"), Value::Null],
            vec![json!(2), Value::Null, json!(true)]
        ]
    );
    let t: Value = s
        .client
        .get(s.url(&format!("/tasks/{task_id}")))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send")
        .json()
        .expect("json");
    assert_eq!(t, json!({"task_id": task_id, "status": "completed"}));
    let r = s.post(
        &format!("/append?{T}&table=ev"),
        "application/json",
        "[{\"id\": ",
    );
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().expect("json");
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["error_code"], json!("invalid-data"));
    // An append that would add a column but fails adds neither its rows nor the column.
    let r = s.post(
        &format!("/append?{T}&table=ev"),
        "application/json",
        r#"[{"id": "not a number", "late": 1}]"#,
    );
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        s.rows(
            "SELECT column_name FROM information_schema.columns \
             WHERE table_name = 'ev' ORDER BY column_name"
        ),
        vec![vec![json!("extra")], vec![json!("id")], vec![json!("kind")]]
    );
    assert_eq!(s.rows("SELECT count(*) FROM ev"), vec![vec![json!(2)]]);
}

#[test]
fn cancel_and_timeout_and_shutdown() {
    let s = Server::start_with(&["--query-timeout-secs", "3"]);
    let long = "SELECT count(*) FROM generate_series(1, 100000000000) t(x) WHERE x % 7 = 3";
    let base = s.base.clone();
    let handle = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::new();
        client
            .post(format!("{base}/query"))
            .basic_auth("alice", Some("secret"))
            .body(json!({"statement": long, "query_id": "long-1", "session_id": "s1"}).to_string())
            .send()
            .and_then(|r| r.text())
            .unwrap_or_default()
    });
    std::thread::sleep(Duration::from_millis(800));
    // Another user reusing the id is refused and does not cancel alice's query (her
    // cancel below still finds it running).
    let r = s.post_as(
        ("bob", "pw"),
        "/query",
        "application/json",
        json!({"statement": "SELECT 1", "query_id": "long-1"})
            .to_string()
            .into_bytes(),
        &[],
    );
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = s
        .client
        .delete(s.url("/query/long-1?session_id=s1"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send")
        .json()
        .expect("json");
    assert_eq!(v["cancelled"], json!(true), "{v}");
    let text = handle.join().expect("thread");
    assert!(text.contains("cancelled"), "{text}");
    let v: Value = s
        .client
        .delete(s.url("/query/unknown"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("send")
        .json()
        .expect("json");
    assert_eq!(v["cancelled"], json!(false));
    // Timeout.
    let err = s.error(long);
    assert!(err.contains("timed out"), "{err}");
    assert!(s.healthy());
    // Clean shutdown on SIGTERM.
    let mut s = s;
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(s.child.id().to_string())
        .status()
        .expect("kill");
    assert!(status.success());
    let mut exited = None;
    for _ in 0..100 {
        if let Ok(Some(st)) = s.child.try_wait() {
            exited = Some(st);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let exited = exited.expect("server exits after SIGTERM");
    assert!(exited.success(), "{exited:?}");
}

/// The same API on an object store. Runs when `DELTALITE_TEST_S3_ENDPOINT` points at an
/// S3-compatible server with a bucket `DELTALITE_TEST_S3_BUCKET` (default `lake`), e.g.
/// `moto_server -p 5000` plus a created bucket; skipped otherwise.
#[test]
fn s3_data_root() {
    let Ok(endpoint) = std::env::var("DELTALITE_TEST_S3_ENDPOINT") else {
        eprintln!("skipped: DELTALITE_TEST_S3_ENDPOINT is not set");
        return;
    };
    let bucket = std::env::var("DELTALITE_TEST_S3_BUCKET").unwrap_or_else(|_| "lake".into());
    let prefix = format!("s3://{bucket}/test-{}", std::process::id());
    let endpoint_opt = format!("AWS_ENDPOINT_URL={endpoint}");
    let s = Server::start_on(
        tempfile::tempdir().expect("tempdir"),
        &prefix,
        &[
            "--storage-option",
            &endpoint_opt,
            "--storage-option",
            "AWS_ALLOW_HTTP=true",
            "--storage-option",
            "AWS_ACCESS_KEY_ID=test",
            "--storage-option",
            "AWS_SECRET_ACCESS_KEY=test",
            "--storage-option",
            "AWS_REGION=us-east-1",
        ],
    );
    let (st, body) = s.upload(
        &format!("{T}&table=t&mode=create"),
        "text/csv",
        "id,v\n1,a\n2,b\n",
    );
    assert_eq!(st, 200, "{body}");
    let r = s.post(
        &format!("/upsert?{T}&table=t&primary_key=id"),
        "text/csv",
        "id,v\n2,B\n3,c\n",
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        s.rows("SELECT id, v FROM lakehouse.main.t ORDER BY id"),
        vec![
            vec![json!(1), json!("a")],
            vec![json!(2), json!("B")],
            vec![json!(3), json!("c")]
        ]
    );
    s.rows("CREATE SCHEMA lakehouse.empty");
    // `other` has no folder yet; it has its `main` all the same, as every catalog.
    assert_eq!(
        s.rows("SELECT catalog_name, schema_name FROM information_schema.schemata ORDER BY 1, 2"),
        vec![
            vec![json!("lakehouse"), json!("empty")],
            vec![json!("lakehouse"), json!("main")],
            vec![json!("other"), json!("main")]
        ]
    );
    let (st, _) = s.upload(
        &format!("{T}&table=bad&mode=create_append"),
        "application/json",
        r#"[{"a": 1}, {"a": "x"}]"#,
    );
    assert_eq!(st, 400);
    assert_eq!(
        s.rows("SELECT table_name FROM information_schema.tables"),
        vec![vec![json!("t")]]
    );
    s.rows("DROP SCHEMA lakehouse.main CASCADE");
    assert!(
        s.rows("SELECT table_name FROM information_schema.tables")
            .is_empty()
    );
}

/// The background maintainer on an object-store root (a real S3-compatible server, moto):
/// a partition's small files are compacted in an OPTIMIZE commit and the rows stay.
#[test]
fn s3_maintainer_compacts_small_files() {
    let moto = deltalite_testkit::moto::Moto::start("maint");
    let mut args: Vec<String> = Vec::new();
    for (k, v) in moto.options() {
        args.push("--storage-option".into());
        args.push(format!("{k}={v}"));
    }
    for a in [
        "--maintenance",
        "on",
        "--maintenance-interval-secs",
        "1",
        "--maintenance-min-small-files",
        "4",
    ] {
        args.push(a.into());
    }
    let s = Server::start_on(
        tempfile::tempdir().expect("tempdir"),
        "s3://maint/lake",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    s.rows("CREATE SCHEMA lakehouse.main");
    s.rows("CREATE TABLE lakehouse.main.m (p VARCHAR, a INTEGER) PARTITIONED BY (p)");
    for i in 0..5 {
        s.rows(&format!("INSERT INTO lakehouse.main.m VALUES ('x', {i})"));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let compacted = loop {
        let commits: Vec<Vec<Value>> = s
            .rows("DESCRIBE HISTORY lakehouse.main.m")
            .into_iter()
            .filter(|r| {
                r[9].as_str()
                    .is_some_and(|m| m.contains("\"deltalite.maintainer\":\"compact\""))
            })
            .collect();
        if !commits.is_empty() {
            break commits;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no maintainer commit within 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        compacted.iter().all(|r| r[2] == json!("OPTIMIZE")),
        "{compacted:?}"
    );
    assert_eq!(
        s.rows("SELECT p, a FROM lakehouse.main.m ORDER BY a"),
        (0..5)
            .map(|i| vec![json!("x"), json!(i)])
            .collect::<Vec<_>>()
    );
    let table = tokio::runtime::Runtime::new().unwrap().block_on(async {
        deltalite::DeltaLiteTable::open("s3://maint/lake/lakehouse/main/m", moto.options())
            .await
            .unwrap()
    });
    assert!(
        table.num_files().unwrap() < 4,
        "{:?}",
        table.files().unwrap()
    );
}
