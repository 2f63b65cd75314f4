#!/usr/bin/env bash
# The real PyPI client altertable-lakehouse 0.5.1 (and its ibis backend) end to end against
# a real `deltalite serve` (tests/clients). The client needs CPython >= 3.12, so pytest runs
# inside the Debian trixie root of scripts/lib/py313.sh (venv /opt/clients, pins from
# requirements-clients.txt + requirements-clients-ibis.txt); the server runs on the host and
# is reached over loopback. Needs root (debootstrap, mount, chroot).
# Run from anywhere: scripts/test-clients.sh [extra pytest args]
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

[ -x "$DELTALITE_BIN" ] || cargo build -p deltalite-cli

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
.venv/bin/ruff check tests/clients
.venv/bin/ruff format --check tests/clients

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
py313_venv "$PY313_ROOT" "$VENV" requirements-clients.txt
py313_venv "$PY313_ROOT" "$VENV" requirements-clients-ibis.txt

python3 tests/clients/serve_and_run.py "$PY313_ROOT" "$VENV" "$@"
