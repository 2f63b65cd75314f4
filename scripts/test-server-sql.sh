#!/usr/bin/env bash
# The server's Python suites against a real `deltalite serve` process (tests/server):
# the DuckDB oracle for SQL writes (Hypothesis), and the interop test reading what every
# write path stores with delta-rs, polars and DuckDB. Uses .venv (requirements-dev.txt and
# the deltalite wheel that scripts/test-python.sh installs, for compaction).
# Run from anywhere: scripts/test-server-sql.sh [extra pytest args]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export DELTALITE_BIN="${DELTALITE_BIN:-$CARGO_TARGET_DIR/debug/deltalite}"
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
# Azurite, for the Azure tests (harness/azurite.py starts it).
# shellcheck source=lib/emulators.sh
source scripts/lib/emulators.sh
install_emulators
[ -x "$DELTALITE_BIN" ] || cargo build -p deltalite-cli

.venv/bin/ruff check tests/server bench/server
.venv/bin/ruff format --check tests/server bench/server
.venv/bin/python -m pytest -q -p no:cacheprovider tests/server "$@"
