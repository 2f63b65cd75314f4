#!/bin/bash
# `deltalite serve` under heaptrack, for soak.py's --bin. exec'd, so the pid soak.py
# watches (RSS, gdb) is the server's. Binary: $DELTALITE_BIN; output: $HEAPTRACK_DIR.
# heaptrack slows the server several times; read its allocations, not its latencies.
set -eu
dir=${HEAPTRACK_DIR:-/tmp/heaptrack}
mkdir -p "$dir"
pipe="$dir/fifo.$$"
mkfifo "$pipe"
/usr/lib/heaptrack/libexec/heaptrack_interpret < "$pipe" | zstd -q -c > "$dir/heaptrack.$$.zst" &
LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT="$pipe" \
    exec "${DELTALITE_BIN:?set DELTALITE_BIN to the deltalite binary}" "$@"
