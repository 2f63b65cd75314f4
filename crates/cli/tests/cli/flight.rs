//! The Arrow Flight SQL endpoint of a real `deltalite serve` process, through
//! `arrow-flight`'s own Flight SQL client: handshake and sessions, statements, updates,
//! prepared statements, metadata, session options, scratch catalogs, bulk ingest. (The
//! forbidden-statement wrappers over Flight are in `trust.rs`, next to the HTTP ones.)

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Schema};
use arrow_flight::sql::{
    CommandGetDbSchemas, CommandGetTables, CommandStatementIngest, ProstMessageExt, SqlInfo,
};
use common::flight::{Flight, ok, status_of};
use common::*;
use futures::TryStreamExt;
use prost::Message;
use serde_json::json;
use tonic::Code;

const ALICE: (&str, &str) = ("alice", "secret");
const BOB: (&str, &str) = ("bob", "pw");

fn strings(batches: &[RecordBatch], column: &str) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let c = b.column_by_name(column).expect("column");
        let c = arrow::compute::cast(c, &DataType::Utf8).expect("cast");
        let c = c.as_any().downcast_ref::<StringArray>().expect("strings");
        out.extend((0..c.len()).map(|i| c.value(i).to_string()));
    }
    out
}

fn int64s(batches: &[RecordBatch], column: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for b in batches {
        let c = b.column_by_name(column).expect("column");
        let c = arrow::compute::cast(c, &DataType::Int64).expect("cast");
        let c = c.as_any().downcast_ref::<Int64Array>().expect("ints");
        out.extend((0..c.len()).map(|i| c.value(i)));
    }
    out
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).expect("batch")
}

/// A raw gRPC call's status, for calls the Flight SQL client cannot make (wrong
/// credentials, a made-up token, unpadded Basic).
fn raw_get_flight_info(server: &Server, authorization: &str) -> Result<(), tonic::Status> {
    let f = Flight::connect(server);
    let mut inner = f.client.inner().clone();
    let cmd = arrow_flight::sql::CommandStatementQuery {
        query: "SELECT 1".into(),
        transaction_id: None,
    };
    let mut req = tonic::Request::new(arrow_flight::FlightDescriptor::new_cmd(
        cmd.as_any().encode_to_vec(),
    ));
    req.metadata_mut()
        .insert("authorization", authorization.parse().expect("header"));
    f.rt.block_on(inner.get_flight_info(req)).map(|_| ())
}

fn raw_handshake(server: &Server, authorization: &str) -> Result<String, tonic::Status> {
    let f = Flight::connect(server);
    let mut inner = f.client.inner().clone();
    let mut req = tonic::Request::new(futures::stream::iter(vec![
        arrow_flight::HandshakeRequest::default(),
    ]));
    req.metadata_mut()
        .insert("authorization", authorization.parse().expect("header"));
    f.rt.block_on(async {
        let response = inner.handshake(req).await?;
        let header = response
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let payloads: Vec<_> = response.into_inner().try_collect().await?;
        assert_eq!(payloads.len(), 1);
        assert_eq!(
            header,
            format!("Bearer {}", String::from_utf8_lossy(&payloads[0].payload))
        );
        Ok(header)
    })
}

