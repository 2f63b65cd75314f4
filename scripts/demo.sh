#!/usr/bin/env bash
# The main job end to end on the embedded default (a local directory): create a Delta
# table, append, upsert with a cursor, print the stats and the rows.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet -p deltalite --example upsert_demo -- ./lakehouse/demo
