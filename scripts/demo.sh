#!/usr/bin/env bash
# The whole journey on the embedded default (a local directory, ./lakehouse):
# build and start `deltalite serve`, run an example dlt pipeline into it (append, replace,
# merge with a cursor), query the result over HTTP, print it, and stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

echo "== build the server (debug) and the dlt destination's environment (.venv-dlt)"
cargo build --quiet -p deltalite-cli
BIN="$CARGO_TARGET_DIR/debug/deltalite"
[ -x .venv-dlt/bin/python ] || python3 -m venv .venv-dlt
.venv-dlt/bin/pip install --quiet --disable-pip-version-check -r requirements-dlt.txt
.venv-dlt/bin/pip install --quiet --disable-pip-version-check --no-deps -e dlt_altertable

DATA="${DELTALITE_DATA:-$ROOT/lakehouse}"
LOGS="$(mktemp -d)"
"$BIN" serve --data "$DATA" --listen 127.0.0.1:0 --flight-listen 127.0.0.1:0 \
    --users demo:demo --catalogs lakehouse \
    >"$LOGS/server.out" 2>"$LOGS/server.log" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$LOGS"' EXIT
for _ in $(seq 1 200); do
    grep -q "listening on" "$LOGS/server.out" 2>/dev/null && break
    sleep 0.1
done
URL="$(sed -n 's/^listening on //p' "$LOGS/server.out")"
[ -n "$URL" ] || { cat "$LOGS/server.log"; echo "server did not start" >&2; exit 1; }
echo "== deltalite serve at $URL, data in $DATA"

echo "== dlt pipeline: append, replace, merge"
ALTERTABLE_URL="$URL" ALTERTABLE_USERNAME=demo ALTERTABLE_PASSWORD=demo \
    .venv-dlt/bin/python examples/dlt_journey.py

echo "== query over HTTP (NDJSON: metadata, columns, rows)"
curl -sS --fail-with-body -u demo:demo "$URL/query" \
    -d '{"statement": "SELECT table_schema, table_name FROM information_schema.tables ORDER BY 1, 2"}'
echo "== stopping the server"
