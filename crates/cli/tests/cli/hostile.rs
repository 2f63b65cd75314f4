//! Hostile input against a real `deltalite serve`: a fast, deterministic subset of
//! `correctness/hostile/hostile_http.py` (which runs thousands of randomized cases). Cases that
//! `server.rs` already covers (plain path names, file-access SQL, oversized bodies, simple
//! malformed files) are not repeated here.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use base64::Engine;
use common::{Server, parquet_bytes};

const T: &str = "catalog=lakehouse&schema=main";

fn sample(n: i64) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new((0..n).collect::<Int64Array>()) as arrow::array::ArrayRef,
        ),
        (
            "v",
            Arc::new((0..n).map(|i| i as f64 / 2.0).collect::<Float64Array>()) as _,
        ),
        (
            "s",
            Arc::new(
                (0..n)
                    .map(|i| Some(format!("s{i}")))
                    .collect::<StringArray>(),
            ) as _,
        ),
    ])
    .expect("batch")
}

fn count(s: &Server, table: &str) -> i64 {
    s.rows(&format!("SELECT count(*) FROM {table}"))[0][0]
        .as_i64()
        .expect("count")
}

/// One raw HTTP/1.1 exchange: `head` is sent, then `drip` a byte at a time every `pause`
/// until the server answers or the drip ends; returns the status code (0 when the server
/// closed without a status line) and the time until the answer.
fn raw_exchange(s: &Server, head: &str, drip: &[u8], pause: Duration) -> (u16, Duration) {
    let addr = s.base.trim_start_matches("http://");
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let start = Instant::now();
    conn.write_all(head.as_bytes()).expect("head");
    conn.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 512];
    let mut answered = None;
    for b in drip {
        if let Ok(n) = conn.read(&mut buf)
            && n > 0
        {
            answered = Some(n);
            break;
        }
        if conn.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(pause);
    }
    conn.set_nonblocking(false).expect("blocking");
    let n = match answered {
        Some(n) => n,
        None => conn.read(&mut buf).unwrap_or(0),
    };
    let elapsed = start.elapsed();
    let text = String::from_utf8_lossy(&buf[..n]);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, elapsed)
}

fn basic() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("alice:secret")
    )
}

#[test]
fn stacked_statements_are_checked_before_any_runs() {
    let s = Server::start();
    // Refused statements anywhere in a stack: nothing of the stack runs.
    for (table, sql) in [
        (
            "stacked1",
            "CREATE TABLE stacked1 (a INT); COPY (SELECT 1) TO '/tmp/deltalite-stacked.csv'",
        ),
        (
            "stacked2",
            "CREATE TABLE stacked2 (a INT); CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc'",
        ),
    ] {
        let err = s.error(sql);
        assert!(err.starts_with("Permission Error"), "{sql}: {err}");
        assert!(
            !s.data().join("lakehouse/main").join(table).exists(),
            "{sql}"
        );
    }
    // SET is checked when it runs (some settings are allowed), so earlier statements of
    // the stack have run by then; the refused setting still has no effect.
    let err = s.error("CREATE TABLE stacked3 (a INT); SET datafusion.catalog.location = '/etc'");
    assert!(!err.is_empty());
    assert!(!std::path::Path::new("/tmp/deltalite-stacked.csv").exists());
    // Table functions that read files are not there, in any position of a stack.
    for sql in [
        "SELECT * FROM read_parquet('/etc/passwd')",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT 1; SELECT * FROM read_json('/etc/passwd')",
        "SELECT * FROM 'file:///etc/passwd'",
        "ATTACH '/tmp/x.db' AS x",
    ] {
        let err = s.error(sql);
        assert!(!err.contains("root:"), "{sql}: {err}");
    }
    // A stack of valid statements runs in order; the answer is the last one's.
    let rows = s.rows(
        "CREATE TABLE st (a BIGINT); INSERT INTO st VALUES (1), (2); SELECT count(*) FROM st",
    );
    assert_eq!(rows[0][0], 2);
    assert!(s.healthy());
}

#[test]
fn percent_encoded_and_odd_names() {
    let s = Server::start();
    // `%2e%2e` reached storage as `..` before names with '%' were refused.
    for q in [
        "catalog=lakehouse&schema=%252e%252e&table=x",
        "catalog=lakehouse&schema=%252e%252e&table=%252e%252e",
        "catalog=lakehouse&schema=main&table=a%252Fb",
        "catalog=lakehouse&schema=main&table=%25",
    ] {
        let (st, body) = s.upload(&format!("{q}&mode=create"), "text/csv", "a\n1\n");
        assert_eq!(st, 400, "{q}: {body}");
    }
    let err = s.error("CREATE TABLE \"p%2e%2e\" (a INT)");
    assert!(err.contains("Invalid table name"), "{err}");
    let entries: Vec<_> = std::fs::read_dir(s.dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        entries,
        vec!["lake"],
        "nothing written beside the data root"
    );
    let lake: Vec<_> = std::fs::read_dir(s.data())
        .expect("lake")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(lake.len(), 2, "only the catalogs under the root: {lake:?}");
    // Names that only look odd are fine and stay inside their folder.
    for name in ["a%23b", "%C3%A9t%C3%A9", "with%20space", "a%3Fb"] {
        let (st, body) = s.upload(
            &format!("{T}&table={name}&mode=create"),
            "text/csv",
            "a\n1\n",
        );
        assert_eq!(st, 200, "{name}: {body}");
    }
    assert_eq!(
        std::fs::read_dir(s.data().join("lakehouse/main"))
            .expect("schema dir")
            .count(),
        4
    );
}

