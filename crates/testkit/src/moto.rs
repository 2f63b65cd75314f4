//! [`Moto`]: a real S3-compatible server (moto's standalone `moto_server`) on a free
//! loopback port with one bucket, stopped when dropped. moto answers `412` to a losing
//! conditional PUT, so delta-rs commit races are real against it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `moto_server` with one bucket.
pub struct Moto {
    child: Child,
    /// Its loopback port.
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `$MOTO_SERVER`, else the repository's `.venv/bin/moto_server` (scripts/test.sh
/// installs it), else `moto_server` on the PATH.
fn moto_binary() -> String {
    if let Ok(bin) = std::env::var("MOTO_SERVER") {
        return bin;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/moto_server");
    if std::path::Path::new(venv).exists() {
        return venv.to_string();
    }
    "moto_server".to_string()
}

fn http(port: u16, request: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    if s.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

impl Moto {
    /// Start a server and create `bucket` in it; panics when moto is missing or does not
    /// come up within 30 s.
    pub fn start(bucket: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new(moto_binary())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server must be installed (scripts/test.sh installs it into .venv; or set MOTO_SERVER)");
        let moto = Moto { child, port };
        // The port can accept connections before moto answers them (an empty reply was
        // seen once in a full test run), so retry the bucket creation itself.
        let started = Instant::now();
        loop {
            let reply = http(
                port,
                &format!(
                    "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                ),
            );
            if reply.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "moto_server did not start or could not create the bucket: {reply:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// The keys of `bucket` under `prefix` (the first 1000), sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let reply = http(
            self.port,
            &format!(
                "GET /{bucket}?list-type=2&prefix={prefix} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            ),
        );
        let mut keys: Vec<String> = reply
            .split("<Key>")
            .skip(1)
            .filter_map(|part| part.split("</Key>").next())
            .map(str::to_string)
            .collect();
        keys.sort();
        keys
    }

    /// The object-store options that reach it.
    pub fn options(&self) -> HashMap<String, String> {
        HashMap::from([
            (
                "AWS_ENDPOINT_URL".to_string(),
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("AWS_ALLOW_HTTP".to_string(), "true".to_string()),
            ("AWS_ACCESS_KEY_ID".to_string(), "test".to_string()),
            ("AWS_SECRET_ACCESS_KEY".to_string(), "test".to_string()),
            ("AWS_REGION".to_string(), "us-east-1".to_string()),
        ])
    }
}
