//! Transient storage failures, against a real server on loopback (in this process, so
//! that every table is reached through the testkit's fault-injecting store): each write
//! path answers `503` with `Retry-After` and leaves the table as it was, a retry succeeds
//! and the rows are there exactly once; a lost commit response is recognised; a client
//! that leaves mid-request still gets its whole commit.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use deltalite_server::ServerConfig;
use deltalite_server::catalog::Storage;
use deltalite_testkit::store::{Fault, Op, Target, TestStore};
use serde_json::{Value, json};

/// A server in this process, every table reached through `store`.
pub(crate) struct InProcess {
    pub(crate) base: String,
    addr: std::net::SocketAddr,
    pub(crate) store: Arc<TestStore>,
    /// The data root's own objects (listings, views' definitions).
    pub(crate) root_store: Arc<TestStore>,
    dir: tempfile::TempDir,
    client: reqwest::blocking::Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcess {
    pub(crate) fn start() -> Self {
        Self::start_with(|_| {})
    }

    /// A server whose configuration `adjust` changes first.
    pub(crate) fn start_with(adjust: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("lake").display().to_string();
        let store = TestStore::local();
        std::fs::create_dir_all(&data).expect("data root");
        let root_store = TestStore::new(Arc::new(
            object_store::local::LocalFileSystem::new_with_prefix(&data).expect("root store"),
        ));
        let root = Arc::clone(&root_store);
        let mut config = ServerConfig::from_parts(
            data.clone(),
            "127.0.0.1:0".parse().expect("addr"),
            "alice:secret",
            None,
            "lakehouse",
        )
        .expect("config");
        adjust(&mut config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, address) = std::sync::mpsc::channel();
        let tables = Arc::clone(&store);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                bound
                    .send(listener.local_addr().expect("addr"))
                    .expect("send");
                let storage = Storage::open(&data, Default::default())
                    .expect("storage")
                    .with_table_store(tables)
                    .with_root_store(root);
                deltalite_server::serve_on(config, storage, listener, async {
                    let _ = stopped.await;
                })
                .await
                .expect("serve");
            });
        });
        let addr = address.recv().expect("bound address");
        Self {
            base: format!("http://{addr}"),
            addr,
            store,
            root_store,
            dir,
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
            shutdown: Some(stop),
            thread: Some(thread),
        }
    }

    pub(crate) fn post(
        &self,
        path: &str,
        content_type: &str,
        body: &str,
    ) -> reqwest::blocking::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .basic_auth("alice", Some("secret"))
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .expect("request")
    }

    pub(crate) fn sql(&self, statement: &str) -> reqwest::blocking::Response {
        self.post(
            "/query",
            "application/json",
            &json!({ "statement": statement }).to_string(),
        )
    }

    /// Rows of a query that must succeed.
    pub(crate) fn rows(&self, statement: &str) -> Vec<Vec<Value>> {
        let r = self.sql(statement);
        assert_eq!(r.status().as_u16(), 200, "{statement}");
        let text = r.text().expect("body");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        for l in &lines {
            assert!(l.get("error").is_none(), "{statement}: {l}");
        }
        lines[2..]
            .iter()
            .map(|l| l.as_array().expect("row").clone())
            .collect()
    }

    pub(crate) fn table(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join("lake/lakehouse/main").join(name)
    }

    pub(crate) fn commits(&self, name: &str) -> usize {
        std::fs::read_dir(self.table(name).join("_delta_log"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    .count()
            })
            .unwrap_or(0)
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.shutdown.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The answer must be a retryable 503: status, `Retry-After`, and a message that says
/// what failed.
fn assert_retryable(r: reqwest::blocking::Response, what: &str, prefix: &str) {
    assert_eq!(r.status().as_u16(), 503, "{what}");
    assert_eq!(
        r.headers()
            .get("retry-after")
            .map(|v| v.as_bytes().to_vec()),
        Some(b"1".to_vec()),
        "{what}"
    );
    let text = r.text().unwrap_or_default();
    assert!(text.starts_with(prefix), "{what}: {text}");
    assert!(text.contains("injected fault"), "{what}: {text}");
}

const T: &str = "catalog=lakehouse&schema=main";

#[test]
fn transient_store_failures_answer_503_and_a_retry_writes_once() {
    let s = InProcess::start();
    let r = s.post(
        &format!("/upload?{T}&table=t&mode=create"),
        "text/csv",
        "id,v\n1,a\n2,b\n3,c\n",
    );
    assert_eq!(r.status().as_u16(), 200);
    let contents = |s: &InProcess| s.rows("SELECT id, v FROM t ORDER BY id, v");
    let ingest = "Failed to execute ingest: ";

    // /upsert: every read of a stored data file fails (the probe's and rewrite's reads).
    let before = contents(&s);
    let commits = s.commits("t");
    s.store
        .inject(Op::Get, Target::Data, 1, usize::MAX, Fault::Fail);
    let upsert = |s: &InProcess| {
        s.post(
            &format!("/upsert?{T}&table=t&primary_key=id"),
            "text/csv",
            "id,v\n2,B\n4,d\n",
        )
    };
    assert_retryable(upsert(&s), "upsert, reads failing", ingest);
    assert!(s.store.take_fired() > 0);
    assert_eq!(
        (contents(&s), s.commits("t")),
        (before, commits),
        "nothing written"
    );
    assert_eq!(upsert(&s).status().as_u16(), 200, "the retry");
    let expected = vec![
        vec![json!(1), json!("a")],
        vec![json!(2), json!("B")],
        vec![json!(3), json!("c")],
        vec![json!(4), json!("d")],
    ];
    assert_eq!(contents(&s), expected);

    // /upsert: the commit's PUT fails before it reaches storage.
    s.store.inject(Op::Put, Target::Commit, 1, 1, Fault::Fail);
    let upsert5 = |s: &InProcess| {
        s.post(
            &format!("/upsert?{T}&table=t&primary_key=id"),
            "text/csv",
            "id,v\n5,e\n",
        )
    };
    assert_retryable(upsert5(&s), "upsert, commit failing", ingest);
    assert_eq!(s.store.take_fired(), 1);
    assert_eq!(contents(&s), expected, "nothing committed");
    assert_eq!(upsert5(&s).status().as_u16(), 200);
    assert_eq!(
        s.rows("SELECT count(*) FROM t WHERE id = 5"),
        vec![vec![json!(1)]]
    );

    // /upload append: data-file PUTs fail.
    s.store
        .inject(Op::Put, Target::Data, 1, usize::MAX, Fault::Fail);
    let append = |s: &InProcess| {
        s.post(
            &format!("/upload?{T}&table=t&mode=append"),
            "text/csv",
            "id,v\n6,f\n",
        )
    };
    assert_retryable(append(&s), "upload append", ingest);
    assert!(s.store.take_fired() > 0);
    assert_eq!(s.rows("SELECT count(*) FROM t"), vec![vec![json!(5)]]);
    assert_eq!(append(&s).status().as_u16(), 200);
    assert_eq!(
        s.rows("SELECT count(*) FROM t WHERE id = 6"),
        vec![vec![json!(1)]]
    );

    // /upload create: the new table's first commit fails; no table is left behind.
    s.store.inject(Op::Put, Target::Commit, 1, 1, Fault::Fail);
    let create = |s: &InProcess| {
        s.post(
            &format!("/upload?{T}&table=fresh&mode=create"),
            "text/csv",
            "id\n1\n2\n",
        )
    };
    assert_retryable(create(&s), "upload create", ingest);
    assert_eq!(s.store.take_fired(), 1);
    assert!(
        !s.table("fresh").exists(),
        "a failed create leaves no table"
    );
    assert_eq!(create(&s).status().as_u16(), 200);
    assert_eq!(s.rows("SELECT count(*) FROM fresh"), vec![vec![json!(2)]]);
    assert_eq!(s.commits("fresh"), 1);

    // /append (JSON): data-file PUTs fail.
    s.store
        .inject(Op::Put, Target::Data, 1, usize::MAX, Fault::Fail);
    let append_json = |s: &InProcess| {
        s.post(
            &format!("/append?{T}&table=t"),
            "application/json",
            r#"{"id": 7, "v": "g"}"#,
        )
    };
    assert_retryable(append_json(&s), "append", ingest);
    assert!(s.store.take_fired() > 0);
    let r = append_json(&s);
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().expect("json")["ok"], json!(true));
    assert_eq!(
        s.rows("SELECT count(*) FROM t WHERE id = 7"),
        vec![vec![json!(1)]]
    );

    // SQL DML: a transient failure is a 503 in the NDJSON protocol too.
    // The SQL layer's own wording, with the store's error inside.
    let sql_error = "";
    for (statement, op, check, expected) in [
        (
            "INSERT INTO t VALUES (8, 'h')",
            Op::Put,
            "SELECT count(*) FROM t WHERE id = 8",
            1,
        ),
        (
            "UPDATE t SET v = 'A' WHERE id = 1",
            Op::Put,
            "SELECT count(*) FROM t WHERE v = 'A'",
            1,
        ),
        (
            "DELETE FROM t WHERE id IN (SELECT 2)",
            Op::Get,
            "SELECT count(*) FROM t WHERE id = 2",
            0,
        ),
    ] {
        let count_before = s.rows("SELECT count(*) FROM t");
        let commits = s.commits("t");
        s.store.inject(op, Target::Data, 1, usize::MAX, Fault::Fail);
        assert_retryable(s.sql(statement), statement, sql_error);
        assert!(s.store.take_fired() > 0, "{statement}");
        assert_eq!(s.commits("t"), commits, "{statement}: nothing committed");
        assert_eq!(
            s.rows("SELECT count(*) FROM t"),
            count_before,
            "{statement}"
        );
        s.rows(statement);
        assert_eq!(
            s.rows(check),
            vec![vec![json!(expected)]],
            "{statement}: once"
        );
    }
}