fn metric(server: &Server, name: &str) -> Option<f64> {
    let text = server
        .client
        .get(server.url("/metrics"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn handshake_gives_a_fresh_token_per_session_and_refuses_everything_else() {
    let s = Server::start_with(&["--flight-session-idle-secs", "2"]);
    // A fresh token per handshake, in the response header and as the payload.
    let first = raw_handshake(&s, "Basic YWxpY2U6c2VjcmV0").expect("handshake");
    let second = raw_handshake(&s, "Basic YWxpY2U6c2VjcmV0").expect("handshake");
    assert!(first.starts_with("Bearer ") && first.len() > 40, "{first}");
    assert_ne!(first, second);

    let wrong = raw_handshake(&s, "Basic YWxpY2U6d3Jvbmc=").expect_err("wrong password");
    assert_eq!(
        (wrong.code(), wrong.message()),
        (Code::Unauthenticated, "Unauthorized")
    );
    let none = raw_get_flight_info(&s, "Bearer 0000").expect_err("made-up token");
    assert_eq!(none.code(), Code::Unauthenticated);
    assert!(
        none.message().contains("Session expired"),
        "{}",
        none.message()
    );
    // Basic on a plain call works without a handshake.
    raw_get_flight_info(&s, "Basic YWxpY2U6c2VjcmV0").expect("basic call");
    let bad_basic = raw_get_flight_info(&s, "Basic Ym9iOm5v").expect_err("bob:no");
    assert_eq!(
        (bad_basic.code(), bad_basic.message()),
        (Code::Unauthenticated, "Unauthorized")
    );

    // A session works, and is published; CloseSession ends it.
    let mut f = Flight::login(&s, ALICE);
    assert_eq!(
        strings(&f.query("SELECT 1 AS one").expect("query").batches, "one"),
        ["1"]
    );
    assert!(metric(&s, "deltalite_flight_sessions").is_some_and(|n| n >= 1.0));
    let closed = f.action("CloseSession", Vec::new()).expect("close");
    // Raw CloseSessionResult{status: CLOSED}.
    assert_eq!(closed, vec![bytes::Bytes::from_static(&[0x08, 0x01])]);
    let after = f.query("SELECT 1").err().expect("closed session");
    assert_eq!(after.code(), Code::Unauthenticated);
    assert!(
        after.message().contains("Session expired"),
        "{}",
        after.message()
    );

    // Idle sessions expire.
    let mut idle = Flight::login(&s, ALICE);
    idle.query("SELECT 1").expect("fresh");
    std::thread::sleep(Duration::from_millis(2600));
    let expired = idle.query("SELECT 1").err().expect("expired");
    assert!(
        expired.message().contains("Session expired"),
        "{}",
        expired.message()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(&s, "deltalite_flight_sessions") != Some(0.0) {
        assert!(
            Instant::now() < deadline,
            "the sweeper publishes the closed sessions"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn sessions_past_the_bound_close_the_least_recently_used() {
    let s = Server::start_with(&["--flight-max-sessions", "2"]);
    let mut first = Flight::login(&s, ALICE);
    let mut second = Flight::login(&s, ALICE);
    first.query("SELECT 1").expect("first");
    second.query("SELECT 1").expect("second");
    // `first` was used more recently than `second`: a third session closes `second`.
    first.query("SELECT 2").expect("first again");
    let mut third = Flight::login(&s, ALICE);
    third.query("SELECT 1").expect("third");
    let closed = second.query("SELECT 1").err().expect("evicted");
    assert_eq!(closed.code(), Code::Unauthenticated);
    assert!(
        closed.message().contains("Session expired"),
        "{}",
        closed.message()
    );
    first.query("SELECT 3").expect("first survives");
    assert_eq!(metric(&s, "deltalite_flight_sessions"), Some(2.0));
}

#[test]
fn statements_stream_with_the_announced_schema_and_updates_count_rows() {
    let s = Server::start();
    let mut f = Flight::login(&s, ALICE);
    // DDL answers 0 through DoPut, DML its rows.
    assert_eq!(
        ok(f.update("CREATE TABLE t (id INT, name VARCHAR, value INT)")),
        0
    );
    assert_eq!(
        ok(f.update("INSERT INTO t VALUES (1, 'a', 100), (2, 'b', 200), (3, 'c', 300)")),
        3
    );
    assert_eq!(
        ok(f.update("UPDATE t SET value = 999 WHERE value >= 200")),
        2
    );
    assert_eq!(ok(f.update("DELETE FROM t WHERE id = 9999")), 0);
    assert_eq!(ok(f.update("DELETE FROM t WHERE id IN (1, 2)")), 2);
    assert_eq!(
        s.rows("SELECT id, value FROM t"),
        vec![vec![json!(3), json!(999)]]
    );

    // A result streams batch by batch; the FlightInfo's schema is the stream's exactly.
    let big = f
        .query("SELECT value, value * 2 AS twice, 'x' AS s FROM generate_series(1, 100000) AS g(value)")
        .expect("query");
    assert_eq!(big.info_schema, big.stream_schema);
    assert_eq!(big.rows(), 100_000);
    assert!(
        big.batches.len() > 1,
        "one message per batch, not one whole result"
    );
    let empty = f.query("SELECT * FROM t WHERE id > 1000").expect("empty");
    assert_eq!(empty.info_schema, empty.stream_schema);
    assert_eq!(empty.rows(), 0);
    assert_eq!(
        empty
            .stream_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>(),
        ["id", "name", "value"]
    );

    // DDL through GetFlightInfo takes effect without a DoGet (ADBC never fetches it).
    f.info("CREATE TABLE made_by_info (a BIGINT)")
        .expect("info");
    assert_eq!(
        s.rows("SELECT count(*) FROM made_by_info"),
        vec![vec![json!(0)]]
    );

    // Logged as an ArrowFlightSQL query; the FlightInfo carries its query id.
    let fetched = f.query("SELECT id FROM t").expect("logged");
    let id = String::from_utf8(fetched.info.app_metadata.to_vec()).expect("query id");
    let log: serde_json::Value = s
        .client
        .get(s.url(&format!("/query/{id}")))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("log")
        .json()
        .expect("json");
    assert_eq!(log["client_interface"], "ArrowFlightSQL");
    assert_eq!(log["query"], "SELECT id FROM t");
    assert_eq!(log["stats"], json!({"rows": 1}));
    assert_eq!(log["error"], json!(null));

    // Errors: the HTTP API's text, as InvalidArgument (final); a result is fetched once.
    let e = f.query("SELECT nope FROM t").err().expect("bad column");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("Binder Error: "), "{}", e.message());
    let e = f.query("INVALID SQL SYNTAX").err().expect("syntax");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("Parser Error: "), "{}", e.message());
    let info = f.info("SELECT 1").expect("info");
    f.fetch(info.clone()).expect("first fetch");
    let again = f.fetch(info).err().expect("second fetch");
    assert_eq!(again.code(), Code::NotFound);
    assert!(
        again
            .message()
            .starts_with("Invalid Input Error: unknown ticket"),
        "{}",
        again.message()
    );

    // USE carries over to the session's later calls.
    f.update("CREATE SCHEMA other.s").expect("schema");
    f.update("USE other.s").expect("use");
    assert_eq!(
        strings(
            &f.query("SELECT current_catalog() AS c").expect("c").batches,
            "c"
        ),
        ["other"]
    );
}

#[test]
fn prepared_statements_bind_positional_and_named_parameters() {
    let s = Server::start();
    s.rows("CREATE TABLE p (id INT, name VARCHAR, value INT); INSERT INTO p VALUES (1, 'Alice', 100), (2, 'Bob', 200), (3, 'Charlie', 300)");
    let mut f = Flight::login(&s, ALICE);
    // One uniquely named parameter field per `?`.
    let schema =
        f.rt.block_on(
            f.client
                .prepare("SELECT * FROM p WHERE id = ? AND value >= ?".into(), None),
        )
        .map_err(status_of)
        .expect("prepare")
        .parameter_schema()
        .expect("schema")
        .clone();
    assert_eq!(
        schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>(),
        ["1", "2"]
    );
    // Positional values, named as ADBC names them.
    let positional = batch(vec![
        ("0", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
        ("1", Arc::new(Int64Array::from(vec![150])) as ArrayRef),
    ]);
    let got = f
        .prepared_query(
            "SELECT name FROM p WHERE id = ? AND value >= ?",
            Some(positional),
        )
        .expect("positional");
    assert_eq!(strings(&got.batches, "name"), ["Bob"]);
    assert_eq!(got.info_schema, got.stream_schema);
    // Named values, in any column order.
    let named = batch(vec![
        (
            "min_value",
            Arc::new(Int64Array::from(vec![100])) as ArrayRef,
        ),
        ("id", Arc::new(Int32Array::from(vec![1])) as ArrayRef),
    ]);
    let got = f
        .prepared_query(
            "SELECT name FROM p WHERE id = $id AND value >= $min_value",
            Some(named),
        )
        .expect("named");
    assert_eq!(strings(&got.batches, "name"), ["Alice"]);
    // A value is a value: a quote in it is data, never SQL.
    let hostile = "x'); DROP TABLE p; --";
    let rows = batch(vec![
        ("0", Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef),
        (
            "1",
            Arc::new(StringArray::from(vec![hostile, "ok"])) as ArrayRef,
        ),
    ]);
    assert_eq!(
        ok(f.prepared_update("INSERT INTO p (id, name) VALUES (?, ?)", Some(rows))),
        2
    );
    assert_eq!(
        s.rows("SELECT name FROM p WHERE id >= 7 ORDER BY id"),
        vec![vec![json!(hostile)], vec![json!("ok")]]
    );
    // The two orders clients bind in. ADBC binds, then asks for the FlightInfo: the
    // statement runs then (DML takes effect without a DoGet).
    let mut stmt =
        f.rt.block_on(
            f.client
                .prepare("INSERT INTO p (id, name) VALUES (?, ?)".into(), None),
        )
        .expect("prepare");
    stmt.set_parameters(batch(vec![
        ("0", Arc::new(Int64Array::from(vec![20])) as ArrayRef),
        ("1", Arc::new(StringArray::from(vec!["first"])) as ArrayRef),
    ]))
    .expect("bind");
    let info = f.rt.block_on(stmt.execute()).expect("info");
    assert_eq!(
        s.rows("SELECT name FROM p WHERE id = 20"),
        vec![vec![json!("first")]]
    );
    let got = f.fetch(info).expect("result");
    assert_eq!(got.info_schema, got.stream_schema);
    assert_eq!(int64s(&got.batches, "Count"), [1]);
    // altertable-flightsql asks for the FlightInfo, then binds: with no values at the
    // FlightInfo the statement runs at the DoGet, with the values bound by then.
    // (`PreparedStatement::execute` re-sends the values it holds, so this is a second
    // handle, never bound through the client.)
    let mut later_stmt =
        f.rt.block_on(
            f.client
                .prepare("INSERT INTO p (id, name) VALUES (?, ?)".into(), None),
        )
        .expect("prepare");
    let mut again =
        f.rt.block_on(later_stmt.execute())
            .expect("info without values");
    let ticket = again.endpoint.remove(0).ticket.expect("ticket");
    assert_eq!(
        s.rows("SELECT count(*) FROM p WHERE id = 20"),
        vec![vec![json!(1)]]
    );
    let later = batch(vec![
        ("0", Arc::new(Int64Array::from(vec![21])) as ArrayRef),
        ("1", Arc::new(StringArray::from(vec!["second"])) as ArrayRef),
    ]);
    let client = &mut f.client;
    f.rt.block_on(async {
        // The ticket is the handle's `CommandPreparedStatementQuery`: bind through it.
        let descriptor = arrow_flight::FlightDescriptor::new_cmd(ticket.ticket.clone());
        let data = arrow_flight::encode::FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(descriptor))
            .build(futures::stream::iter(vec![Ok(later)]))
            .try_collect::<Vec<_>>()
            .await
            .expect("encode");
        let mut results = client
            .do_put(futures::stream::iter(data))
            .await
            .expect("bind");
        while results.message().await.expect("bind result").is_some() {}
    });
    let got = f
        .fetch(
            arrow_flight::FlightInfo::new()
                .with_endpoint(arrow_flight::FlightEndpoint::new().with_ticket(ticket)),
        )
        .expect("run at the DoGet");
    assert_eq!(int64s(&got.batches, "Count"), [1]);
    assert_eq!(
        s.rows("SELECT id, name FROM p WHERE id >= 20 ORDER BY id"),
        vec![
            vec![json!(20), json!("first")],
            vec![json!(21), json!("second")]
        ]
    );
    // No values bound: the statement does not run.
    let e = f
        .prepared_query("SELECT * FROM p WHERE id = ?", None)
        .err()
        .expect("unbound");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::InvalidArgument,
            "Invalid Input Error: the statement has 1 parameter(s) and no values are bound"
        )
    );
    // Syntax and the guard answer at prepare time.
    let e =
        f.rt.block_on(f.client.prepare("COPY p TO '/tmp/x.csv'".into(), None))
            .map(|_| ())
            .map_err(status_of)
            .expect_err("copy");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::InvalidArgument,
            "Permission Error: COPY is not allowed"
        )
    );
    // A closed handle is gone.
    let mut stmt =
        f.rt.block_on(f.client.prepare("SELECT 1".into(), None))
            .expect("prepare");
    let handle_stmt = f.rt.block_on(stmt.execute()).expect("execute");
    assert!(!handle_stmt.endpoint.is_empty());
    f.rt.block_on(stmt.close()).expect("close");
}

#[test]
fn metadata_lists_only_what_the_user_sees() {
    let s = Server::start();
    s.rows("CREATE SCHEMA lakehouse.sales; CREATE TABLE lakehouse.sales.orders (id BIGINT, note VARCHAR)");
    s.post_as(
        BOB,
        "/query",
        "application/json",
        json!({"statement": "CREATE TABLE other.main.o (a INT)"})
            .to_string()
            .into_bytes(),
        &[],
    );
    let mut alice = Flight::login(&s, ALICE);
    let mut bob = Flight::login(&s, BOB);
    let catalogs = |f: &mut Flight| {
        let info = f.rt.block_on(f.client.get_catalogs()).expect("catalogs");
        strings(&f.fetch(info).expect("fetch").batches, "catalog_name")
    };
    assert_eq!(catalogs(&mut alice), ["lakehouse", "other"]);
    assert_eq!(catalogs(&mut bob), ["other"]);

    let schemas = |f: &mut Flight, cmd: CommandGetDbSchemas| {
        let info =
            f.rt.block_on(f.client.get_db_schemas(cmd))
                .expect("schemas");
        let got = f.fetch(info).expect("fetch");
        assert_eq!(got.info_schema, got.stream_schema);
        // The spec's schema exactly (ADBC validates it): db_schema_name is not nullable.
        assert!(
            !got.stream_schema
                .field_with_name("db_schema_name")
                .expect("f")
                .is_nullable()
        );
        let c = strings(&got.batches, "catalog_name");
        let s = strings(&got.batches, "db_schema_name");
        c.into_iter()
            .zip(s)
            .map(|(c, s)| format!("{c}.{s}"))
            .collect::<Vec<_>>()
    };
    let all = schemas(&mut alice, CommandGetDbSchemas::default());
    assert!(
        all.contains(&"lakehouse.sales".to_string()) && all.contains(&"other.main".to_string()),
        "{all:?}"
    );
    assert_eq!(
        schemas(
            &mut alice,
            CommandGetDbSchemas {
                catalog: None,
                db_schema_filter_pattern: Some("sa%".into()),
            }
        ),
        ["lakehouse.sales"]
    );
    assert_eq!(
        schemas(&mut bob, CommandGetDbSchemas::default()),
        ["other.main"]
    );

    let cmd = CommandGetTables {
        catalog: Some("lakehouse".into()),
        db_schema_filter_pattern: None,
        table_name_filter_pattern: Some("ord%".into()),
        table_types: vec![],
        include_schema: true,
    };
    let info = alice
        .rt
        .block_on(alice.client.get_tables(cmd))
        .expect("tables");
    let got = alice.fetch(info).expect("fetch");
    assert_eq!(got.info_schema, got.stream_schema);
    assert_eq!(strings(&got.batches, "table_name"), ["orders"]);
    assert_eq!(strings(&got.batches, "table_type"), ["TABLE"]);
    let raw = got.batches[0]
        .column_by_name("table_schema")
        .expect("table_schema")
        .as_any()
        .downcast_ref::<arrow::array::BinaryArray>()
        .expect("binary")
        .value(0)
        .to_vec();
    let table_schema = Schema::try_from(arrow_flight::IpcMessage(raw.into())).expect("ipc schema");
    assert_eq!(
        table_schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect::<Vec<_>>(),
        [("id", DataType::Int64), ("note", DataType::Utf8)]
    );
    // A view is listed as a VIEW, with its query's columns; the type filter keeps it out.
    s.rows("CREATE VIEW sales.order_notes AS SELECT note, id * 2 AS twice FROM sales.orders");
    let listed = |f: &mut Flight, types: Vec<String>| {
        let cmd = CommandGetTables {
            catalog: Some("lakehouse".into()),
            db_schema_filter_pattern: Some("sales".into()),
            table_name_filter_pattern: Some("ord%".into()),
            table_types: types,
            include_schema: true,
        };
        let info = f.rt.block_on(f.client.get_tables(cmd)).expect("tables");
        let got = f.fetch(info).expect("fetch");
        assert_eq!(got.info_schema, got.stream_schema);
        let binary = got.batches[0]
            .column_by_name("table_schema")
            .expect("table_schema")
            .as_any()
            .downcast_ref::<arrow::array::BinaryArray>()
            .expect("binary")
            .clone();
        let schemas: Vec<Vec<(String, DataType)>> = (0..binary.len())
            .map(|i| {
                let raw = binary.value(i).to_vec();
                Schema::try_from(arrow_flight::IpcMessage(raw.into()))
                    .expect("ipc schema")
                    .fields()
                    .iter()
                    .map(|f| (f.name().clone(), f.data_type().clone()))
                    .collect()
            })
            .collect();
        (
            strings(&got.batches, "table_name"),
            strings(&got.batches, "table_type"),
            schemas,
        )
    };
    let (names, types, schemas) = listed(&mut alice, vec![]);
    assert_eq!(names, ["order_notes", "orders"]);
    assert_eq!(types, ["VIEW", "TABLE"]);
    assert_eq!(
        schemas[0],
        [
            ("note".to_string(), DataType::Utf8),
            ("twice".to_string(), DataType::Int64)
        ]
    );
    let (names, types, _) = listed(&mut alice, vec!["TABLE".into()]);
    assert_eq!(
        (names, types),
        (vec!["orders".to_string()], vec!["TABLE".to_string()])
    );
    let (names, _, _) = listed(&mut alice, vec!["VIEW".into()]);
    assert_eq!(names, ["order_notes"]);

    let none = CommandGetTables {
        catalog: Some("lakehouse".into()),
        table_name_filter_pattern: Some("nonexistent_%".into()),
        ..Default::default()
    };
    let info = bob
        .rt
        .block_on(bob.client.get_tables(none))
        .expect("tables");
    assert_eq!(bob.fetch(info).expect("fetch").rows(), 0);
    let info = bob
        .rt
        .block_on(bob.client.get_tables(CommandGetTables::default()))
        .expect("tables");
    assert_eq!(
        strings(&bob.fetch(info).expect("fetch").batches, "table_name"),
        ["o"]
    );

    let info = alice
        .rt
        .block_on(alice.client.get_table_types())
        .expect("types");
    assert_eq!(
        strings(&alice.fetch(info).expect("fetch").batches, "table_type"),
        ["TABLE", "VIEW"]
    );
    // What ADBC asks at connect: transactions (8) unsupported, so it stays in autocommit.
    let info = alice
        .rt
        .block_on(alice.client.get_sql_info(vec![
            SqlInfo::FlightSqlServerTransaction,
            SqlInfo::FlightSqlServerName,
        ]))
        .expect("sql info");
    let got = alice.fetch(info).expect("fetch");
    assert_eq!(int64s(&got.batches, "info_name"), [0, 8]);
}

/// `SetSessionOptionsRequest{session_options: {name: {string_value: value}}}`, raw.
fn set_options(options: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in options {
        let mut value_msg = vec![0x0a, value.len() as u8];
        value_msg.extend_from_slice(value.as_bytes());
        let mut entry = vec![0x0a, name.len() as u8];
        entry.extend_from_slice(name.as_bytes());
        entry.push(0x12);
        entry.push(value_msg.len() as u8);
        entry.extend(value_msg);
        out.push(0x0a);
        out.push(entry.len() as u8);
        out.extend(entry);
    }
    out
}

/// Begin a Flight transaction; its id.
fn begin(f: &mut Flight) -> bytes::Bytes {
    f.rt.block_on(f.client.begin_transaction()).expect("begin")
}

/// An update statement inside the transaction `txn`.
fn run(f: &mut Flight, sql: &str, txn: &bytes::Bytes) -> Result<i64, tonic::Status> {
    f.rt.block_on(f.client.execute_update(sql.into(), Some(txn.clone())))
        .map_err(status_of)
}

/// Commit or roll back `txn`.
fn end(
    f: &mut Flight,
    txn: &bytes::Bytes,
    action: arrow_flight::sql::EndTransaction,
) -> Result<(), tonic::Status> {
    f.rt.block_on(f.client.end_transaction(txn.clone(), action))
        .map_err(status_of)
}

/// Transactions stage their writes (see `flight::transaction`): the transaction reads its
/// own writes, no other session sees them before COMMIT, COMMIT publishes them (a
/// conflicting one is refused and named), ROLLBACK leaves nothing, and a closed session
/// rolls back. Drops: `transactions_drop_tables_and_schemas_aside`.
#[test]
fn transactions_stage_commit_roll_back_and_refuse_conflicts() {
    use arrow_flight::sql::EndTransaction;
    let s = Server::start();
    s.rows("CREATE TABLE t (id INT); INSERT INTO t VALUES (1)");
    let mut f = Flight::login(&s, ALICE);
    let ids = |s: &Server| s.rows("SELECT id FROM t ORDER BY id");
    let inside = |f: &mut Flight, sql: &str, txn: &bytes::Bytes| {
        let info =
            f.rt.block_on(f.client.execute(sql.into(), Some(txn.clone())))
                .expect("read in the transaction");
        int64s(&f.fetch(info).expect("rows").batches, "id")
    };
    let one = vec![vec![json!(1)]];

    // Rollback: the insert, the update and the new table were never seen by others, and
    // are gone.
    let txn = begin(&mut f);
    assert_eq!(ok(run(&mut f, "INSERT INTO t VALUES (2)", &txn)), 1);
    assert_eq!(
        ok(run(&mut f, "UPDATE t SET id = 10 WHERE id = 1", &txn)),
        1
    );
    ok(run(&mut f, "CREATE TABLE made AS SELECT 1 AS id", &txn));
    assert_eq!(
        inside(&mut f, "SELECT id FROM t ORDER BY id", &txn),
        [2, 10]
    );
    assert_eq!(inside(&mut f, "SELECT id FROM made", &txn), [1]);
    assert_eq!(ids(&s), one);
    assert_eq!(
        s.error("SELECT * FROM made"),
        "Catalog Error: Table with name made does not exist!"
    );
    // One transaction at a time.
    let e =
        f.rt.block_on(f.client.begin_transaction())
            .map_err(status_of)
            .expect_err("nested");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::FailedPrecondition,
            "TransactionContext Error: cannot start a transaction within a transaction"
        )
    );
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(ids(&s), one);
    assert_eq!(
        s.rows("SELECT count(*) FROM information_schema.tables WHERE table_name = 'made'"),
        vec![vec![json!(0)]]
    );
    assert!(!s.data().join("lakehouse/main/made").exists());
    assert!(
        !s.data()
            .join(".deltalite_txn")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
    // The ended transaction's id is refused, whatever the call.
    let e = run(&mut f, "INSERT INTO t VALUES (3)", &txn).expect_err("ended");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::NotFound,
            "TransactionContext Error: unknown transaction (committed, rolled back, or another session's); begin a new one"
        )
    );
    assert_eq!(ids(&s), one);

    // Commit publishes: one commit per table.
    let commits = |s: &Server| {
        std::fs::read_dir(s.data().join("lakehouse/main/t/_delta_log"))
            .expect("log")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .count()
    };
    let before = commits(&s);
    let txn = begin(&mut f);
    ok(run(&mut f, "INSERT INTO t VALUES (3)", &txn));
    ok(run(&mut f, "INSERT INTO t VALUES (4)", &txn));
    assert_eq!(ids(&s), one);
    assert_eq!(commits(&s), before);
    ok(end(&mut f, &txn, EndTransaction::Commit));
    assert_eq!(
        ids(&s),
        vec![vec![json!(1)], vec![json!(3)], vec![json!(4)]]
    );
    assert_eq!(commits(&s), before + 1);

    // Another session changes the table after this transaction deleted from it: COMMIT
    // is refused and nothing of the transaction lands (not even its other table).
    let txn = begin(&mut f);
    ok(run(&mut f, "DELETE FROM t WHERE id = 3", &txn));
    ok(run(&mut f, "CREATE TABLE u (a INT)", &txn));
    s.rows("INSERT INTO t VALUES (5)");
    let e = end(&mut f, &txn, EndTransaction::Commit).expect_err("conflict");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::Aborted,
            "TransactionContext Error: Conflict on lakehouse.main.t: another session changed the table since this transaction first wrote it; nothing of the transaction was committed"
        )
    );
    let all = vec![
        vec![json!(1)],
        vec![json!(3)],
        vec![json!(4)],
        vec![json!(5)],
    ];
    assert_eq!(ids(&s), all);
    assert_eq!(
        s.rows("SELECT count(*) FROM information_schema.tables WHERE table_name = 'u'"),
        vec![vec![json!(0)]]
    );
    // Every table is checked before any is committed: `a` (only appended to, first in
    // name order) is not committed when `t` conflicts.
    s.rows("CREATE TABLE a (id INT)");
    let txn = begin(&mut f);
    ok(run(&mut f, "INSERT INTO a VALUES (1)", &txn));
    ok(run(&mut f, "DELETE FROM t WHERE id = 3", &txn));
    s.rows("DELETE FROM t WHERE id = 5");
    let e = end(&mut f, &txn, EndTransaction::Commit).expect_err("conflict");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::Aborted,
            "TransactionContext Error: Conflict on lakehouse.main.t: another session changed the table since this transaction first wrote it; nothing of the transaction was committed"
        )
    );
    assert_eq!(s.rows("SELECT count(*) FROM a"), vec![vec![json!(0)]]);
    s.rows("INSERT INTO t VALUES (5)");
    assert_eq!(ids(&s), all);
    // One that only appends commits on top of the other session's append.
    let txn = begin(&mut f);
    ok(run(&mut f, "INSERT INTO t VALUES (6)", &txn));
    s.rows("INSERT INTO t VALUES (7)");
    ok(end(&mut f, &txn, EndTransaction::Commit));
    assert_eq!(
        s.rows("SELECT count(*) FROM t WHERE id IN (6, 7)"),
        vec![vec![json!(2)]]
    );
    s.rows("DELETE FROM t WHERE id > 5");

    // dbt's table materialization in a transaction: build `m__dbt_tmp`, move `m` aside,
    // rename the new one over it. The renames happen at once (others see `m` gone until
    // COMMIT); the new table is staged. A rollback renames back and drops what it built.
    s.rows("CREATE TABLE m AS SELECT 1 AS v");
    let names = |s: &Server| {
        s.rows("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'm%' ORDER BY 1")
    };
    let materialize = |f: &mut Flight, txn: &bytes::Bytes| {
        for sql in [
            "create table \"lakehouse\".\"main\".\"m__dbt_tmp\" as (select 2 as v)",
            "alter table \"lakehouse\".\"main\".\"m\" rename to \"m__dbt_backup\"",
            "alter table \"lakehouse\".\"main\".\"m__dbt_tmp\" rename to \"m\"",
        ] {
            ok(run(f, sql, txn));
        }
    };
    let txn = begin(&mut f);
    materialize(&mut f, &txn);
    assert_eq!(names(&s), vec![vec![json!("m__dbt_backup")]]);
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(names(&s), vec![vec![json!("m")]]);
    assert_eq!(s.rows("SELECT v FROM m"), vec![vec![json!(1)]]);
    // Committed, then the backup dropped outside the transaction, as dbt does.
    let txn = begin(&mut f);
    materialize(&mut f, &txn);
    ok(end(&mut f, &txn, EndTransaction::Commit));
    ok(f.update("drop table if exists \"lakehouse\".\"main\".\"m__dbt_backup\""));
    assert_eq!(names(&s), vec![vec![json!("m")]]);
    assert_eq!(s.rows("SELECT v FROM m"), vec![vec![json!(2)]]);
    // TRUNCATE in a transaction: others keep the rows, and so does a rollback.
    let txn = begin(&mut f);
    assert_eq!(ok(run(&mut f, "TRUNCATE TABLE m", &txn)), 1);
    assert_eq!(s.rows("SELECT count(*) FROM m"), vec![vec![json!(1)]]);
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(s.rows("SELECT v FROM m"), vec![vec![json!(2)]]);

    // A checkpointed table: the transaction reads from the checkpoint its pin includes,
    // its own commits checkpoint privately, the publish lands after the last real one.
    s.rows("CREATE TABLE cp (id INT); ALTER TABLE cp SET TBLPROPERTIES ('delta.checkpointInterval' = '2')");
    for i in 0..5 {
        s.rows(&format!("INSERT INTO cp VALUES ({i})"));
    }
    let txn = begin(&mut f);
    for i in 5..9 {
        ok(run(&mut f, &format!("INSERT INTO cp VALUES ({i})"), &txn));
    }
    ok(run(&mut f, "DELETE FROM cp WHERE id = 0", &txn));
    assert_eq!(inside(&mut f, "SELECT count(*) AS id FROM cp", &txn), [8]);
    assert_eq!(s.rows("SELECT count(*) FROM cp"), vec![vec![json!(5)]]);
    ok(end(&mut f, &txn, EndTransaction::Commit));
    assert_eq!(
        s.rows("SELECT count(*), min(id) FROM cp"),
        vec![vec![json!(8), json!(1)]]
    );

    // Closing the session with a transaction open rolls it back before answering.
    let txn = begin(&mut f);
    ok(run(&mut f, "DELETE FROM t WHERE id > 1", &txn));
    assert_eq!(ids(&s), all);
    f.action("CloseSession", Vec::new()).expect("close");
    assert_eq!(ids(&s), all);
    assert!(
        !s.data()
            .join(".deltalite_txn")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
}

