#!/usr/bin/env bash
# Lint and test the lakehouse HTTP server (crates/server) and the `deltalite` CLI
# (crates/cli). The integration tests spawn the real `deltalite serve` binary on an
# ephemeral loopback port. Run from anywhere: scripts/test-server.sh [extra test args]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

cargo fmt -p deltalite-server -p deltalite-cli -- --check
cargo clippy -p deltalite-server -p deltalite-cli --all-targets -- -D warnings
# Each integration test runs its own server process; a few at a time is plenty.
cargo test -p deltalite-server -p deltalite-cli -- --test-threads 4 "$@"
