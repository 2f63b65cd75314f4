#!/usr/bin/env bash
# The Arrow Flight SQL endpoint against the real clients, unchanged: adbc-driver-flightsql
# (DB-API) and altertable-flightsql 0.4.1 (its public API) in tests/flight, then the tests
# altertable-flightsql ships in its sdist (downloaded at the pinned version, its sha256
# checked, unpacked inside the root; never copied into this repository) with
# tests/flight/conftest.py as their conftest, then dbt-altertable 0.2.13 on the project in
# tests/dbt (tests/dbt/run_dbt.py). The clients need CPython >= 3.12, so they run inside
# the Debian trixie root of scripts/lib/py313.sh (venv /opt/clients, pins from
# requirements-clients.txt + requirements-flight.txt; venv /opt/dbt, pins from
# requirements-dbt.txt); the server runs on the host and is reached over loopback. Needs
# root (debootstrap, mount, chroot).
# Run from anywhere: scripts/test-flight.sh [extra pytest args]
#   PY313_ROOT    where the root lives or is built (default /work/py313)
#   DELTALITE_BIN the server binary (default target/debug/deltalite, built if missing)
# Mounts that this script makes are undone on exit; mounts that were already there (another
# user of the root) are left alone.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export DELTALITE_BIN="${DELTALITE_BIN:-$CARGO_TARGET_DIR/debug/deltalite}"
PY313_ROOT="$(realpath -m "${PY313_ROOT:-/work/py313}")"
VENV=/opt/clients
DBT_VENV=/opt/dbt
SDIST_NAME=altertable-flightsql
SDIST_VERSION=0.4.1
SDIST_FILE=altertable_flightsql-0.4.1.tar.gz
SDIST_SHA256=077652f60417318a9a20fa9fd783f589c58dd5c0983fbb29f47557293d7e7bc9

[ -x "$DELTALITE_BIN" ] || cargo build -p deltalite-cli

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
.venv/bin/ruff check tests/flight tests/dbt
.venv/bin/ruff format --check tests/flight tests/dbt

# shellcheck source=lib/py313.sh
source scripts/lib/py313.sh

# Which of the root's mount points are not mounted yet: those are ours to undo.
ours=()
while read -r m; do
    mountpoint -q "$m" 2>/dev/null || ours+=("$m")
done < <(_py313_mounts "$PY313_ROOT")
# Made once the root exists (a fresh machine has none until py313_root builds it).
WORK=""
cleanup() {
    [ -z "$WORK" ] || rm -rf "$WORK"
    local m
    for m in "${ours[@]}"; do
        if mountpoint -q "$m" 2>/dev/null; then
            umount -R "$m" || umount -l "$m"
        fi
    done
}
trap cleanup EXIT

py313_root "$PY313_ROOT"
py313_venv "$PY313_ROOT" "$VENV" requirements-clients.txt
py313_venv "$PY313_ROOT" "$VENV" requirements-flight.txt
py313_venv "$PY313_ROOT" "$DBT_VENV" requirements-dbt.txt
WORK="$(mktemp -d "$PY313_ROOT/tmp/deltalite-flight-sdist-XXXXXX")"

# The sdist, at its pinned version and hash (kept in the root's cache between runs).
CACHE="$PY313_ROOT/var/cache/deltalite-sdists"
mkdir -p "$CACHE"
have_sdist() {
    [ -f "$CACHE/$SDIST_FILE" ] &&
        echo "$SDIST_SHA256  $CACHE/$SDIST_FILE" | sha256sum --check --status
}
if ! have_sdist; then
    rm -f "$CACHE/$SDIST_FILE"
    py313_run "$PY313_ROOT" "$VENV/bin/pip" download --quiet --disable-pip-version-check \
        --no-binary :all: --no-deps --dest "/var/cache/deltalite-sdists" \
        "$SDIST_NAME==$SDIST_VERSION"
fi
if ! have_sdist; then
    echo "$SDIST_FILE: sha256 is not $SDIST_SHA256; refusing to run its tests" >&2
    exit 1
fi
tar -xzf "$CACHE/$SDIST_FILE" -C "$WORK"
SDIST_DIR="$WORK/altertable_flightsql-$SDIST_VERSION"
# The fixtures the sdist's tests import (`from tests.conftest import ...`).
cp tests/flight/conftest.py "$SDIST_DIR/tests/conftest.py"
touch "$SDIST_DIR/tests/__init__.py"

python3 tests/flight/serve_and_run.py "$PY313_ROOT" "$VENV" "${SDIST_DIR#"$PY313_ROOT"}" "$DBT_VENV" "$@"