#[test]
fn huge_headers_are_refused_and_the_server_keeps_serving() {
    let s = Server::start();
    let big = "x".repeat(1024 * 1024);
    for header in ["x-filler", "idempotency-key", "user-agent"] {
        let r = s
            .client
            .post(s.url(&format!("/upload?{T}&table=hh&mode=create_append")))
            .basic_auth("alice", Some("secret"))
            .header("content-type", "text/csv")
            .header(header, big.as_str())
            .body("a\n1\n")
            .send();
        // 431, or the connection is closed before an answer: never a 5xx, never a write.
        if let Ok(r) = r {
            assert_eq!(r.status().as_u16(), 431, "{header}");
        }
    }
    let mut req = s
        .client
        .get(s.url("/healthz"))
        .basic_auth("alice", Some("secret"));
    for i in 0..500 {
        req = req.header(format!("x-h{i}"), "v");
    }
    if let Ok(r) = req.send() {
        assert!(r.status().is_client_error(), "{}", r.status());
    }
    assert!(!s.data().join("lakehouse/main/hh").exists());
    assert!(s.healthy());
}

#[test]
fn slow_drip_bodies_time_out_and_steady_ones_complete() {
    let s = Server::start_with(&["--body-idle-timeout-secs", "1"]);
    let auth = basic();
    let body = b"a,b\n1,2\n";
    // Declares more than it sends, one byte every 1.5 s: answered 400 after about a second.
    let head = format!(
        "POST /upload?{T}&table=drip&mode=create HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\
         Content-Type: text/csv\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
    );
    let (status, took) = raw_exchange(&s, &head, body, Duration::from_millis(1500));
    assert_eq!(status, 400);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // A /query body that stops arriving.
    let head = format!(
        "POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"statement\""
    );
    let (status, took) = raw_exchange(&s, &head, b"", Duration::ZERO);
    assert_eq!(status, 400);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(!s.data().join("lakehouse/main/drip").exists());
    // Slow but steady (a byte every 200 ms, under the idle timeout): accepted.
    let head = format!(
        "POST /upload?{T}&table=steady&mode=create HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\
         Content-Type: text/csv\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let (status, _) = raw_exchange(&s, &head, body, Duration::from_millis(200));
    assert_eq!(status, 200);
    assert_eq!(count(&s, "steady"), 1);
    assert!(s.healthy());
}

/// A Parquet body whose footer is intact but whose first page header is garbage: the
/// engine stores matching files as they are after reading only the footer, so without the
/// server's decode pass this file landed in the table and broke every later read.
#[test]
fn corrupt_parquet_pages_are_refused_not_stored() {
    let s = Server::start();
    let good = parquet_bytes(&sample(100));
    let (st, body) = s.upload(
        &format!("{T}&table=pq&mode=create"),
        "application/parquet",
        good.clone(),
    );
    assert_eq!(st, 200, "{body}");
    let mut bad = good.clone();
    for b in &mut bad[4..24] {
        *b = 0xFF;
    }
    for mode in ["append", "create_append", "overwrite"] {
        let (st, body) = s.upload(
            &format!("{T}&table=pq&mode={mode}"),
            "application/parquet",
            bad.clone(),
        );
        assert_eq!(st, 400, "{mode}: {body}");
        assert!(body.starts_with("Failed to execute ingest"), "{body}");
    }
    let r = s.post(
        &format!("/upsert?{T}&table=pq&primary_key=id"),
        "application/parquet",
        bad.clone(),
    );
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(count(&s, "pq"), 100);
    assert_eq!(s.rows("SELECT sum(id) FROM pq")[0][0], 4950);
    // Truncated and spliced bodies of the same file.
    for cut in [good.len() / 2, good.len() - 9, good.len() - 1] {
        let (st, _) = s.upload(
            &format!("{T}&table=pq&mode=append"),
            "application/parquet",
            good[..cut].to_vec(),
        );
        assert_eq!(st, 400, "cut at {cut}");
    }
    let mut spliced = good.clone();
    let mid = spliced.len() / 2;
    spliced.copy_within(8..40, mid);
    let (st, _) = s.upload(
        &format!("{T}&table=pq&mode=append"),
        "application/parquet",
        spliced,
    );
    assert!(st == 400 || st == 200, "{st}");
    // Whatever was accepted is readable.
    s.rows("SELECT * FROM pq");
    assert!(s.healthy());
}

/// Bodies that are wrong in ways the decoders found hard: deep nesting, huge numbers,
/// invalid UTF-8, ragged CSV. All 400 (or 200 where the data is valid), never 5xx.
#[test]
fn adversarial_bodies_get_client_errors() {
    let s = Server::start();
    let deep = format!(
        "[{{\"a\": {}{}}}]",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("application/json", deep.into_bytes()),
        ("application/json", b"[{\"a\": 1e999999}]".to_vec()),
        (
            "application/json",
            format!("[{{\"a\": {}}}]", "9".repeat(100_000)).into_bytes(),
        ),
        ("application/json", b"[{\"a\": \"\xff\xfe\"}]".to_vec()),
        ("application/json", "[".repeat(100_000).into_bytes()),
        ("text/csv", b"a,b\n\xff\xfe,1\n".to_vec()),
        ("text/csv", b"a,b\n\"unterminated,2\n".to_vec()),
        ("text/csv", b"a,b,c\n1\n2,3,4,5\n".to_vec()),
        ("application/parquet", b"PAR1\xff\xff\xff\xffPAR1".to_vec()),
        ("application/octet-stream", vec![0u8; 4096]),
    ];
    for (i, (ct, body)) in cases.into_iter().enumerate() {
        for mode in ["create", "overwrite"] {
            let (st, text) = s.upload(&format!("{T}&table=adv{i}&mode={mode}"), ct, body.clone());
            assert!(st == 400 || st == 200, "case {i} {mode}: {st} {text}");
        }
        let r = s.post(
            &format!("/upsert?{T}&table=advu{i}&primary_key=a"),
            ct,
            body.clone(),
        );
        assert!(
            r.status().is_client_error() || r.status().is_success(),
            "case {i}: {}",
            r.status()
        );
        let r = s.post(&format!("/append?{T}&table=adva{i}"), ct, body);
        assert!(
            r.status().is_client_error() || r.status().is_success(),
            "case {i}: {}",
            r.status()
        );
    }
    assert!(s.healthy());
}

/// Statements nested deeper than the planner's stack allows used to abort the whole server
/// (a stack overflow is not a panic that can be caught): they are refused up front now.
#[test]
fn deeply_nested_sql_is_refused_and_the_server_survives() {
    let s = Server::start();
    let plus = format!("SELECT {}", vec!["1"; 20_000].join(" + "));
    let cast = format!("SELECT 1{}", "::BIGINT".repeat(5_000));
    let and = format!("SELECT 1 WHERE {}", vec!["true"; 5_000].join(" AND "));
    let union = format!("{}SELECT 1", "SELECT 1 UNION ALL ".repeat(5_000));
    let explain = format!("EXPLAIN {plus}");
    for sql in [&plus, &cast, &and, &union, &explain] {
        let err = s.error(sql);
        assert!(err.contains("statement too complex"), "{err}");
        assert!(s.healthy());
    }
    let r = s.post(
        "/validate",
        "application/json",
        serde_json::json!({ "statement": plus }).to_string(),
    );
    assert_eq!(r.status().as_u16(), 200);
    assert!(s.healthy());
    // Ordinary depth still works.
    let sum = format!("SELECT {}", vec!["1"; 200].join(" + "));
    assert_eq!(s.rows(&sum)[0][0], 200);
    let unions = format!("{}SELECT 1", "SELECT 1 UNION ALL ".repeat(300));
    assert_eq!(s.rows(&unions).len(), 301);
}

/// Functions whose result size is an argument are capped: one `repeat('x', 1e9)` used to
/// allocate several GB outside any memory accounting.
#[test]
fn size_taking_functions_are_capped() {
    let s = Server::start();
    for sql in [
        "SELECT repeat('x', 1000000000)",
        "SELECT lpad('x', 1000000000)",
        "SELECT rpad('x', 1000000000, 'y')",
        "SELECT array_repeat(1, 1000000000)",
        "SELECT list_repeat('a', 1000000000)",
        "SELECT repeat(repeat('x', 1000000), 1000)",
    ] {
        let err = s.error(sql);
        assert!(err.contains("would exceed"), "{sql}: {err}");
    }
    let rows = s.rows("SELECT repeat('ab', 3), lpad('x', 4), array_repeat(1, 2)");
    assert_eq!(rows[0][0], "ababab");
    assert_eq!(rows[0][1], "   x");
    assert!(s.healthy());
}

#[test]
fn query_memory_is_bounded_by_the_pool() {
    let s = Server::start_with(&["--query-memory-mb", "2"]);
    // A hash join's build side cannot spill: with a 2 MiB pool it is refused, not grown.
    let err = s.error(
        "SELECT count(*) FROM generate_series(1, 2000000) a(x) \
         JOIN generate_series(1, 2000000) b(y) ON a.x = b.y",
    );
    assert!(err.contains("Resources exhausted"), "{err}");
    // Small queries still run, and so does the server.
    assert_eq!(
        s.rows("SELECT count(*) FROM generate_series(1, 1000) t(x)"),
        vec![vec![serde_json::json!(1000)]]
    );
    assert!(s.healthy());
}
