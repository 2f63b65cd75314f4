#!/usr/bin/env bash
# PostHog's deltalite 0.1.15 test suite, run unchanged against our wheel: the judge of
# "drop-in for deltalite 0.1.15". The suite ships in PostHog's sdist on PyPI; it is
# downloaded at a pinned version, its sha256 checked before anything in it is used, and
# copied to a temporary directory for the run (never into this repository).
#
#   scripts/test-posthog.sh [pytest args]       from the repository root
#
# Needs root (a Debian trixie chroot with CPython 3.13: the suite and PostHog's package
# want >= 3.12, see scripts/lib/py313.sh) and the package index. Environment:
#   DELTALITE_WHEEL   a built wheel to test (default: build one, debug, as test-python.sh)
#   PY313_ROOT        the chroot (default /work/py313, the one the other client suites
#                     use; built once). Mounts this script makes are undone on exit.
# Prints the pass/fail/skip counts and fails unless the failures are exactly the
# deliberate differences listed in scripts/lib/posthog_report.py and python/README.md.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

SDIST_VERSION=0.1.15
SDIST_URL="https://files.pythonhosted.org/packages/ea/be/6698a63b99c3e53fcca8de3d7a1bd32fcd1f0564827b845df98ea04fd147/deltalite-$SDIST_VERSION.tar.gz"
SDIST_SHA256=a1c3050a4be918de98450a2d34893ab664bce6aa2be8dd9c5f05c82df53fb55a
VENV=/opt/dl0115
WORK="$CARGO_TARGET_DIR/posthog-suite"
mkdir -p "$WORK"

echo "== PostHog deltalite $SDIST_VERSION sdist (sha256 checked)"
SDIST="$WORK/deltalite-$SDIST_VERSION.tar.gz"
if [ ! -f "$SDIST" ] || ! echo "$SDIST_SHA256  $SDIST" | sha256sum --check --status; then
    rm -f "$SDIST"
    curl -fsSL --retry 3 -o "$SDIST.part" "$SDIST_URL"
    mv "$SDIST.part" "$SDIST"
fi
echo "$SDIST_SHA256  $SDIST" | sha256sum --check --quiet

echo "== our wheel"
if [ -z "${DELTALITE_WHEEL:-}" ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
    rm -rf "$WORK/wheels"
    # Debug build, as scripts/test-python.sh: CI time matters more than speed here.
    (cd python && "$ROOT/.venv/bin/maturin" build --quiet --interpreter "$ROOT/.venv/bin/python" \
        --out "$WORK/wheels")
    DELTALITE_WHEEL="$(ls "$WORK"/wheels/deltalite_lakehouse-*.whl)"
fi
DELTALITE_WHEEL="$(realpath "$DELTALITE_WHEEL")"
case "$DELTALITE_WHEEL" in
    "$ROOT"/*) ;;
    *) echo "DELTALITE_WHEEL must be under $ROOT (shared with the chroot)" >&2; exit 2 ;;
esac

echo "== CPython 3.13 root and the suite's pinned dependencies"
export PY313_SHARE="$ROOT"
# shellcheck source=lib/py313.sh
source scripts/lib/py313.sh
PY313_DIR="$(realpath -m "${PY313_ROOT:-/work/py313}")"
# Which of the root's mount points are not mounted yet: those are ours to undo (a bind
# of /dev or of the repository left behind would be deleted through by the next rm -rf).
ours=()
while read -r m; do
    mountpoint -q "$m" 2>/dev/null || ours+=("$m")
done < <(_py313_mounts "$PY313_DIR")
RUN=""
cleanup() {
    local m
    [ -z "$RUN" ] || rm -rf "$RUN"
    for m in "${ours[@]}"; do
        if mountpoint -q "$m" 2>/dev/null; then
            umount -R "$m" || umount -l "$m"
        fi
    done
}
trap cleanup EXIT
py313_root "$PY313_DIR"
py313_venv "$PY313_DIR" "$VENV" requirements-posthog.txt
py313_run "$PY313_DIR" "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    --no-deps --force-reinstall "$DELTALITE_WHEEL"

# The suite, copied out of the sdist into a fresh directory inside the root (its tests
# import their siblings harness/, bench/ and deltalite_planner.py; no Rust is needed).
RUN="$(mktemp -d "$PY313_DIR/tmp/posthog-suite.XXXXXX")"
tar -xzf "$SDIST" -C "$RUN" "deltalite-$SDIST_VERSION/deltalite/python"
SUITE="/tmp/$(basename "$RUN")/deltalite-$SDIST_VERSION/deltalite/python"

# DuckDB's delta extension: `INSTALL delta` finds it already in a private HOME, from the
# pinned duckdb-ext-delta package (DuckDB checks its signature when loading it). Where it
# does not load, only the tests that read through it are skipped, with that reason.
HOME_DIR="/tmp/$(basename "$RUN")/home"
PACKAGE="$(py313_run "$PY313_DIR" "$VENV/bin/python" -c 'import duckdb_ext; print(list(duckdb_ext.__path__)[0])')"
EXT="$PACKAGE/extensions/v1.4.4/linux_amd64/delta.duckdb_extension"
mkdir -p "$PY313_DIR$HOME_DIR/.duckdb/extensions/v1.4.4/linux_amd64"
cp "$PY313_DIR$EXT" "$PY313_DIR$HOME_DIR/.duckdb/extensions/v1.4.4/linux_amd64/" 2>/dev/null || true
PLUGIN=()
if ! py313_run "$PY313_DIR" env HOME="$HOME_DIR" "$VENV/bin/python" -c \
    'import duckdb; duckdb.connect().execute("INSTALL delta; LOAD delta;")' >/dev/null 2>&1; then
    echo "DuckDB's delta extension does not load here: skipping the tests that read through it"
    PLUGIN=(-p posthog_duckdb_skip)
fi

echo "== the suite (unchanged) against deltalite from $(basename "$DELTALITE_WHEEL")"
JUNIT="/tmp/$(basename "$RUN")/junit.xml"
started=$(date +%s)
# From the suite's own directory (its pytest.ini), so nothing of this repository shadows
# the installed package; a clean environment (unset DELTALITE_* knobs) but for HOME.
# shellcheck disable=SC2016 # $0/$@ expand in the inner shell
py313_run "$PY313_DIR" env HOME="$HOME_DIR" PYTHONPATH="$ROOT/scripts/lib" \
    sh -c 'cd "$0" && exec "$@"' "$SUITE" \
    "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rfEs "${PLUGIN[@]}" \
    --junitxml="$JUNIT" "$@" tests || true
echo "suite wall time: $(($(date +%s) - started)) s"
cp "$PY313_DIR$JUNIT" "$WORK/junit.xml"
python3 scripts/lib/posthog_report.py "$WORK/junit.xml"
