#!/usr/bin/env bash
# Everything CI runs, from a fresh clone: formatting, lints, and every test suite.
# Needs Rust (cargo) and Python 3.11; installs the rest (Python packages into .venv and
# .venv-dlt) and starts the services the tests need (a local S3 server).
#
# One `cargo test --workspace` builds everything with one feature set, so the server
# binary it produces is reused by the Python and dlt suites instead of rebuilding.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TERM_COLOR=never
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

echo "== python tooling (.venv): S3 test server"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-s3.txt

echo "== rust: fmt, clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

echo "== local S3 server (moto) for the S3 tests"
PORT="$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
.venv/bin/moto_server -H 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
MOTO_PID=$!
trap 'kill "$MOTO_PID" 2>/dev/null || true' EXIT
export DELTALITE_TEST_S3_ENDPOINT="http://127.0.0.1:$PORT"
.venv/bin/python - <<PY
import time, boto3
s3 = boto3.client("s3", endpoint_url="$DELTALITE_TEST_S3_ENDPOINT", aws_access_key_id="test",
                  aws_secret_access_key="test", region_name="us-east-1")
for _ in range(100):
    try:
        s3.create_bucket(Bucket="lake")
        break
    except Exception:
        time.sleep(0.1)
PY

echo "== rust: tests (engine, server against a real server process, S3)"
cargo test --workspace -- --test-threads 4

export DELTALITE_BIN="$CARGO_TARGET_DIR/debug/deltalite"
for part in python dlt; do
  if [ -x "scripts/test-$part.sh" ]; then
    echo "== $part"
    "scripts/test-$part.sh"
  fi
done
echo "== all suites passed"
