#!/usr/bin/env bash
# Lint and test the lakehouse HTTP server (crates/server) and the `deltalite` CLI
# (crates/cli). The integration tests spawn the real `deltalite serve` binary on an
# ephemeral loopback port. When .venv has moto (requirements-s3.txt, installed by
# scripts/test.sh), the S3 data-root test runs against a local moto server too.
# Run from anywhere: scripts/test-server.sh [extra test args]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

cargo fmt -p deltalite-server -p deltalite-cli -- --check
cargo clippy -p deltalite-server -p deltalite-cli --all-targets -- -D warnings

if [ -z "${DELTALITE_TEST_S3_ENDPOINT:-}" ] && [ -x .venv/bin/moto_server ]; then
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
fi

# Each integration test runs its own server process; a few at a time is plenty.
cargo test -p deltalite-server -p deltalite-cli -- --test-threads 4 "$@"