/// A transaction's COMMIT publishes its writes as one commit that lists their files as
/// the staged log did, so the table reads them in the order they were written (the
/// COMMIT listed them in hash order: three single-row INSERTs came back shuffled).
#[test]
fn a_commit_keeps_the_order_its_writes_were_made_in() {
    use arrow_flight::sql::EndTransaction;
    let s = Server::start();
    s.rows("CREATE TABLE t AS SELECT 0 AS id");
    let mut f = Flight::login(&s, ALICE);
    let mut expected = vec![vec![json!(0)]];
    for round in 0..3 {
        let txn = begin(&mut f);
        for i in 1..=4 {
            let id = round * 10 + i;
            assert_eq!(
                ok(run(&mut f, &format!("INSERT INTO t VALUES ({id})"), &txn)),
                1
            );
            expected.push(vec![json!(id)]);
        }
        ok(end(&mut f, &txn, EndTransaction::Commit));
        assert_eq!(s.rows("SELECT id FROM t"), expected, "round {round}");
    }
}

/// Transactions on an object-store data root (a real S3-compatible server, moto): the
/// private log lives in the bucket, a staged table follows its rename there, COMMIT
/// publishes, and ROLLBACK leaves no object behind.
#[test]
fn transactions_stage_on_an_object_store() {
    use arrow_flight::sql::EndTransaction;
    let moto = deltalite_testkit::moto::Moto::start("txn");
    let mut args: Vec<String> = Vec::new();
    for (k, v) in moto.options() {
        args.push("--storage-option".into());
        args.push(format!("{k}={v}"));
    }
    let s = Server::start_on(
        tempfile::tempdir().expect("tempdir"),
        "s3://txn/lake",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    s.rows("CREATE SCHEMA lakehouse.main");
    s.rows("CREATE TABLE t (id INT); INSERT INTO t VALUES (1)");
    let mut f = Flight::login(&s, ALICE);
    let ids = |s: &Server| s.rows("SELECT id FROM t ORDER BY id");
    let keys = |prefix: &str| moto.keys("txn", &format!("lake/{prefix}"));
    let before = keys("lakehouse/main/t/");
    let stage = |f: &mut Flight, txn: &bytes::Bytes| {
        for sql in [
            "INSERT INTO t VALUES (2)",
            "UPDATE t SET id = 10 WHERE id = 1",
            "CREATE TABLE n__tmp AS SELECT 1 AS id",
            "ALTER TABLE n__tmp RENAME TO n",
        ] {
            ok(run(f, sql, txn));
        }
    };

    let txn = begin(&mut f);
    stage(&mut f, &txn);
    assert_eq!(ids(&s), vec![vec![json!(1)]]);
    assert_eq!(
        s.error("SELECT id FROM n"),
        "Catalog Error: Table with name n does not exist!"
    );
    let private = keys(".deltalite_txn/");
    assert!(
        private
            .iter()
            .any(|k| k.contains("/lakehouse/main/n/00000000000000000000.json")),
        "{private:?}"
    );
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(ids(&s), vec![vec![json!(1)]]);
    assert_eq!(keys("lakehouse/main/t/"), before);
    assert_eq!(keys(".deltalite_txn/"), Vec::<String>::new());
    assert_eq!(keys("lakehouse/main/n/"), Vec::<String>::new());
    assert_eq!(keys("lakehouse/main/n__tmp/"), Vec::<String>::new());

    let txn = begin(&mut f);
    stage(&mut f, &txn);
    ok(end(&mut f, &txn, EndTransaction::Commit));
    assert_eq!(ids(&s), vec![vec![json!(2)], vec![json!(10)]]);
    assert_eq!(s.rows("SELECT id FROM n"), vec![vec![json!(1)]]);
    assert_eq!(keys(".deltalite_txn/"), Vec::<String>::new());
}

/// `DROP TABLE` and `DROP SCHEMA` in a transaction move the folder aside: others see it
/// gone at once, ROLLBACK brings it back whole (rows, history, views), COMMIT deletes it
/// (nothing is left on disk), and a name someone took meanwhile makes the drop stand,
/// named in the rollback's error. dbt drops schemas and relations inside transactions.
#[test]
fn transactions_drop_tables_and_schemas_aside() {
    use arrow_flight::sql::EndTransaction;
    let s = Server::start();
    s.rows("CREATE SCHEMA s; CREATE TABLE s.t AS SELECT 1 AS id; CREATE TABLE main.k (id INT)");
    s.rows("INSERT INTO s.t VALUES (2); CREATE VIEW s.v AS SELECT id * 10 AS x FROM s.t");
    let mut f = Flight::login(&s, ALICE);
    let tables = |s: &Server| {
        s.rows(
            "SELECT table_schema, table_name FROM information_schema.tables \
             WHERE table_schema IN ('s', 'main') ORDER BY 1, 2",
        )
    };
    let all = vec![
        vec![json!("main"), json!("k")],
        vec![json!("s"), json!("t")],
        vec![json!("s"), json!("v")],
    ];
    let lake = s.data().join("lakehouse");
    let hidden = |dir: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with(".dropped-"))
            .collect()
    };

    // Rolled back: the schema, its table (both versions) and its view are back.
    let txn = begin(&mut f);
    ok(run(&mut f, "DROP TABLE main.k", &txn));
    ok(run(&mut f, "DROP SCHEMA s CASCADE", &txn));
    assert_eq!(tables(&s), Vec::<Vec<serde_json::Value>>::new());
    assert_eq!(
        s.error("SELECT * FROM s.t"),
        "Catalog Error: Table with name t does not exist!"
    );
    assert_eq!(hidden(&lake).len(), 1);
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(tables(&s), all);
    assert_eq!(
        s.rows("SELECT x FROM s.v ORDER BY x"),
        vec![vec![json!(10)], vec![json!(20)]]
    );
    assert_eq!(
        s.rows("SELECT id FROM s.t VERSION AS OF 0"),
        vec![vec![json!(1)]]
    );
    assert!(hidden(&lake).is_empty() && hidden(&lake.join("main")).is_empty());

    // Dropped and made again inside the transaction (dbt re-creating a relation): others
    // see the drop and not the new table; the rollback drops the new one and brings the
    // old one back.
    let txn = begin(&mut f);
    ok(run(&mut f, "DROP TABLE s.t", &txn));
    ok(run(&mut f, "CREATE TABLE s.t AS SELECT 99 AS id", &txn));
    assert_eq!(
        s.error("SELECT id FROM s.t"),
        "Catalog Error: Table with name t does not exist!"
    );
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(
        s.rows("SELECT id FROM s.t ORDER BY id"),
        vec![vec![json!(1)], vec![json!(2)]]
    );

    // Without CASCADE a schema that holds relations is refused, as in DuckDB.
    let txn = begin(&mut f);
    let e = run(&mut f, "DROP SCHEMA s", &txn).expect_err("restrict");
    assert_eq!(
        e.message(),
        "Dependency Error: Cannot drop schema \"s\" because there are entries that depend on it. Use DROP...CASCADE to drop all dependents."
    );
    ok(end(&mut f, &txn, EndTransaction::Rollback));
    assert_eq!(tables(&s), all);

    // A name another session took meanwhile: that drop stands, and the error says so.
    let txn = begin(&mut f);
    ok(run(&mut f, "DROP TABLE main.k", &txn));
    s.rows("CREATE TABLE main.k AS SELECT 'theirs' AS who");
    let e = end(&mut f, &txn, EndTransaction::Rollback).expect_err("taken");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::Aborted,
            "TransactionContext Error: rolled back, except lakehouse.main.k: dropped by this transaction and its name taken by another session since, so it stays dropped"
        )
    );
    assert_eq!(
        s.rows("SELECT who FROM main.k"),
        vec![vec![json!("theirs")]]
    );
    assert!(hidden(&lake.join("main")).is_empty());

    // Committed: gone for good, nothing set aside is left behind.
    let txn = begin(&mut f);
    ok(run(&mut f, "DROP SCHEMA IF EXISTS s CASCADE", &txn));
    ok(run(&mut f, "DROP TABLE IF EXISTS main.nothing", &txn));
    ok(end(&mut f, &txn, EndTransaction::Commit));
    assert_eq!(tables(&s), vec![vec![json!("main"), json!("k")]]);
    assert!(hidden(&lake).is_empty());
    assert!(!lake.join("s").exists());
}

