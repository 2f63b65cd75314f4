#!/usr/bin/env bash
# Rough end-to-end timings of `deltalite serve`: CSV upload (create), append, upsert of 10%
# of the keys, NDJSON and Parquet reads of the whole table, and the server's peak RSS.
# Usage: bench/server/bench.sh [rows]   (default 1000000; set DELTALITE_BIN to a release
# build for meaningful numbers: cargo build --release -p deltalite-cli)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS="${1:-1000000}"
BIN="${DELTALITE_BIN:-}"
if [ -z "$BIN" ]; then
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
    cargo build --quiet --release -p deltalite-cli
    BIN="$CARGO_TARGET_DIR/release/deltalite"
fi
WORK="$(mktemp -d)"
"$BIN" serve --data "$WORK/lake" --listen 127.0.0.1:0 --users b:b --log warn >"$WORK/out" 2>"$WORK/err" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/out" 2>/dev/null && break; sleep 0.1; done
URL="$(sed -n 's/^listening on //p' "$WORK/out")"

python3 - "$ROWS" "$WORK" <<'PY'
import sys
rows, work = int(sys.argv[1]), sys.argv[2]
with open(f"{work}/base.csv", "w") as f:
    f.write("id,name,amount,updated\n")
    for i in range(rows):
        f.write(f"{i},name-{i % 1000},{i * 0.5},1\n")
with open(f"{work}/delta.csv", "w") as f:
    f.write("id,amount,updated\n")
    for i in range(0, rows, 10):
        f.write(f"{i},{i * 2.0},2\n")
PY

t() { # label, curl args...
    local label="$1"; shift
    local start end
    start=$(date +%s.%N)
    curl -sS --fail-with-body -u b:b "$@" >/dev/null
    end=$(date +%s.%N)
    printf '%-28s %8.2f s\n' "$label" "$(echo "$end - $start" | bc)"
}
Q="catalog=lakehouse&schema=main&table=t"
echo "rows: $ROWS ($(du -h "$WORK/base.csv" | cut -f1) CSV)"
t "upload create (CSV)" -H 'Content-Type: text/csv' --data-binary @"$WORK/base.csv" "$URL/upload?$Q&mode=create"
t "upload append (CSV)" -H 'Content-Type: text/csv' --data-binary @"$WORK/base.csv" "$URL/upload?$Q&mode=append"
t "upsert 10% keys (cursor)" -H 'Content-Type: text/csv' --data-binary @"$WORK/delta.csv" "$URL/upsert?$Q&primary_key=id&cursor_field=updated"
t "query NDJSON (all rows)" "$URL/query" -d '{"statement": "SELECT * FROM lakehouse.main.t"}'
t "query Parquet (all rows)" "$URL/query" -d '{"statement": "SELECT * FROM lakehouse.main.t", "format": "parquet"}'
t "aggregate" "$URL/query" -d '{"statement": "SELECT updated, count(*), sum(amount) FROM lakehouse.main.t GROUP BY updated"}'
echo "server peak RSS: $(grep VmHWM /proc/$PID/status | awk '{print $2/1024 " MiB"}')"
