#!/usr/bin/env bash
# Quickstart: run `deltalite serve` on a temporary directory, upload a CSV, upsert a
# change, query the result with curl, then stop the server.
# Run from the repository root: examples/quickstart.sh
set -euo pipefail

cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
cargo build --quiet -p deltalite-cli
BIN="$CARGO_TARGET_DIR/debug/deltalite"

DATA="$(mktemp -d)"
OUT="$DATA/server.out"
"$BIN" serve --data "$DATA/lake" --listen 127.0.0.1:0 --flight-listen 127.0.0.1:0 \
    --users demo:demo-pw \
    --catalogs lakehouse >"$OUT" 2>"$DATA/server.log" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$DATA"' EXIT

# The server prints `listening on http://ADDR` once it accepts connections.
for _ in $(seq 1 100); do
    grep -q "listening on" "$OUT" 2>/dev/null && break
    sleep 0.1
done
URL="$(sed -n 's/^listening on //p' "$OUT")"
echo "server: $URL (data in $DATA/lake)"
AUTH=(-u demo:demo-pw --fail-with-body -sS)

echo; echo "== upload a CSV (creates lakehouse.shop.customers)"
printf 'id,name,city,updated\n1,Ann,Paris,1\n2,Bob,Rome,1\n3,Cy,Oslo,1\n' |
    curl "${AUTH[@]}" -H 'Content-Type: text/csv' --data-binary @- \
        "$URL/upload?catalog=lakehouse&schema=shop&table=customers&mode=create"
echo

echo; echo "== upsert id,city,updated only: Bob moves (newer cursor), a stale update to Ann loses,"
echo "   id 4 is inserted; columns the file omits keep their stored values"
printf 'id,city,updated\n2,Berlin,2\n1,Nowhere,0\n4,Lima,1\n' |
    curl "${AUTH[@]}" -H 'Content-Type: text/csv' --data-binary @- \
        "$URL/upsert?catalog=lakehouse&schema=shop&table=customers&primary_key=id&cursor_field=updated"
echo

echo; echo "== query (NDJSON: metadata line, columns line, one row per line)"
curl "${AUTH[@]}" "$URL/query" -d '{"statement": "SELECT id, name, city, updated FROM \"lakehouse\".\"shop\".\"customers\" ORDER BY id"}'

echo; echo "== the same as CSV"
curl "${AUTH[@]}" "$URL/query" -d '{"statement": "SELECT city, count(*) AS n FROM lakehouse.shop.customers GROUP BY city ORDER BY city", "format": "csv"}'