/// DuckDB's catalog functions, with the statements dbt-altertable sends (verbatim from
/// its macros), over the catalogs the user sees only.
#[test]
fn duckdb_catalog_functions_answer_dbts_statements() {
    let s = Server::start();
    s.rows("CREATE SCHEMA analytics; CREATE TABLE analytics.people (id INT NOT NULL, name VARCHAR); COMMENT ON TABLE analytics.people IS 'folks'; COMMENT ON COLUMN analytics.people.name IS 'who'");
    let mut f = Flight::login(&s, ALICE);
    let got = f
        .query("select lower(database_name) from duckdb_databases() where type = 'ducklake'")
        .expect("databases");
    assert_eq!(got.rows(), 0);
    let got = f
        .query("select database_name, type, readonly, internal from duckdb_databases() order by 1")
        .expect("databases");
    assert_eq!(
        strings(&got.batches, "database_name"),
        ["lakehouse", "other"]
    );
    assert_eq!(strings(&got.batches, "type"), ["duckdb", "duckdb"]);
    let relations = "select 'lakehouse' as database, table_name as name, schema_name as schema, 'table' as type from duckdb_tables() where lower(schema_name) = 'analytics' and lower(database_name) = 'lakehouse' union all select 'lakehouse' as database, view_name as name, schema_name as schema, 'view' as type from duckdb_views() where lower(schema_name) = 'analytics' and lower(database_name) = 'lakehouse'";
    let got = f.query(relations).expect("relations");
    assert_eq!(strings(&got.batches, "name"), ["people"]);
    assert_eq!(strings(&got.batches, "type"), ["table"]);
    let got = f
        .query("select t.comment from duckdb_tables() t where t.table_name = 'people'")
        .expect("comment");
    assert_eq!(strings(&got.batches, "comment"), ["folks"]);
    let columns = "select column_name, data_type, cast(null as integer) as character_maximum_length, cast(null as integer) as numeric_precision, cast(null as integer) as numeric_scale from duckdb_columns() where table_name = 'people' and lower(schema_name) = lower('analytics') and lower(database_name) = lower('lakehouse') order by column_index";
    let got = f.query(columns).expect("columns");
    assert_eq!(strings(&got.batches, "column_name"), ["id", "name"]);
    assert_eq!(strings(&got.batches, "data_type"), ["INTEGER", "VARCHAR"]);
    let got = f
        .query("select column_index, comment, is_nullable from duckdb_columns() where table_name = 'people' order by column_index")
        .expect("columns");
    assert_eq!(int64s(&got.batches, "column_index"), [1, 2]);
    let comments = got.batches[0].column_by_name("comment").expect("comment");
    assert!(comments.is_null(0));
    assert_eq!(strings(&got.batches, "comment")[1], "who");
    assert_eq!(strings(&got.batches, "is_nullable"), ["false", "true"]);
    // Only the bare call is the catalog function: quoted, qualified or with arguments it
    // is a name like any other.
    for (sql, expected) in [
        (
            "SELECT * FROM \"duckdb_tables\"()",
            "Catalog Error: Table with name duckdb_tables does not exist!",
        ),
        (
            "SELECT * FROM x.duckdb_tables()",
            "Catalog Error: Table with name duckdb_tables does not exist!",
        ),
    ] {
        let e = f.query(sql).map(|_| ()).expect_err(sql);
        assert_eq!(e.message(), expected, "{sql}");
    }
    // Bob sees his catalog only, through every one of them.
    let mut b = Flight::login(&s, BOB);
    for sql in [
        "select database_name from duckdb_databases()",
        "select database_name from duckdb_schemas()",
        "select database_name from duckdb_tables()",
        "select database_name from duckdb_columns()",
    ] {
        let got = b.query(sql).expect(sql);
        assert!(
            strings(&got.batches, "database_name")
                .iter()
                .all(|d| d == "other"),
            "{sql}"
        );
    }
}

