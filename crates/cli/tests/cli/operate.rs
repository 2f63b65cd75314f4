//! What an operator relies on, against a real `deltalite serve` process: TLS on both
//! listeners with a certificate reloaded on SIGHUP, request ids on every request and in
//! every log line, JSON logs, `RUST_LOG`, and the shutdown deadline.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;
use common::flight::{Flight, ok};
use serde_json::Value;

/// A CA and leaf certificates it signs for `localhost` and 127.0.0.1.
struct Pki {
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
}

/// One leaf: its PEM files on disk and its DER (what a client sees).
struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: Vec<u8>,
}

impl Pki {
    fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "deltalite test CA");
        let key = rcgen::KeyPair::generate().expect("ca key");
        let cert = params.self_signed(&key).expect("ca cert");
        Self {
            ca_pem: cert.pem(),
            ca: rcgen::Issuer::new(params, key),
        }
    }

    fn leaf(&self) -> Leaf {
        let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("params");
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.ca).expect("leaf cert");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

fn write_leaf(dir: &Path, leaf: &Leaf) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, &leaf.cert_pem).expect("cert");
    std::fs::write(&key, &leaf.key_pem).expect("key");
    (cert, key)
}

fn signal(server: &Server, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// A TLS connection to the HTTPS listener that trusts only `ca_pem`, holding one
/// keep-alive HTTP/1.1 connection.
struct TlsConn {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl TlsConn {
    fn open(addr: &str, ca_pem: &str) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("ca pem")).expect("root");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
        let tcp = TcpStream::connect(addr).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .expect("handshake");
        }
        Self { stream }
    }

    /// The DER of the certificate the server presented.
    fn peer(&self) -> Vec<u8> {
        self.stream.conn.peer_certificates().expect("certificates")[0].to_vec()
    }

    /// GET `path` on this connection; the status line and body.
    fn get(&mut self, path: &str) -> (String, String) {
        write!(
            self.stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n"
        )
        .expect("write");
        self.stream.flush().expect("flush");
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            self.stream.read_exact(&mut byte).expect("read head");
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).expect("head");
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().expect("length"))
            })
            .expect("content-length");
        let mut body = vec![0u8; length];
        self.stream.read_exact(&mut body).expect("read body");
        (
            head.lines().next().unwrap_or_default().to_string(),
            String::from_utf8(body).expect("body"),
        )
    }
}

fn host_port(base: &str) -> String {
    base.split("://").nth(1).expect("address").to_string()
}

