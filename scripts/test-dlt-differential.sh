#!/usr/bin/env bash
# Differential test of the dlt destination: one dlt source (tests/dlt_differential), two
# loads, through our dlt_altertable (host, .venv-dlt, CPython 3.11) and through the real
# PyPI dlt-altertable==0.2.2 (unpatched, CPython 3.13 root of scripts/lib/py313.sh, venv
# /opt/clients, pins from requirements-clients.txt) into one `deltalite serve`, then every
# resulting table compared. pytest runs on the host and starts the server; the real side
# runs through py313_run (the repository is bind-mounted at the same path, loopback is
# shared). Needs root (debootstrap, mount, chroot).
# Run from anywhere: scripts/test-dlt-differential.sh [extra pytest args]
#   PY313_ROOT      where the root lives or is built (default /work/py313)
#   DELTALITE_BIN   the server binary (default: cargo build, target/debug/deltalite)
#   DIFF_CONCURRENT=1  load both sides at the same time (the server does not survive that
#                   yet: dlt_altertable/tests/test_server_contract.py)
# Mounts that this script makes are undone on exit; mounts that were already there (another
# user of the root) are left alone.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PY313_ROOT="$(realpath -m "${PY313_ROOT:-/work/py313}")"
export PY313_ROOT
VENV=/opt/clients

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

"$ROOT/.venv-dlt/bin/ruff" check tests/dlt_differential
"$ROOT/.venv-dlt/bin/ruff" format --check tests/dlt_differential

# shellcheck source=lib/py313.sh
source scripts/lib/py313.sh

# Which of the root's mount points are not mounted yet: those are ours to undo.
ours=()
while read -r m; do
    mountpoint -q "$m" 2>/dev/null || ours+=("$m")
done < <(_py313_mounts "$PY313_ROOT")
cleanup() {
    local m
    for m in "${ours[@]}"; do
        if mountpoint -q "$m" 2>/dev/null; then
            umount -R "$m" || umount -l "$m"
        fi
    done
}
trap cleanup EXIT

py313_root "$PY313_ROOT"
# the real package, exactly as pinned (never ours: both are imported as dlt_altertable)
py313_venv "$PY313_ROOT" "$VENV" requirements-clients.txt

export DLT_REAL_PYTHON="$VENV/bin/python"
export DLT_OURS_PYTHON="$PY"
"$PY" -m pytest -q -p no:cacheprovider -rfEx tests/dlt_differential "$@"