#[test]
fn a_transient_failure_on_a_views_definition_answers_503_and_changes_nothing() {
    let s = InProcess::start();
    s.rows("CREATE TABLE t (a BIGINT)");
    s.rows("INSERT INTO t VALUES (1), (2)");
    s.rows("CREATE VIEW v AS SELECT a FROM t");
    s.rows("COMMENT ON VIEW v IS 'kept'");
    let views = |s: &InProcess| {
        s.rows("SELECT view_name, comment, sql FROM duckdb_views() ORDER BY view_name")
    };
    let before = views(&s);
    assert_eq!(before.len(), 1);
    let definition = Target::File("v.json".into());
    for (statement, op) in [
        // Reading it: a query over it, a listing of its columns.
        ("SELECT count(*) FROM v", Op::Get),
        (
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'v'",
            Op::Get,
        ),
        // Changing it: each reads the definition first, or writes it.
        ("COMMENT ON VIEW v IS 'changed'", Op::Get),
        ("COMMENT ON VIEW v IS 'changed'", Op::Put),
        ("CREATE OR REPLACE VIEW v AS SELECT 1 AS a", Op::Put),
        ("ALTER VIEW v RENAME TO w", Op::Get),
        ("DROP VIEW v", Op::Get),
    ] {
        s.root_store
            .inject(op, definition.clone(), 1, usize::MAX, Fault::Fail);
        assert_retryable(s.sql(statement), statement, "");
        assert!(s.root_store.take_fired() > 0, "{statement} ({op:?})");
        assert_eq!(views(&s), before, "{statement} ({op:?}) changed the view");
    }
    assert_eq!(s.rows("SELECT count(*) FROM v"), vec![vec![json!(2)]]);
}