/// `ALTER TABLE … RENAME TO` and `TRUNCATE` (dbt's table materialization and re-seeding),
/// with DuckDB's refusals, over both protocols' shared SQL layer.
#[test]
fn dbt_expression_forms_answer_as_duckdb_does() {
    let s = Server::start();
    let mut f = Flight::login(&s, ALICE);
    // dbt's leading query comment and trailing `;`, md5, `::text`, a dollar-quoted
    // string, now(): what its macros send, with DuckDB's answers.
    let fetched = f
        .query(
            "/* {\"app\": \"dbt\", \"node_id\": \"model.p.m\"} */\n\
             SELECT md5('abc') AS h, 42::text AS t, $tag$it's$tag$ AS d, \
             now() <= now() AS n;",
        )
        .expect("query");
    assert_eq!(
        [
            strings(&fetched.batches, "h"),
            strings(&fetched.batches, "t"),
            strings(&fetched.batches, "d"),
            strings(&fetched.batches, "n"),
        ],
        [
            ["900150983cd24fb0d6963f7d28e17f72"],
            ["42"],
            ["it's"],
            ["true"]
        ]
    );
    let t = fetched.batches[0].schema();
    assert_eq!(
        t.field_with_name("t").expect("t").data_type(),
        &DataType::Utf8
    );
}