/// Poll `f` until it is true, for up to 10 s.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tls_serves_both_listeners_and_a_sighup_rotates_the_certificate() {
    let pki = Pki::new();
    let certs = tempfile::tempdir().expect("tempdir");
    let first = pki.leaf();
    let (cert, key) = write_leaf(certs.path(), &first);
    let ca_file = certs.path().join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).expect("ca");
    let s = Server::start_with(&[
        "--tls-cert",
        cert.to_str().expect("path"),
        "--tls-key",
        key.to_str().expect("path"),
    ]);
    assert!(s.base.starts_with("https://127.0.0.1:"), "{}", s.base);
    let addr = host_port(&s.base);

    // reqwest (rustls) trusting only the test CA: the API works as over plain HTTP.
    let client = reqwest::blocking::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).expect("ca"))
        .build()
        .expect("client");
    let r = client
        .post(s.url("/query"))
        .basic_auth("alice", Some("secret"))
        .json(&serde_json::json!({"statement": "SELECT 40 + 2 AS answer"}))
        .send()
        .expect("https query");
    assert_eq!(r.status().as_u16(), 200);
    let body = r.text().expect("body");
    assert_eq!(body.lines().nth(2), Some("[42]"), "{body}");
    // Plain HTTP on the TLS port gets no answer a client could take for one.
    let plain = reqwest::blocking::get(format!("http://{addr}/livez"));
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");

    // curl, trusting the CA file.
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(&ca_file)
        .args(["-u", "alice:secret", "-H", "content-type: application/json"])
        .args(["-d", r#"{"statement":"SELECT 'tls' AS via"}"#])
        .arg(s.url("/query"))
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().nth(2),
        Some(r#"["tls"]"#)
    );

    // Flight SQL over TLS (gRPC, ALPN h2), the same certificate.
    let flight_url = s.flight.clone().expect("flight");
    assert!(flight_url.starts_with("https://"), "{flight_url}");
    let endpoint = tonic::transport::Channel::from_shared(flight_url)
        .expect("url")
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(&pki.ca_pem))
                .domain_name("localhost"),
        )
        .expect("tls config");
    let mut flight = Flight::connect_with(endpoint);
    flight
        .rt
        .block_on(flight.client.handshake("alice", "secret"))
        .expect("handshake");
    let fetched = ok(flight.query("SELECT 7 AS seven"));
    assert_eq!(fetched.rows(), 1);

    // An established connection, then a new certificate and SIGHUP.
    let mut before = TlsConn::open(&addr, &pki.ca_pem);
    assert_eq!(before.peer(), first.der);
    assert_eq!(before.get("/livez").0, "HTTP/1.1 200 OK");
    let second = pki.leaf();
    write_leaf(certs.path(), &second);
    signal(&s, "HUP");
    eventually("a new connection gets the new certificate", || {
        TlsConn::open(&addr, &pki.ca_pem).peer() == second.der
    });
    // The connection made before the reload still serves requests.
    assert_eq!(before.get("/livez").0, "HTTP/1.1 200 OK");
    assert!(
        s.log().contains("SIGHUP: TLS certificate reloaded"),
        "{}",
        s.log()
    );

    // A broken rotation (the key of another certificate) keeps the current certificate.
    let third = pki.leaf();
    std::fs::write(&cert, &third.cert_pem).expect("cert");
    signal(&s, "HUP");
    eventually("the failed reload is logged", || {
        s.log()
            .contains("TLS certificate not reloaded, the previous one stays")
    });
    assert_eq!(TlsConn::open(&addr, &pki.ca_pem).peer(), second.der);
    let metrics = client
        .get(s.url("/metrics"))
        .basic_auth("alice", Some("secret"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    assert!(
        metrics.contains(r#"deltalite_tls_reloads_total{outcome="ok"} 1"#)
            && metrics.contains(r#"deltalite_tls_reloads_total{outcome="failed"} 1"#),
        "{metrics}"
    );
    // Flight over a new connection gets the current certificate and still works.
    assert_eq!(ok(flight.query("SELECT 1 AS one")).rows(), 1);
}

#[test]
fn a_certificate_that_cannot_be_loaded_stops_the_server_with_its_reason() {
    let certs = tempfile::tempdir().expect("tempdir");
    let leaf = Pki::new().leaf();
    let (cert, _) = write_leaf(certs.path(), &leaf);
    let missing = certs.path().join("missing.pem");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_deltalite"))
            .args(["serve", "--listen", "127.0.0.1:0", "--flight-listen", ""])
            .args(["--users", "a:b", "--data"])
            .arg(certs.path().join("lake"))
            .args(args)
            .env_remove("DELTALITE_TLS_CERT")
            .env_remove("DELTALITE_TLS_KEY")
            .output()
            .expect("run")
    };
    let out = run(&[
        "--tls-cert",
        cert.to_str().expect("path"),
        "--tls-key",
        missing.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("tls: {}: ", missing.display())),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing listened: {:?}", out.stdout);

    // A key file holding a certificate only.
    let out = run(&[
        "--tls-cert",
        cert.to_str().expect("path"),
        "--tls-key",
        cert.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no PEM PRIVATE KEY section"), "{err}");

    // One of the two is a usage error.
    let out = run(&["--tls-cert", cert.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tls-key <TLS_KEY>"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The JSON log lines of `log` (every line must be one).
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn request_id_of(line: &Value) -> Option<&str> {
    line.pointer("/span/request_id").and_then(Value::as_str)
}

#[test]
fn every_request_has_an_id_that_the_response_and_each_json_log_line_carry() {
    let s = Server::start_with(&["--log-format", "json", "--log", "info"]);
    let r = s.post_as(
        ("alice", "secret"),
        "/query",
        "application/json",
        br#"{"statement":"SELECT 1 AS x"}"#.to_vec(),
        &[("x-request-id", "client-chose-this-7")],
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-request-id"], "client-chose-this-7");
    // Without one, the server makes one: a UUID.
    let r = s.post(
        "/query",
        "application/json",
        br#"{"statement":"SELECT nope"}"#.to_vec(),
    );
    let made = r.headers()["x-request-id"]
        .to_str()
        .expect("text")
        .to_string();
    assert!(uuid_like(&made), "{made}");
    // Refused requests have one too.
    let r = s.post_as(
        ("alice", "wrong"),
        "/query",
        "application/json",
        b"{}".to_vec(),
        &[],
    );
    assert_eq!(r.status().as_u16(), 401);
    assert!(uuid_like(
        r.headers()["x-request-id"].to_str().expect("text")
    ));

    // Flight: echoed in the response metadata, and generated when absent.
    let mut flight = Flight::connect(&s);
    flight
        .rt
        .block_on(flight.client.handshake("alice", "secret"))
        .expect("handshake");
    flight.client.set_header("x-request-id", "flight-call-9");
    assert_eq!(ok(flight.query("SELECT 2 AS y")).rows(), 1);

    let log = s.log();
    let lines = json_lines(&log);
    let request = |id: &str| {
        lines
            .iter()
            .find(|l| {
                l.pointer("/fields/message") == Some(&Value::from("request"))
                    && request_id_of(l) == Some(id)
            })
            .unwrap_or_else(|| panic!("no request line with id {id}: {log}"))
    };
    assert_eq!(request("client-chose-this-7")["fields"]["status"], 200);
    assert_eq!(request(&made)["fields"]["route"], "/query");
    let rpcs: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l.pointer("/fields/message") == Some(&Value::from("rpc"))
                && request_id_of(l) == Some("flight-call-9")
        })
        .collect();
    // GetFlightInfo and DoGet, each its own call under the id the client set.
    assert_eq!(rpcs.len(), 2, "{log}");
    assert_eq!(
        rpcs[0]["span"]["method"],
        "/arrow.flight.protocol.FlightService/GetFlightInfo"
    );
    // The handshake, sent without an id, got a generated one.
    assert!(
        lines.iter().any(|l| l.pointer("/span/method")
            == Some(&Value::from(
                "/arrow.flight.protocol.FlightService/Handshake"
            ))
            && request_id_of(l).is_some_and(uuid_like)),
        "{log}"
    );
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4
}

#[test]
fn rust_log_is_the_filter_when_no_log_flag_is_given() {
    // Only warnings: the per-request info lines are gone.
    let s = Server::start_env(&[], &[("RUST_LOG", "warn")]);
    assert_eq!(s.rows("SELECT 1 AS x"), vec![vec![Value::from(1)]]);
    let quiet = s.log();
    assert!(!quiet.contains("request"), "{quiet}");
    // --log wins over RUST_LOG.
    let s = Server::start_env(&["--log", "info"], &[("RUST_LOG", "warn")]);
    s.rows("SELECT 1 AS x");
    assert!(s.log().contains(" request "), "{}", s.log());
}

#[test]
fn shutdown_waits_for_a_stuck_request_only_until_the_deadline() {
    let s = Server::start_with(&["--shutdown-timeout", "2"]);
    // An upload whose body stops arriving: the body idle timeout (60 s) would hold the
    // drain far longer than the deadline.
    let mut stuck = TcpStream::connect(host_port(&s.base)).expect("connect");
    write!(
        stuck,
        "POST /upload?catalog=lakehouse&schema=s&table=t&mode=create&format=csv HTTP/1.1\r\n\
         Host: x\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\nContent-Type: text/csv\r\n\
         Content-Length: 100000\r\n\r\nid\n1\n"
    )
    .expect("write");
    stuck.flush().expect("flush");
    // Let the server take the request in (headers read, body being spooled).
    std::thread::sleep(Duration::from_millis(500));
    let mut s = s;
    let start = Instant::now();
    signal(&s, "TERM");
    let status = s.child.wait().expect("wait");
    let took = start.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(15),
        "stopped after {took:?}"
    );
    assert!(
        s.log()
            .contains("shutdown deadline passed: stopping with requests still in flight"),
        "{}",
        s.log()
    );
    // Nothing of the unfinished upload is left as a table.
    assert!(!s.data().join("lakehouse/s/t/_delta_log").exists());
}

fn hash_password(password: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deltalite"))
        .arg("hash-password")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("hash-password");
    writeln!(child.stdin.take().expect("stdin"), "{password}").expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let hash = String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_string();
    assert!(hash.starts_with("$argon2id$v=19$"), "{hash}");
    hash
}

fn status_as(s: &Server, user: (&str, &str), sql: &str) -> (u16, String) {
    let r = s.post_as(
        user,
        "/query",
        "application/json",
        serde_json::json!({ "statement": sql })
            .to_string()
            .into_bytes(),
        &[],
    );
    (r.status().as_u16(), r.text().expect("body"))
}

#[test]
fn a_config_file_brings_hashed_users_secret_files_and_storage_under_flags_and_env() {
    let moto = deltalite_testkit::moto::Moto::start("configured");
    let dir = tempfile::tempdir().expect("tempdir");
    let dave_password = dir.path().join("dave.secret");
    std::fs::write(&dave_password, "dave's, pass=word\n").expect("secret");
    let users_file = dir.path().join("users");
    std::fs::write(&users_file, "erin:e1\nfrank:f1\n").expect("users");
    let mut storage = String::from("[storage]\n");
    for (k, v) in moto.options() {
        storage.push_str(&format!("{k} = {}\n", serde_json::Value::from(v)));
    }
    let config = dir.path().join("deltalite.toml");
    std::fs::write(
        &config,
        format!(
            r#"
catalogs = ["lakehouse", "other"]
log_format = "json"
users_file = {users_file:?}

[[user]]
name = "carol"
password_hash = "{carol}"
catalogs = ["other"]

[[user]]
name = "dave"
password_file = {dave_password:?}

{storage}"#,
            carol = hash_password("carol's secret"),
        ),
    )
    .expect("config");
    let start = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["--config", config.to_str().expect("path")];
        args.extend_from_slice(extra);
        // The data root is the harness's flag; how to reach it, the file's `[storage]`.
        Server::start_full(
            tempfile::tempdir().expect("tempdir"),
            "s3://configured/lake",
            &args,
            env,
        )
    };
    let s = start(&[], &[]);
    s.rows("CREATE TABLE other.main.t AS SELECT 1 AS id");
    // carol (argon2, only `other`), dave (a password file whose text holds a comma and
    // an equals sign), erin (--users-file), alice (the harness's --users flag).
    assert_eq!(
        status_as(
            &s,
            ("carol", "carol's secret"),
            "SELECT id FROM other.main.t"
        )
        .0,
        200
    );
    let (status, body) = status_as(
        &s,
        ("carol", "carol's secret"),
        "SELECT 1 FROM lakehouse.information_schema.tables",
    );
    // A catalog outside the grants does not exist for the caller.
    assert_eq!(status, 200);
    assert_eq!(
        body.lines().nth(1),
        Some(r#"{"error":"Catalog Error: Catalog with name lakehouse does not exist!"}"#),
        "{body}"
    );
    assert_eq!(status_as(&s, ("carol", "wrong"), "SELECT 1").0, 401);
    assert_eq!(
        status_as(
            &s,
            ("dave", "dave's, pass=word"),
            "SELECT id FROM other.main.t"
        )
        .0,
        200
    );
    assert_eq!(status_as(&s, ("erin", "e1"), "SELECT 1").0, 200);
    assert_eq!(
        status_as(&s, ("alice", "secret"), "SELECT id FROM other.main.t").0,
        200
    );
    // log_format = "json" from the file.
    assert!(s.log().lines().all(|l| l.starts_with('{')), "{}", s.log());
    drop(s);

    // The environment wins over the file, a flag over the environment.
    let s = start(&[], &[("DELTALITE_LOG_FORMAT", "text")]);
    assert!(s.log().contains(" INFO "), "{}", s.log());
    assert!(!s.log().starts_with('{'), "{}", s.log());
    drop(s);
    let s = start(
        &["--log-format", "json"],
        &[("DELTALITE_LOG_FORMAT", "text")],
    );
    assert!(s.log().lines().all(|l| l.starts_with('{')), "{}", s.log());
}

#[test]
fn a_config_file_with_a_mistake_stops_the_server_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |toml: &str| {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, toml).expect("config");
        let out = Command::new(env!("CARGO_BIN_EXE_deltalite"))
            .args(["serve", "--listen", "127.0.0.1:0", "--flight-listen", ""])
            .arg("--config")
            .arg(&config)
            .arg("--data")
            .arg(dir.path().join("lake"))
            .env_remove("DELTALITE_USERS")
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(out.stdout.is_empty(), "nothing listened");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = run("users = \"a:b\"\nquery_memory_megabytes = 10\n");
    assert!(
        err.contains("unknown field: found `query_memory_megabytes`"),
        "{err}"
    );
    let err = run(
        "users = \"a:b\"\n[[user]]\nname = \"a\"\npassword_hash = \"$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$aGFzaA\"\n",
    );
    assert!(err.contains("user \"a\" is configured twice"), "{err}");
    let err = run("[[user]]\nname = \"a\"\npassword_hash = \"not a hash\"\n");
    assert!(err.contains("password hash of user \"a\""), "{err}");
    let err = run("[[user]]\nname = \"a\"\n");
    assert!(
        err.contains(
            "user \"a\" in the config file needs exactly one of password_hash and password_file"
        ),
        "{err}"
    );
    let err = run("");
    assert!(err.contains("no users configured"), "{err}");
    let err = run("users = \"a:b\"\ntls_cert = \"/x.pem\"\n");
    assert!(err.contains("tls_cert and tls_key go together"), "{err}");
    std::fs::remove_file(dir.path().join("bad.toml")).expect("rm");
    let out = Command::new(env!("CARGO_BIN_EXE_deltalite"))
        .args(["serve", "--config"])
        .arg(dir.path().join("bad.toml"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml: not found"));
}
