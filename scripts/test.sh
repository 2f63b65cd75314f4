#!/usr/bin/env bash
# Everything CI runs, from a fresh clone: formatting, lints, and every test suite.
# Needs Rust (cargo), Python 3.11 and root (PostHog's suite runs on CPython 3.13 in a
# Debian chroot, scripts/lib/py313.sh; tmux comes from Debian); installs the rest
# (Python packages into .venv and .venv-dlt) and starts the services the tests need (a
# local S3 server).
#
# One `cargo test --workspace` builds everything with one feature set, so the server
# binary it produces is reused by the Python and dlt suites instead of rebuilding.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TERM_COLOR=never
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# CI builds each crate once: incremental caches only cost disk (1.5 GB for the tests).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== python tooling (.venv): S3 test server"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-s3.txt

echo "== docs: every file and symbol they name exists"
python3 scripts/check-docs.py
echo "== engine layering: no upward import, no import cycle"
python3 scripts/check-layers.py

echo "== rust: fmt, clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

echo "== tools the tests drive: tmux (the CLI's terminal test), curl (a TLS client), openssl (tests/clients' certificate)"
missing=()
for tool in tmux curl openssl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

echo "== local S3 server (moto) for the S3 tests"
# shellcheck source=lib/moto.sh
source scripts/lib/moto.sh
start_moto

echo "== rust: tests (engine, server against a real server process, S3)"
cargo test --workspace -- --test-threads 4

export DELTALITE_BIN="$CARGO_TARGET_DIR/debug/deltalite"
# server-sql: DuckDB oracle + interop (needs the wheel test-python builds); clients,
# dlt-differential and flight run the real PyPI clients (CPython 3.13 root).
for part in python server-sql console dlt clients dlt-differential flight; do
  if [ -x "scripts/test-$part.sh" ]; then
    echo "== $part"
    "scripts/test-$part.sh"
  fi
done
echo "== posthog: PostHog's deltalite 0.1.15 test suite, unchanged, against our wheel"
# The wheel scripts/test-python.sh just built.
DELTALITE_WHEEL="$(ls "$CARGO_TARGET_DIR"/deltalite-wheels/deltalite_lakehouse-*.whl)" scripts/test-posthog.sh
echo "== packages: the .deb installed, started and purged in a clean Debian root"
scripts/test-deb.sh
echo "== disk: what the build left in $CARGO_TARGET_DIR (the runner's disk is finite)"
du -sh "$CARGO_TARGET_DIR" 2>/dev/null || true
df -h "$CARGO_TARGET_DIR" 2>/dev/null | tail -1 || true
echo "== all suites passed"
