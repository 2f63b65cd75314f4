#!/usr/bin/env bash
# The web console (crates/server/console) in headless Chromium against a real server
# (tests/console): Debian's chromium and chromium-driver, Selenium from
# requirements-console.txt in .venv. Also checks that the vendored CodeMirror and
# Chart.js files are exactly the pinned npm packages' (scripts/vendor-console.sh).
# Screenshots of every step: target/console-screenshots (or $CONSOLE_ARTIFACTS).
# Run from anywhere: scripts/test-console.sh [extra pytest args]
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export DELTALITE_BIN="${DELTALITE_BIN:-$CARGO_TARGET_DIR/debug/deltalite}"

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt -r requirements-console.txt
scripts/vendor-console.sh --check
[ -x "$DELTALITE_BIN" ] || cargo build -p deltalite-cli

.venv/bin/ruff check tests/console harness
.venv/bin/ruff format --check tests/console harness
cd tests/console
../../.venv/bin/python -m pytest -q -p no:cacheprovider . "$@"