#[test]
fn rename_and_truncate() {
    let s = Server::start();
    s.rows("CREATE TABLE a (x INT); INSERT INTO a VALUES (1), (2); CREATE TABLE b (y INT)");
    let mut f = Flight::login(&s, ALICE);
    assert_eq!(ok(f.update("ALTER TABLE a RENAME TO c")), 0);
    assert_eq!(
        s.rows("SELECT x FROM lakehouse.main.c ORDER BY x"),
        vec![vec![json!(1)], vec![json!(2)]]
    );
    for (sql, code, message) in [
        (
            "SELECT * FROM a",
            Code::InvalidArgument,
            "Catalog Error: Table with name a does not exist!",
        ),
        (
            "ALTER TABLE c RENAME TO b",
            Code::InvalidArgument,
            "Catalog Error: Could not rename \"c\" to \"b\": another entry with this name already exists!",
        ),
        (
            "ALTER TABLE a RENAME TO d",
            Code::InvalidArgument,
            "Catalog Error: Table with name a does not exist!",
        ),
        (
            "ALTER TABLE c RENAME TO other.main.c",
            Code::InvalidArgument,
            "Not implemented Error: RENAME TO moves a table within its schema only",
        ),
    ] {
        let e = f.query(sql).map(|_| ()).expect_err(sql);
        assert_eq!((e.code(), e.message()), (code, message), "{sql}");
    }
    assert_eq!(ok(f.update("ALTER TABLE IF EXISTS a RENAME TO d")), 0);
    // Bob renames nothing in a catalog he does not see.
    let mut b = Flight::login(&s, BOB);
    let e = b
        .update("ALTER TABLE lakehouse.main.c RENAME TO z")
        .expect_err("bob");
    assert_eq!(
        e.message(),
        "Catalog Error: Catalog with name lakehouse does not exist!"
    );
    assert_eq!(
        s.rows("SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lakehouse' ORDER BY 1"),
        vec![vec![json!("b")], vec![json!("c")]]
    );
    // TRUNCATE answers the rows it deleted and keeps the table.
    assert_eq!(ok(f.update("TRUNCATE TABLE c")), 2);
    assert_eq!(ok(f.update("TRUNCATE c")), 0);
    assert_eq!(s.rows("SELECT count(*) FROM c"), vec![vec![json!(0)]]);
    let e = b.update("TRUNCATE lakehouse.main.c").expect_err("bob");
    assert_eq!(
        e.message(),
        "Catalog Error: Catalog with name lakehouse does not exist!"
    );
}

/// Temporary tables: the session's own, by their bare name in its later calls (before a
/// main table of the same name, as DuckDB's `temp` schema), listed by
/// `duckdb_columns()` for their session only, gone with the session; refused over HTTP.
#[test]
fn temporary_tables_belong_to_their_session() {
    let s = Server::start();
    s.rows("CREATE TABLE src (id INT, v VARCHAR); INSERT INTO src VALUES (1, 'main'); CREATE TABLE t_tmp (id INT)");
    let mut f = Flight::login(&s, ALICE);
    ok(f.update("create temporary table \"t_tmp\" as (select id, 'temp' as v from src)"));
    let got = f.query("SELECT v FROM t_tmp").expect("bare name");
    assert_eq!(strings(&got.batches, "v"), ["temp"]);
    // Read by a MERGE, as dbt's incremental models do.
    assert_eq!(
        ok(f.update("MERGE INTO src AS d USING t_tmp AS s ON d.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v")),
        1
    );
    assert_eq!(s.rows("SELECT v FROM src"), vec![vec![json!("temp")]]);
    let got = f
        .query("select database_name like 'temp_%' as temp, column_name from duckdb_columns() where table_name = 't_tmp' order by 1, column_index")
        .expect("columns");
    assert_eq!(strings(&got.batches, "column_name"), ["id", "id", "v"]);
    assert_eq!(strings(&got.batches, "temp"), ["false", "true", "true"]);
    // Another session sees the main table only; so does HTTP.
    let mut g = Flight::login(&s, ALICE);
    let got = g.query("SELECT * FROM t_tmp").expect("main table");
    assert_eq!(got.info_schema.fields().len(), 1);
    assert_eq!(s.rows("SELECT count(*) FROM t_tmp"), vec![vec![json!(0)]]);
    assert_eq!(
        s.error("CREATE TEMPORARY TABLE x AS SELECT 1 AS a"),
        "Permission Error: temporary tables need a session (Flight SQL); over HTTP each request is its own"
    );
    let e = f
        .update("CREATE TEMPORARY TABLE other.main.x (a INT)")
        .expect_err("qualified");
    assert_eq!(
        e.message(),
        "Binder Error: Temporary tables can only be created in the temporary schema"
    );
    // Dropped by name; the main table is the bare name's again.
    ok(f.update("DROP TABLE t_tmp"));
    let got = f.query("SELECT * FROM t_tmp").expect("main again");
    assert_eq!(got.info_schema.fields().len(), 1);
    // A closed session's temporary catalog is removed with it.
    ok(f.update("create temporary table k as select 1 as a"));
    let before = s.rows("SELECT count(*) FROM information_schema.schemata");
    let catalogs = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .expect("data")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("temp_"))
            .count()
    };
    assert_eq!(catalogs(&s.data()), 1);
    f.action("CloseSession", Vec::new()).expect("close");
    let deadline = Instant::now() + Duration::from_secs(10);
    while catalogs(&s.data()) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(catalogs(&s.data()), 0);
    assert_eq!(
        s.rows("SELECT count(*) FROM information_schema.schemata"),
        before
    );
}

/// `GetXdbcTypeInfo`: the storable types by DuckDB's names, all or the one asked for,
/// in the spec's schema (the FlightInfo's and the stream's the same).
#[test]
fn xdbc_type_info_lists_the_storable_types() {
    let s = Server::start();
    let mut f = Flight::login(&s, ALICE);
    let get = |f: &mut Flight, data_type: Option<i32>| {
        let info =
            f.rt.block_on(
                f.client
                    .get_xdbc_type_info(arrow_flight::sql::CommandGetXdbcTypeInfo { data_type }),
            )
            .expect("info");
        f.fetch(info).expect("types")
    };
    let all = get(&mut f, None);
    assert_eq!(all.info_schema, all.stream_schema);
    let mut names = strings(&all.batches, "type_name");
    names.sort();
    assert_eq!(
        names,
        [
            "BIGINT",
            "BLOB",
            "BOOLEAN",
            "DATE",
            "DECIMAL",
            "DOUBLE",
            "FLOAT",
            "INTEGER",
            "SMALLINT",
            "TIMESTAMP",
            "TIMESTAMP WITH TIME ZONE",
            "TINYINT",
            "VARCHAR"
        ]
    );
    // XDBC_INTEGER (4) only.
    let one = get(&mut f, Some(4));
    assert_eq!(strings(&one.batches, "type_name"), ["INTEGER"]);
}

/// Views: durable (a restart keeps them), read over both protocols from any schema (the
/// names in them were qualified at creation), listed by `duckdb_views()` and
/// `information_schema.tables`, renamed and dropped as dbt does, and never a way around
/// the grants.
#[test]
fn views_are_durable_and_read_as_their_reader() {
    let mut s = Server::start();
    s.rows("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); CREATE SCHEMA s2");
    let mut f = Flight::login(&s, ALICE);
    ok(f.update(
        "CREATE VIEW v AS WITH big AS (SELECT a FROM t WHERE a > 1) SELECT a * 10 AS b FROM big",
    ));
    ok(f.update("CREATE VIEW s2.vv AS SELECT b + 1 AS c FROM main.v"));
    // From another default schema, and over HTTP.
    ok(f.update("USE lakehouse.s2"));
    let got = f.query("SELECT c FROM vv").expect("view of a view");
    assert_eq!(int64s(&got.batches, "c"), [21]);
    assert_eq!(got.info_schema, got.stream_schema);
    assert_eq!(s.rows("SELECT b FROM v"), vec![vec![json!(20)]]);
    for (sql, message) in [
        (
            "CREATE VIEW lakehouse.main.v AS SELECT 1 AS x",
            "Catalog Error: View with name \"v\" already exists!",
        ),
        (
            "CREATE VIEW lakehouse.main.t AS SELECT 1 AS x",
            "Catalog Error: Existing object t is of type Table, trying to replace with type View",
        ),
        (
            "CREATE VIEW bad AS SELECT * FROM nowhere",
            "Catalog Error: Table with name nowhere does not exist!",
        ),
        (
            "DROP VIEW nope",
            "Catalog Error: View with name nope does not exist!",
        ),
    ] {
        let e = f.update(sql).expect_err(sql);
        assert_eq!(e.message(), message, "{sql}");
    }
    ok(f.update("CREATE OR REPLACE VIEW lakehouse.main.v AS SELECT a * 100 AS b FROM lakehouse.main.t WHERE a > 1"));
    ok(f.update("CREATE VIEW IF NOT EXISTS lakehouse.main.v AS SELECT 1 AS x"));
    let got = f.query("SELECT c FROM vv").expect("replaced");
    assert_eq!(int64s(&got.batches, "c"), [201]);
    // Listed.
    let got = f
        .query(
            "select database_name, schema_name, view_name from duckdb_views() order by view_name",
        )
        .expect("duckdb_views");
    assert_eq!(strings(&got.batches, "view_name"), ["v", "vv"]);
    assert_eq!(strings(&got.batches, "schema_name"), ["main", "s2"]);
    assert_eq!(
        s.rows("SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = 'lakehouse' ORDER BY 1"),
        vec![
            vec![json!("t"), json!("BASE TABLE")],
            vec![json!("v"), json!("VIEW")],
            vec![json!("vv"), json!("VIEW")]
        ]
    );
    // dbt's view materialization: build under a tmp name, move the old one aside, rename.
    for sql in [
        "create view \"lakehouse\".\"main\".\"v__dbt_tmp\" as ( select 7 as b )",
        "alter view \"lakehouse\".\"main\".\"v\" rename to \"v__dbt_backup\"",
        "alter view \"lakehouse\".\"main\".\"v__dbt_tmp\" rename to \"v\"",
        "drop view if exists \"lakehouse\".\"main\".\"v__dbt_backup\"",
    ] {
        ok(f.update(sql));
    }
    assert_eq!(
        s.rows("SELECT b FROM lakehouse.main.v"),
        vec![vec![json!(7)]]
    );
    // Bob reads no view over Alice's catalog, and makes none.
    let mut b = Flight::login(&s, BOB);
    let e = b
        .query("SELECT * FROM lakehouse.main.v")
        .map(|_| ())
        .expect_err("bob");
    assert_eq!(
        e.message(),
        "Catalog Error: Catalog with name lakehouse does not exist!"
    );
    let e = b
        .update("CREATE VIEW other.main.peek AS SELECT * FROM lakehouse.main.t")
        .expect_err("bob");
    assert_eq!(
        e.message(),
        "Catalog Error: Catalog with name lakehouse does not exist!"
    );
    // A view over a temporary table would outlive it: refused.
    ok(f.update("CREATE TEMPORARY TABLE tmp AS SELECT 1 AS a"));
    let e = f
        .update("CREATE VIEW w AS SELECT * FROM tmp")
        .expect_err("temp");
    assert_eq!(
        e.message(),
        "Binder Error: view can not reference temporary table \"tmp\""
    );
    drop(f);
    drop(b);
    // Durable: a restarted server reads them.
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().expect("tempdir"));
    let data = s.data().to_string_lossy().to_string();
    let data = data.replace(
        s.dir.path().to_string_lossy().as_ref(),
        dir.path().to_string_lossy().as_ref(),
    );
    drop(s);
    let s = Server::start_on(dir, &data, &[]);
    assert_eq!(
        s.rows("SELECT c FROM lakehouse.s2.vv"),
        vec![vec![json!(8)]]
    );
    let mut f = Flight::login(&s, ALICE);
    ok(f.update("DROP VIEW lakehouse.s2.vv"));
    assert_eq!(
        s.error("SELECT * FROM lakehouse.s2.vv"),
        "Catalog Error: Table with name vv does not exist!"
    );
}

