#!/usr/bin/env bash
# Everything CI runs, from a fresh clone: formatting, lints, and every test suite.
# Needs Rust (cargo) and Python 3.11; installs the rest (Python packages into .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

echo "== python tooling (.venv): S3 test server"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-s3.txt

echo "== rust: fmt, clippy, tests"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The server's integration tests run from scripts/test-server.sh (with an S3 server).
cargo test --workspace --exclude deltalite-server --exclude deltalite-cli

for part in server python dlt; do
  if [ -x "scripts/test-$part.sh" ]; then
    echo "== $part"
    "scripts/test-$part.sh"
  fi
done
