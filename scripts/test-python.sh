#!/usr/bin/env bash
# Build the deltalite Python wheel (debug, abi3) and run its tests and lint.
# Run from the repository root: scripts/test-python.sh [extra pytest args]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
# The workspace target dir by default, so that CI reuses what `cargo test` compiled.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
PY="$ROOT/.venv/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
# Azurite, for the Azure tests (harness/azurite.py starts it).
# shellcheck source=lib/emulators.sh
source scripts/lib/emulators.sh
install_emulators

WHEELS="$CARGO_TARGET_DIR/deltalite-wheels"
rm -rf "$WHEELS"
# Debug build: CI time matters more than speed here; the bench builds --release.
(cd python && "$ROOT/.venv/bin/maturin" build --interpreter "$PY" --out "$WHEELS")
"$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEELS"/deltalite_lakehouse-*.whl

"$ROOT/.venv/bin/ruff" check python bench/python bench/server correctness/stress correctness/hostile correctness/soak harness scripts/lib
"$ROOT/.venv/bin/ruff" format --check python bench/python bench/server correctness/stress correctness/hostile correctness/soak harness scripts/lib

# Run from python/tests so that the installed wheel (not the source tree) is imported.
cd python/tests
"$PY" -m pytest -q -p no:cacheprovider "$@" .