#[test]
fn session_options_and_scratch_catalogs() {
    let s = Server::start();
    s.rows("CREATE SCHEMA lakehouse.s1");
    let mut f = Flight::login(&s, ALICE);
    let current = |f: &mut Flight| {
        let got = f
            .query("SELECT current_catalog() AS c, current_schema() AS s")
            .expect("current");
        (
            strings(&got.batches, "c")[0].clone(),
            strings(&got.batches, "s")[0].clone(),
        )
    };
    assert_eq!(current(&mut f), ("lakehouse".into(), "main".into()));
    // Catalog first, then the schema in it; no errors → an empty raw result.
    let result = f
        .action(
            "SetSessionOptions",
            set_options(&[("schema", "main"), ("catalog", "other")]),
        )
        .expect("set");
    assert_eq!(result, vec![bytes::Bytes::new()]);
    assert_eq!(current(&mut f), ("other".into(), "main".into()));
    f.action(
        "SetSessionOptions",
        set_options(&[("catalog", "lakehouse"), ("schema", "s1")]),
    )
    .expect("set");
    assert_eq!(current(&mut f), ("lakehouse".into(), "s1".into()));
    // Refused options are named in the result: INVALID_VALUE (2), INVALID_NAME (1).
    let result = f
        .action(
            "SetSessionOptions",
            set_options(&[
                ("catalog", "nope"),
                ("color", "red"),
                ("compute_size", "2XL"),
            ]),
        )
        .expect("set");
    let mut expected: Vec<u8> = Vec::new();
    // errors: {"catalog": {value: 2}, "color": {value: 1}}, in either order.
    let catalog_err = [
        0x0a, 0x0d, 0x0a, 0x07, b'c', b'a', b't', b'a', b'l', b'o', b'g', 0x12, 0x02, 0x08, 0x02,
    ];
    let color_err = [
        0x0a, 0x0b, 0x0a, 0x05, b'c', b'o', b'l', b'o', b'r', 0x12, 0x02, 0x08, 0x01,
    ];
    expected.extend(catalog_err);
    expected.extend(color_err);
    let mut swapped: Vec<u8> = color_err.to_vec();
    swapped.extend(catalog_err);
    assert!(
        result[0].as_ref() == expected.as_slice() || result[0].as_ref() == swapped.as_slice(),
        "{:?}",
        result[0]
    );
    assert_eq!(current(&mut f), ("lakehouse".into(), "s1".into()));
    // Bob cannot switch to a catalog he is not granted.
    let mut bob = Flight::login(&s, BOB);
    let result = bob
        .action(
            "SetSessionOptions",
            set_options(&[("catalog", "lakehouse")]),
        )
        .expect("set");
    assert_eq!(result[0].as_ref(), &catalog_err[..]);

    // ATTACH ':memory:' AS x: a scratch catalog of this session only.
    assert_eq!(ok(f.update("ATTACH ':memory:' AS scratch_a")), 0);
    assert!(s.data().join("scratch_a").is_dir());
    assert_eq!(ok(f.update("CREATE SCHEMA scratch_a.s")), 0);
    assert_eq!(ok(f.update("CREATE TABLE scratch_a.s.t (a INT)")), 0);
    assert_eq!(ok(f.update("INSERT INTO scratch_a.s.t VALUES (1), (2)")), 2);
    let info = f.rt.block_on(f.client.get_catalogs()).expect("catalogs");
    assert_eq!(
        strings(&f.fetch(info).expect("fetch").batches, "catalog_name"),
        ["lakehouse", "other", "scratch_a"]
    );
    f.action(
        "SetSessionOptions",
        set_options(&[("catalog", "scratch_a")]),
    )
    .expect("set");
    assert_eq!(current(&mut f), ("scratch_a".into(), "main".into()));
    // Nobody else sees it: not another session of the same user, not HTTP.
    let mut other_session = Flight::login(&s, ALICE);
    let e = other_session
        .query("SELECT * FROM scratch_a.s.t")
        .err()
        .expect("not visible");
    assert_eq!(
        e.message(),
        "Catalog Error: Catalog with name scratch_a does not exist!"
    );
    assert_eq!(
        s.error("SELECT * FROM scratch_a.s.t"),
        "Catalog Error: Catalog with name scratch_a does not exist!"
    );
    // Its name cannot be taken twice, nor can a catalog's the user is not granted.
    let e = other_session
        .update("ATTACH ':memory:' AS scratch_a")
        .expect_err("taken");
    assert_eq!(
        e.message(),
        "Binder Error: Failed to attach database: database with name \"scratch_a\" already exists"
    );
    let e = bob
        .update("ATTACH ':memory:' AS lakehouse")
        .expect_err("not bob's");
    assert_eq!(
        e.message(),
        "Binder Error: Failed to attach database: database with name \"lakehouse\" already exists"
    );
    let e = f.update("ATTACH '/tmp/x.db' AS x").expect_err("a file");
    assert_eq!(
        e.message(),
        "Permission Error: statement not allowed: ATTACH '/tmp/x.db' AS"
    );
    // Over HTTP (no session to hold it) ATTACH stays refused.
    assert_eq!(
        s.error("ATTACH ':memory:' AS y"),
        "Permission Error: statement not allowed: ATTACH ':memory:' AS"
    );
    // DETACH removes it, data and all; not while it is the default.
    let e = f.update("DETACH scratch_a").expect_err("default");
    assert!(
        e.message().starts_with(
            "Binder Error: Cannot detach database \"scratch_a\" because it is the default database"
        ),
        "{}",
        e.message()
    );
    f.action(
        "SetSessionOptions",
        set_options(&[("catalog", "lakehouse")]),
    )
    .expect("set");
    assert_eq!(ok(f.update("DETACH scratch_a")), 0);
    assert!(!s.data().join("scratch_a").exists());
    let e = f.update("DETACH lakehouse").expect_err("configured");
    assert_eq!(
        e.message(),
        "Binder Error: Failed to detach database with name \"lakehouse\": only databases attached by this session can be detached"
    );
    assert_eq!(ok(f.update("DETACH IF EXISTS never_attached")), 0);
    // Closing the session removes what it attached.
    f.update("ATTACH ':memory:' AS scratch_b").expect("attach");
    assert!(s.data().join("scratch_b").is_dir());
    f.action("CloseSession", Vec::new()).expect("close");
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.data().join("scratch_b").exists() {
        assert!(
            Instant::now() < deadline,
            "the closed session's scratch catalog is removed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_bulk_ingest_the_disk_cannot_hold_is_the_servers_failure_and_leaves_nothing() {
    // The server cannot write a file past 1 MiB: the spool of a larger ingest fails as a
    // full disk would. That is the server's failure (INTERNAL, as HTTP's 500), not the
    // client's, and it leaves neither a table nor a spool file behind.
    let spool = tempfile::tempdir().expect("spool dir");
    let spool_dir = format!("--spool-dir={}", spool.path().display());
    let s = Server::start_with_file_limit(1024, &[&spool_dir]);
    let mut f = Flight::login(&s, ALICE);
    let ingest = |f: &mut Flight, table: &str, batches: Vec<RecordBatch>| {
        let cmd = CommandStatementIngest {
            table_definition_options: Some(arrow_flight::sql::TableDefinitionOptions {
                if_not_exist: 1, // create
                if_exists: 2,    // append
            }),
            table: table.into(),
            schema: Some("main".into()),
            catalog: Some("lakehouse".into()),
            temporary: false,
            transaction_id: None,
            options: Default::default(),
        };
        let stream = futures::stream::iter(batches.into_iter().map(Ok));
        f.rt.block_on(f.client.execute_ingest(cmd, stream))
            .map_err(status_of)
    };
    // 8 x 50,000 rows of distinct 40-character strings: about 16 MB to encode.
    let big: Vec<RecordBatch> = (0..8)
        .map(|b| {
            let ids: Vec<i64> = (b * 50_000..(b + 1) * 50_000).collect();
            let names: Vec<String> = ids
                .iter()
                .map(|i| format!("{:040x}", (*i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
                .collect();
            batch(vec![
                ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                ("name", Arc::new(StringArray::from(names)) as ArrayRef),
            ])
        })
        .collect();
    let e = ingest(&mut f, "big", big).expect_err("the spool is over the limit");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::Internal,
            "spool I/O error: File too large (os error 27)"
        )
    );
    assert!(!s.data().join("lakehouse/main/big").exists());
    let left: Vec<_> = std::fs::read_dir(spool.path()).unwrap().collect();
    assert!(left.is_empty(), "spool files left: {left:?}");
    // A batch the spool can hold still goes in, on the same server.
    let small = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            "name",
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        ),
    ]);
    assert_eq!(ok(ingest(&mut f, "small", vec![small])), 2);
    assert_eq!(s.rows("SELECT count(*) FROM small"), vec![vec![json!(2)]]);
    assert!(!s.data().join("lakehouse/main/big").exists());
}

