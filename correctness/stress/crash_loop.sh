#!/usr/bin/env bash
# The SIGKILL loop at length: the engine's crash test (crates/deltalite/tests/engine/crash.rs)
# with many iterations. Each iteration starts a writer process that upserts, appends,
# overwrites, compacts, checkpoints and vacuums in a loop, kills it (SIGKILL) after a random 0.2-1.5 s, then checks that the
# table opens at a committed version holding exactly that version's content (replayed
# from the log) and that vacuum removes the orphans and never a live file. CI runs the
# same test with 6 iterations.
# Usage: correctness/stress/crash_loop.sh [iterations]   (default 300)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
export DELTALITE_CRASH_ITERATIONS="${1:-300}"
# Run a private copy of the test binary: the children re-execute it, and a rebuild of the
# workspace meanwhile must not swap it under them.
built="$(cargo test -p deltalite --test engine --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$built" "$work/crash"
start=$(date +%s)
"$work/crash" --nocapture --exact crash::crashes_leave_a_committed_version 2>&1 \
    | grep -E -A3 "kills survived|test result|panicked"
echo "iterations: $DELTALITE_CRASH_ITERATIONS, wall: $(( $(date +%s) - start )) s"
