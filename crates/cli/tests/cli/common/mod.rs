//! A real `deltalite serve` process on an ephemeral loopback port, and a small client.

#![allow(dead_code)]

pub mod flight;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde_json::Value;

pub struct Server {
    pub child: Child,
    pub base: String,
    /// The Flight SQL endpoint, `http://HOST:PORT` (what tonic's channel takes); `None`
    /// when the test turned it off.
    pub flight: Option<String>,
    pub dir: tempfile::TempDir,
    pub client: Client,
    /// Holds the server's stderr (`Server::log`), apart from `dir`, whose contents tests
    /// check.
    logs: tempfile::TempDir,
}

impl Server {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Users: alice (all catalogs), bob (only `other`).
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("lake");
        Self::start_on(dir, data.to_string_lossy().as_ref(), extra)
    }

    /// Like [`Self::start_with`], with extra environment variables for the process.
    pub fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("lake");
        Self::start_full(dir, data.to_string_lossy().as_ref(), extra, env)
    }

    /// Start on an explicit data root (a local path or an object-store URI).
    pub fn start_on(dir: tempfile::TempDir, data: &str, extra: &[&str]) -> Self {
        Self::start_full(dir, data, extra, &[])
    }

    /// Start on an explicit data root with extra environment variables.
    pub fn start_full(
        dir: tempfile::TempDir,
        data: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_deltalite"));
        cmd.envs(env.iter().copied());
        Self::spawn(cmd, dir, data, extra)
    }

    /// Like [`Self::start`], the process unable to write a file past `kib` KiB (a full
    /// disk, as the kernel reports it to a writer: `EFBIG`, with `SIGXFSZ` ignored).
    pub fn start_with_file_limit(kib: u64, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("lake");
        let mut cmd = Command::new("bash");
        cmd.args([
            "-c",
            &format!("trap '' XFSZ; ulimit -f {kib}; exec \"$0\" \"$@\""),
            env!("CARGO_BIN_EXE_deltalite"),
        ]);
        Self::spawn(cmd, dir, data.to_string_lossy().as_ref(), extra)
    }

    /// Start `cmd` (the binary, or a shell that execs it) as `deltalite serve`.
    fn spawn(mut cmd: Command, dir: tempfile::TempDir, data: &str, extra: &[&str]) -> Self {
        let logs = tempfile::tempdir().expect("log dir");
        cmd.args(["serve", "--listen", "127.0.0.1:0"]);
        // An ephemeral Flight port too (the default, 15002, is one per machine), unless
        // the test chooses.
        if !extra.iter().any(|a| a.starts_with("--flight-listen")) {
            cmd.args(["--flight-listen", "127.0.0.1:0"]);
        }
        // Background maintenance off unless the test asks for it: its commits would land
        // between a test's writes and its checks of versions and files.
        if !extra.iter().any(|a| a.starts_with("--maintenance")) {
            cmd.args(["--maintenance", "off"]);
        }
        cmd.arg("--data")
            .arg(data)
            .args([
                "--users",
                "alice:secret,bob:pw",
                "--grants",
                "bob=other",
                "--catalogs",
                "lakehouse,other",
            ])
            .args(extra)
            .env_remove("DELTALITE_USERS")
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("DELTALITE_TEST_LOG").is_some() {
                Stdio::inherit()
            } else {
                // Tests that check what the server logs read it (`Server::log`).
                Stdio::from(std::fs::File::create(logs.path().join("server.log")).expect("log"))
            });
        let mut child = cmd.spawn().expect("spawn deltalite serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read listening line");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        // The second line, written with the first.
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read flight line");
        let flight = match line.trim() {
            "flight off" => None,
            l => Some(
                l.strip_prefix("flight listening on grpc://")
                    .map(|addr| format!("http://{addr}"))
                    .or_else(|| {
                        l.strip_prefix("flight listening on grpc+tls://")
                            .map(|addr| format!("https://{addr}"))
                    })
                    .unwrap_or_else(|| panic!("unexpected second line {line:?}")),
            ),
        };
        let client = Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client");
        Self {
            child,
            base,
            flight,
            dir,
            client,
            logs,
        }
    }

    /// What the server wrote to stderr so far (empty with `DELTALITE_TEST_LOG`, which
    /// sends it to the test's stderr instead).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("server.log")).unwrap_or_default()
    }

    pub fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("lake")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn post_as(
        &self,
        user: (&str, &str),
        path: &str,
        content_type: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Response {
        let mut req = self
            .client
            .post(self.url(path))
            .basic_auth(user.0, Some(user.1))
            .header("content-type", content_type)
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().expect("request")
    }

    pub fn post(&self, path: &str, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        self.post_as(("alice", "secret"), path, content_type, body.into(), &[])
    }

    /// POST /upload and return (status, body).
    pub fn upload(
        &self,
        query: &str,
        content_type: &str,
        body: impl Into<Vec<u8>>,
    ) -> (u16, String) {
        let r = self.post(&format!("/upload?{query}"), content_type, body);
        let status = r.status().as_u16();
        (status, r.text().unwrap_or_default())
    }

    pub fn query_json_as(&self, user: (&str, &str), body: Value) -> Vec<Value> {
        let r = self.post_as(
            user,
            "/query",
            "application/json",
            body.to_string().into_bytes(),
            &[],
        );
        assert_eq!(r.status().as_u16(), 200);
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or("").to_string())
            .unwrap_or_default();
        assert!(ct.starts_with("application/x-ndjson"), "content-type {ct}");
        let text = r.text().expect("body");
        assert!(
            text.ends_with('\n'),
            "every line ends with a newline: {text:?}"
        );
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
            .collect()
    }

    /// Run SQL; returns all NDJSON lines.
    pub fn query(&self, sql: &str) -> Vec<Value> {
        self.query_json_as(("alice", "secret"), serde_json::json!({ "statement": sql }))
    }

    /// Run SQL that must succeed; returns the rows.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Value>> {
        let lines = self.query(sql);
        for l in &lines {
            assert!(l.get("error").is_none(), "{sql}: {l}");
        }
        lines[2..]
            .iter()
            .map(|l| l.as_array().expect("row array").clone())
            .collect()
    }

    /// Run SQL that must fail; returns the error message.
    pub fn error(&self, sql: &str) -> String {
        let lines = self.query(sql);
        lines
            .iter()
            .find_map(|l| l.get("error").and_then(|e| e.as_str()).map(String::from))
            .unwrap_or_else(|| panic!("{sql}: expected an error, got {lines:?}"))
    }

    pub fn healthy(&self) -> bool {
        self.client
            .get(self.url("/healthz"))
            .basic_auth("alice", Some("secret"))
            .send()
            .map(|r| r.status().as_u16() == 200)
            .unwrap_or(false)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn parquet_bytes(batch: &arrow::record_batch::RecordBatch) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
    buf
}

pub fn read_parquet(bytes: Vec<u8>) -> Vec<arrow::record_batch::RecordBatch> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes),
    )
    .expect("parquet")
    .build()
    .expect("reader");
    reader.map(|b| b.expect("batch")).collect()
}