#[test]
fn bulk_ingest_creates_appends_replaces_and_upserts() {
    let s = Server::start();
    let mut f = Flight::login(&s, ALICE);
    let ingest = |f: &mut Flight,
                  table: &str,
                  if_not_exist: i32,
                  if_exists: i32,
                  options: &[(&str, &str)],
                  batches: Vec<RecordBatch>| {
        let cmd = CommandStatementIngest {
            table_definition_options: Some(arrow_flight::sql::TableDefinitionOptions {
                if_not_exist,
                if_exists,
            }),
            table: table.into(),
            schema: Some("main".into()),
            catalog: Some("lakehouse".into()),
            temporary: false,
            transaction_id: None,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let stream = futures::stream::iter(batches.into_iter().map(Ok));
        f.rt.block_on(f.client.execute_ingest(cmd, stream))
            .map_err(status_of)
    };
    let (create, fail_missing) = (1, 2);
    let (fail_exists, append, replace) = (1, 2, 3);
    let rows = |ids: Vec<i64>, names: Vec<&str>| {
        batch(vec![
            ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        ])
    };
    // create_append on a missing table creates it; two batches, one commit.
    assert_eq!(
        ok(ingest(
            &mut f,
            "ing",
            create,
            append,
            &[],
            vec![rows(vec![1, 2], vec!["a", "b"]), rows(vec![3], vec!["c"])]
        )),
        3
    );
    assert_eq!(s.rows("SELECT count(*) FROM ing"), vec![vec![json!(3)]]);
    // The spooled file is stored as it is, encoded as the engine encodes an append's
    // files (Snappy pages), in one row group.
    let files: Vec<_> = std::fs::read_dir(s.data().join("lakehouse/main/ing"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    use parquet::file::reader::FileReader;
    let stored =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&files[0]).unwrap())
            .unwrap();
    let codecs: Vec<_> = stored
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|g| g.columns().iter().map(|c| c.compression()))
        .collect();
    assert_eq!(codecs, vec![parquet::basic::Compression::SNAPPY; 2]);
    // create when it exists fails, and changes nothing.
    let e = ingest(
        &mut f,
        "ing",
        create,
        fail_exists,
        &[],
        vec![rows(vec![9], vec!["z"])],
    )
    .expect_err("exists");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::InvalidArgument,
            "Failed to execute ingest: Table with name ing already exists!"
        )
    );
    // append to a missing table fails.
    let e = ingest(
        &mut f,
        "missing",
        fail_missing,
        append,
        &[],
        vec![rows(vec![1], vec!["a"])],
    )
    .expect_err("missing");
    assert_eq!(
        e.message(),
        "Failed to execute ingest: Catalog Error: Table with name missing does not exist!"
    );
    assert!(!s.data().join("lakehouse/main/missing").exists());
    assert_eq!(
        ok(ingest(
            &mut f,
            "ing",
            fail_missing,
            append,
            &[],
            vec![rows(vec![4], vec!["d"])]
        )),
        1
    );
    // replace.
    assert_eq!(
        ok(ingest(
            &mut f,
            "ing",
            create,
            replace,
            &[],
            vec![rows(vec![10, 11], vec!["x", "y"])]
        )),
        2
    );
    assert_eq!(
        s.rows("SELECT id FROM ing ORDER BY id"),
        vec![vec![json!(10)], vec![json!(11)]]
    );
    // upsert: primary_key and cursor_field as JSON arrays; the newer cursor wins.
    let with_cursor = batch(vec![
        (
            "id",
            Arc::new(Int64Array::from(vec![1, 2, 3, 1])) as ArrayRef,
        ),
        (
            "email",
            Arc::new(StringArray::from(vec![
                "alice@x",
                "bob@x",
                "carol@x",
                "alice+1@x",
            ])) as ArrayRef,
        ),
        (
            "created_at",
            Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef,
        ),
    ]);
    assert_eq!(
        ok(ingest(
            &mut f,
            "users",
            create,
            append,
            &[
                ("primary_key", "[\"id\"]"),
                ("cursor_field", "[\"created_at\"]")
            ],
            vec![with_cursor]
        )),
        3
    );
    assert_eq!(
        s.rows("SELECT id, email FROM users ORDER BY id"),
        vec![
            vec![json!(1), json!("alice+1@x")],
            vec![json!(2), json!("bob@x")],
            vec![json!(3), json!("carol@x")]
        ]
    );
    let e = ingest(
        &mut f,
        "users",
        create,
        append,
        &[("primary_key", "id")],
        vec![rows(vec![1], vec!["a"])],
    )
    .expect_err("not json");
    assert_eq!(
        e.message(),
        "Failed to execute ingest: option primary_key must be a JSON array of column names, got \"id\""
    );
    // Bob cannot ingest into a catalog he is not granted.
    let mut bob = Flight::login(&s, BOB);
    let e = ingest(
        &mut bob,
        "x",
        create,
        append,
        &[],
        vec![rows(vec![1], vec!["a"])],
    )
    .expect_err("grant");
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::NotFound,
            "Catalog Error: Catalog with name lakehouse does not exist!"
        )
    );
    assert!(!s.data().join("lakehouse/main/x").exists());
}

#[test]
fn flight_can_be_turned_off() {
    let s = Server::start_with(&["--flight-listen", ""]);
    assert!(s.flight.is_none());
    assert!(s.healthy());
}

/// Delta's table statements over Flight SQL: `DESCRIBE HISTORY` and time travel answer
/// rows like any query; in a transaction `OPTIMIZE` is staged like a write (the
/// transaction's history shows it, others' does not, a rollback leaves no trace) and
/// `VACUUM`, which deletes files for good, is refused.
#[test]
fn delta_table_statements_over_flight_and_in_transactions() {
    use arrow_flight::sql::EndTransaction;
    let s = Server::start();
    s.rows("CREATE TABLE t (id INT); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)");
    let mut f = Flight::login(&s, ALICE);
    let query = |f: &mut Flight, sql: &str| {
        let info = ok(f
            .rt
            .block_on(f.client.execute(sql.into(), None))
            .map_err(status_of));
        ok(f.fetch(info)).batches
    };
    assert_eq!(
        int64s(&query(&mut f, "DESCRIBE HISTORY t"), "version"),
        [2, 1, 0]
    );
    assert_eq!(
        int64s(&query(&mut f, "SELECT id FROM t VERSION AS OF 1"), "id"),
        [1]
    );
    let txn = ok(f
        .rt
        .block_on(f.client.begin_transaction())
        .map_err(status_of));
    let run = |f: &mut Flight, sql: &str| {
        f.rt.block_on(f.client.execute_update(sql.into(), Some(txn.clone())))
            .map_err(status_of)
    };
    let e = run(&mut f, "VACUUM t").expect_err("vacuum in a transaction");
    assert_eq!(
        e.message(),
        "TransactionContext Error: VACUUM t deletes files for good and cannot be rolled back; run it outside the transaction"
    );
    ok(run(&mut f, "OPTIMIZE t"));
    let staged = ok(f
        .rt
        .block_on(
            f.client
                .execute("DESCRIBE HISTORY t LIMIT 1".into(), Some(txn.clone())),
        )
        .map_err(status_of));
    assert_eq!(
        strings(&ok(f.fetch(staged)).batches, "operation"),
        ["OPTIMIZE"]
    );
    assert_eq!(
        strings(&query(&mut f, "DESCRIBE HISTORY t LIMIT 1"), "operation"),
        ["WRITE"]
    );
    ok(f.rt
        .block_on(
            f.client
                .end_transaction(txn.clone(), EndTransaction::Rollback),
        )
        .map_err(status_of));
    assert_eq!(
        int64s(&query(&mut f, "DESCRIBE HISTORY t"), "version"),
        [2, 1, 0]
    );
    assert_eq!(
        int64s(&query(&mut f, "SELECT id FROM t ORDER BY id"), "id"),
        [1, 2]
    );
}