#[test]
fn a_transient_failure_reading_a_deletion_vector_answers_503() {
    // The scan of files with vectors (`sql/vector_scan.rs`) reads each vector through the
    // table's store while it plans: a failing read is the query's retryable failure.
    let s = InProcess::start();
    s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)");
    s.sql("ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')");
    s.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')");
    assert_eq!(s.sql("DELETE FROM t WHERE id = 2").status().as_u16(), 200);
    s.store
        .inject(Op::Get, Target::Vectors, 1, usize::MAX, Fault::Fail);
    assert_retryable(
        s.sql("SELECT id FROM t ORDER BY id"),
        "query, vector reads failing",
        "",
    );
    assert!(s.store.take_fired() > 0, "the vector was read");
    assert_eq!(
        s.rows("SELECT id FROM t ORDER BY id"),
        vec![vec![json!(1)], vec![json!(3)], vec![json!(4)]],
        "the retry sees the live rows"
    );
}

#[test]
fn a_transient_failure_while_a_lookup_prunes_files_with_vectors_answers_503() {
    // A lookup by key reads the footers and bloom filter blocks of the files with vectors
    // while it plans (`sql/vector_scan.rs::Lookup`): a failing read is the query's
    // retryable failure, not a file silently kept or dropped. Both files have a vector,
    // so every data read of the lookup is one of those (no file is scanned later).
    let s = InProcess::start();
    for body in ["id,v\n1,a\n2,b\n3,c\n4,d\n", "id,v\n11,k\n12,l\n13,m\n"] {
        let r = s.post(
            &format!("/upsert?{T}&table=t&primary_key=id"),
            "text/csv",
            body,
        );
        assert_eq!(r.status().as_u16(), 200);
    }
    s.sql("ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')");
    assert_eq!(
        s.sql("DELETE FROM t WHERE id IN (1, 11)").status().as_u16(),
        200
    );
    let lookup = "SELECT v FROM t WHERE id IN (2, 12) ORDER BY v";
    s.store
        .inject(Op::Get, Target::Data, 1, usize::MAX, Fault::Fail);
    assert_retryable(s.sql(lookup), "lookup, data reads failing", "");
    assert!(s.store.take_fired() > 0, "the files were read");
    assert_eq!(
        s.rows(lookup),
        vec![vec![json!("b")], vec![json!("l")]],
        "the retry sees the live rows"
    );
}

