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
    # shellcheck source=lib/moto.sh
    source scripts/lib/moto.sh
    start_moto
fi

# Each integration test runs its own server process; a few at a time is plenty.
cargo test -p deltalite-server -p deltalite-cli -- --test-threads 4 "$@"
