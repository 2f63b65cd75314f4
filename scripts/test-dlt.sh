#!/usr/bin/env bash
# Lint and test the dlt destination (dlt_altertable) end to end against a real
# `deltalite serve` process. Run from the repository root: scripts/test-dlt.sh [pytest args]
# Uses $DELTALITE_BIN when set, else builds target/debug/deltalite with cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"

if [ ! -x .venv-dlt/bin/python ]; then
    python3 -m venv .venv-dlt
fi
PY="$ROOT/.venv-dlt/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check -r requirements-dlt.txt
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps -e dlt_altertable

if [ -z "${DELTALITE_BIN:-}" ]; then
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
    cargo build -p deltalite-cli
    export DELTALITE_BIN="$CARGO_TARGET_DIR/debug/deltalite"
fi

"$ROOT/.venv-dlt/bin/ruff" check dlt_altertable examples/dlt_journey.py bench/dlt_bench.py bench/dlt_merge_deletes.py
"$ROOT/.venv-dlt/bin/ruff" format --check dlt_altertable examples/dlt_journey.py bench/dlt_bench.py bench/dlt_merge_deletes.py

"$PY" -m pytest -q -p no:cacheprovider dlt_altertable/tests "$@"