#[test]
fn a_transient_failure_reading_a_footer_while_a_scan_runs_is_retryable() {
    // A Parquet scan reads a file's footer when it opens the file, as it executes.
    // DataFusion 55.2's reader turns the store's error into text there; the session's
    // readers keep it (`sql/physical/store_errors.rs`), so the failure is retryable: a
    // 503 over HTTP, `Unavailable` over Flight SQL.
    // Both scans: delta-rs's of files without vectors, ours of a file with one. Without
    // a footer cache, so that every scan reads the footers.
    for vectors in [false, true] {
        let flight = free_address();
        let s = InProcess::start_with(|c| {
            c.query_footer_cache_bytes = 0;
            c.flight_listen = Some(flight);
        });
        assert_eq!(
            s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)")
                .status()
                .as_u16(),
            200
        );
        if vectors {
            s.sql("ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')");
        }
        s.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')");
        let mut expected = vec![json!(1), json!(2), json!(3), json!(4)];
        if vectors {
            assert_eq!(s.sql("DELETE FROM t WHERE id = 2").status().as_u16(), 200);
            expected.remove(1);
        }
        let query = "SELECT id FROM t ORDER BY id";
        s.store
            .inject(Op::Get, Target::Data, 1, usize::MAX, Fault::Fail);
        let what = format!("query, data reads failing, vectors: {vectors}");
        // The first read a scan makes of a file is its footer. Before
        // `KeepStoreErrors` this answered 200 and a final error line, "… Failed to fetch
        // metadata for file …".
        assert_retryable(
            s.sql(query),
            &what,
            "Object Store error: Generic TestStore error: injected fault: get failed (",
        );
        assert!(s.store.take_fired() > 0, "{what}: the footer was read");
        // The same session layer over Flight SQL: the retryable status is `Unavailable`.
        // Before `KeepStoreErrors` it was `InvalidArgument`.
        s.store
            .inject(Op::Get, Target::Data, 1, usize::MAX, Fault::Fail);
        let failed = flight_rows(flight, query).expect_err("the query fails over Flight");
        assert_eq!(
            failed.code(),
            tonic::Code::Unavailable,
            "{what}: {failed:?}"
        );
        assert!(
            failed.message().starts_with(
                "Object Store error: Generic TestStore error: injected fault: get failed ("
            ),
            "{what}: {failed:?}"
        );
        assert!(
            s.store.take_fired() > 0,
            "{what}: the footer was read over Flight"
        );
        let rows: Vec<Value> = s.rows(query).into_iter().flatten().collect();
        assert_eq!(rows, expected, "{what}: the retry sees the live rows");
        let over_flight = flight_rows(flight, query).map_err(|e| format!("{e:?}"));
        assert_eq!(over_flight, Ok(expected.len()), "{what}: over Flight");
    }
}

/// A loopback address no one listens on, for a server's Flight endpoint.
pub(crate) fn free_address() -> std::net::SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    probe.local_addr().expect("addr")
}

/// The number of rows `sql` returns over Flight SQL (handshake as alice, GetFlightInfo,
/// DoGet), or the status of the call that failed.
fn flight_rows(addr: std::net::SocketAddr, sql: &str) -> Result<usize, tonic::Status> {
    let batches = flight_batches(addr, FlightCall::Query(sql.to_string()))?;
    Ok(batches.iter().map(|b| b.num_rows()).sum())
}

/// What [`flight_batches`] asks.
pub(crate) enum FlightCall {
    Query(String),
    Tables(arrow_flight::sql::CommandGetTables),
}

/// The batches the server at `addr` answers `call` with, asked as `alice` over a fresh
/// Flight SQL connection; a failure as the status it came with.
pub(crate) fn flight_batches(
    addr: std::net::SocketAddr,
    call: FlightCall,
) -> Result<Vec<arrow::array::RecordBatch>, tonic::Status> {
    use arrow_flight::error::FlightError;
    use arrow_flight::sql::client::FlightSqlServiceClient;
    use futures::TryStreamExt;

    let status = |e: FlightError| match e {
        FlightError::Tonic(s) => *s,
        other => tonic::Status::unknown(format!("client error: {other}")),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let mut client = FlightSqlServiceClient::new(channel);
        client
            .handshake("alice", "secret")
            .await
            .expect("handshake");
        let info = match call {
            FlightCall::Query(sql) => client.execute(sql, None).await,
            FlightCall::Tables(cmd) => client.get_tables(cmd).await,
        }
        .map_err(status)?;
        let ticket = info.endpoint[0].ticket.clone().expect("ticket");
        client
            .do_get(ticket)
            .await
            .map_err(status)?
            .try_collect()
            .await
            .map_err(status)
    })
}

#[test]
fn a_transient_failure_reading_a_tables_log_answers_503() {
    let s = InProcess::start();
    let r = s.post(
        &format!("/upload?{T}&table=t&mode=create"),
        "text/csv",
        "id,v\n1,a\n",
    );
    assert_eq!(r.status().as_u16(), 200);
    // Opening the table reads its commit entries: every such read fails.
    let upsert = |s: &InProcess| {
        s.post(
            &format!("/upsert?{T}&table=t&primary_key=id"),
            "text/csv",
            "id,v\n1,A\n2,b\n",
        )
    };
    s.store
        .inject(Op::Get, Target::Commit, 1, usize::MAX, Fault::Fail);
    assert_retryable(
        upsert(&s),
        "upsert, log reads failing",
        "cannot open table lakehouse.main.t: ",
    );
    assert!(s.store.take_fired() > 0);
    s.store
        .inject(Op::Get, Target::Commit, 1, usize::MAX, Fault::Fail);
    assert_retryable(
        s.sql("SELECT count(*) FROM t"),
        "query, log reads failing",
        "cannot open table lakehouse.main.t: ",
    );
    assert!(s.store.take_fired() > 0);
    assert_eq!(s.commits("t"), 1, "nothing committed");
    assert_eq!(upsert(&s).status().as_u16(), 200, "the retry");
    assert_eq!(
        s.rows("SELECT id, v FROM t ORDER BY id"),
        vec![vec![json!(1), json!("A")], vec![json!(2), json!("b")]]
    );
}

#[test]
fn a_lost_commit_response_is_recognised_as_the_requests_own() {
    let s = InProcess::start();
    let r = s.post(
        &format!("/upload?{T}&table=t&mode=create"),
        "text/csv",
        "id\n1\n",
    );
    assert_eq!(r.status().as_u16(), 200);
    // The commit lands, its response is lost: the engine finds its own commit.
    s.store
        .inject(Op::Put, Target::Commit, 1, 1, Fault::LostResponse);
    let r = s.post(
        &format!("/upload?{T}&table=t&mode=append"),
        "text/csv",
        "id\n2\n",
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(s.store.take_fired(), 1);
    assert_eq!(s.rows("SELECT count(*) FROM t"), vec![vec![json!(2)]]);
    assert_eq!(s.commits("t"), 2);
}

#[test]
fn a_client_that_leaves_mid_request_still_gets_its_whole_commit() {
    let s = InProcess::start();
    let r = s.post(
        &format!("/upload?{T}&table=t&mode=create"),
        "text/csv",
        "id,v\n1,a\n",
    );
    assert_eq!(r.status().as_u16(), 200);
    // The commit is held up; the client leaves while the engine waits for it.
    s.store.inject(
        Op::Put,
        Target::Commit,
        1,
        1,
        Fault::Delay(Duration::from_secs(2)),
    );
    let body = "id,v\n1,A\n2,b\n";
    let mut conn = std::net::TcpStream::connect(s.addr).expect("connect");
    write!(
        conn,
        "POST /upsert?{T}&table=t&primary_key=id HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\nContent-Type: text/csv\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    conn.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(700));
    drop(conn);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while s.commits("t") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the detached upsert never committed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.store.take_fired(), 1);
    assert_eq!(
        s.rows("SELECT id, v FROM t ORDER BY id"),
        vec![vec![json!(1), json!("A")], vec![json!(2), json!("b")]],
        "the whole upsert"
    );
    assert_eq!(s.commits("t"), 2);
}

#[test]
fn a_transient_failure_reading_a_footer_while_dml_scans_files_with_vectors_is_retryable() {
    // DELETE, UPDATE and MERGE find their rows through delta-rs's scan, which on a table
    // with deletion vectors accepts only the Parquet readers it planned: there
    // `KeepFooterErrorsExec` recovers a failed footer read's cause. The failing file is
    // the one without a vector, whose footer that scan reads as it executes (it reads
    // those of files with vectors while planning, keeping the cause).
    let s = InProcess::start_with(|c| c.query_footer_cache_bytes = 0);
    s.sql("CREATE TABLE t (id BIGINT, v VARCHAR)");
    s.sql("ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')");
    let data_files = || -> std::collections::BTreeSet<String> {
        std::fs::read_dir(s.table("t"))
            .expect("table folder")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".parquet"))
            .collect()
    };
    // The first file: ids 1-4 ('a'-'d') and 5-20 ('f'), so that each statement below
    // marks a row or two of it, never rewrites it. The second file: ids 11x.
    s.sql(
        "INSERT INTO t SELECT id, CASE id WHEN 1 THEN 'a' WHEN 2 THEN 'b' WHEN 3 THEN 'c' \
         WHEN 4 THEN 'd' ELSE 'f' END FROM unnest(range(1, 21)) AS r(id)",
    );
    let first = data_files();
    s.sql("INSERT INTO t VALUES (111, 'k'), (112, 'l'), (113, 'm'), (114, 'n')");
    let plain: Vec<String> = data_files().difference(&first).cloned().collect();
    let [plain] = plain.as_slice() else {
        panic!("one new file: {plain:?}")
    };
    assert_eq!(s.sql("DELETE FROM t WHERE id = 2").status().as_u16(), 200);
    assert_eq!(
        data_files().len(),
        2,
        "the first file got a vector, not a rewrite"
    );
    let ids = |s: &InProcess| -> Vec<i64> {
        s.rows("SELECT id FROM t WHERE id < 5 OR id > 100 ORDER BY id")
            .into_iter()
            .flatten()
            .map(|v| v.as_i64().expect("id"))
            .collect()
    };
    // Each statement changes rows of the first file only, and its predicate is no
    // column's bounds, so each one also scans the file without a vector.
    let statements = [
        (
            "DELETE FROM t WHERE lower(v) = 'c'",
            vec![1, 4, 111, 112, 113, 114],
        ),
        (
            "UPDATE t SET id = id + 100 WHERE lower(v) = 'd'",
            vec![1, 104, 111, 112, 113, 114],
        ),
        (
            "MERGE INTO t USING (SELECT 'a' AS v) s ON lower(t.v) = s.v \
             WHEN MATCHED THEN DELETE",
            vec![104, 111, 112, 113, 114],
        ),
    ];
    let mut live = vec![1, 3, 4, 111, 112, 113, 114];
    for (statement, after) in statements {
        let commits = s.commits("t");
        // Every read of the file fails, the second read of its footer too: the answer is
        // the store's error. Before `KeepFooterErrorsExec` this was 200 and a final error
        // line, "… Failed to fetch metadata for file …".
        s.store.inject(
            Op::Get,
            Target::File(plain.clone()),
            1,
            usize::MAX,
            Fault::Fail,
        );
        assert_retryable(
            s.sql(statement),
            statement,
            "Object Store error: Generic TestStore error: injected fault: get failed (",
        );
        assert!(s.store.take_fired() > 0, "{statement}: the footer was read");
        // Only the first read fails: the second read of the footer succeeds, so the
        // failure was the store's and went away.
        s.store
            .inject(Op::Get, Target::File(plain.clone()), 1, 1, Fault::Fail);
        assert_retryable(
            s.sql(statement),
            statement,
            "Object Store error: Generic footer error: Parquet error: Parquet error: \
             Failed to fetch metadata for file ",
        );
        assert_eq!(s.store.take_fired(), 1, "{statement}");
        assert_eq!(s.commits("t"), commits, "{statement}: nothing committed");
        assert_eq!(ids(&s), live, "{statement}: nothing changed");
        assert_eq!(
            s.sql(statement).status().as_u16(),
            200,
            "{statement}: retried"
        );
        assert_eq!(ids(&s), after, "{statement}: once");
        live = after;
    }
}
