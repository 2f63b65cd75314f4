"""Benchmark: deltalite.upsert vs deltalake MERGE from Python (not a test).

Same shape as the engine bench (bench/engine): tables of N million rows in 4 partitions
(~60 random payload bytes per row, written in 1M-row appends), then 20,000-row upserts
(half uniform updates, half inserts). Each upsert runs in a fresh process, engines
alternate, and every upsert starts from a fresh copy of the same base table (so no run
profits from a previous run's rewrite: MERGE's first run leaves one file per partition,
which made its second run cheaper). Prints wall time and peak RSS (the child's VmHWM) per
engine and size, and the ratios.

    python bench/python/bench_upsert.py --sizes 1,4,16 --runs 2 --dir /tmp/deltalite-pybench

Build a release wheel first (`cd python && maturin build --release`), a debug build
measures the debug engine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

MILLION = 1_000_000
PARTITIONS = 4
PAYLOAD_BYTES = 60
BATCH_ROWS = 20_000


def rows(ids):
    import pyarrow as pa

    n = len(ids)
    payload = os.urandom(n * PAYLOAD_BYTES)
    offsets = pa.array(range(0, (n + 1) * PAYLOAD_BYTES, PAYLOAD_BYTES), pa.int32())
    binary = pa.BinaryArray.from_buffers(
        pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(payload)]
    )
    ids_arr = pa.array(ids, pa.int64())
    parts = pa.array([f"p{i % PARTITIONS}" for i in ids], pa.string())
    return pa.table({"id": ids_arr, "part": parts, "payload": binary})


def peak_rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_build(table: str, millions: int) -> None:
    from deltalake import write_deltalake

    for m in range(millions):
        start = m * MILLION
        write_deltalake(
            table,
            rows(range(start, start + MILLION)),
            partition_by=["part"],
            mode="append",
        )


def batch(millions: int, seed: int):
    import random

    rng = random.Random(seed)
    total = millions * MILLION
    updates = rng.sample(range(total), BATCH_ROWS // 2)
    base = total + seed * BATCH_ROWS
    inserts = list(range(base, base + BATCH_ROWS // 2))
    return rows(updates + inserts)


def child_upsert(engine: str, table: str, millions: int, seed: int) -> None:
    data = batch(millions, seed)
    started = time.perf_counter()
    cpu_started = time.process_time()
    if engine == "deltalite":
        import deltalite

        stats = deltalite.DeltaLiteTable.open(table).upsert(
            data, primary_keys=["id"], partition_key="part"
        )
        detail = {
            "rows_updated": stats.rows_updated,
            "files_removed": stats.files_removed,
        }
    else:
        from deltalake import DeltaTable

        parts = ", ".join(f"'p{i}'" for i in range(PARTITIONS))
        predicate = f"t.part IN ({parts}) AND t.part = s.part AND t.id = s.id"
        metrics = (
            DeltaTable(table)
            .merge(data, predicate, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        detail = {
            "rows_updated": metrics.get("num_target_rows_updated"),
            "files_removed": metrics.get("num_target_files_removed"),
        }
    wall = time.perf_counter() - started
    # CPU seconds of all the process's threads: steadier than wall time on a shared VM.
    cpu = time.process_time() - cpu_started
    print(
        json.dumps(
            {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak_rss_mib(), **detail}
        )
    )


def run_child(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1]) if out.strip() else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--dir", default="/tmp/deltalite-pybench")
    b = sub.add_parser("build")
    b.add_argument("--table")
    b.add_argument("--millions", type=int)
    u = sub.add_parser("upsert")
    u.add_argument("--engine")
    u.add_argument("--table")
    u.add_argument("--millions", type=int)
    u.add_argument("--seed", type=int)
    args = parser.parse_args()
    if args.cmd == "build":
        child_build(args.table, args.millions)
        return
    if args.cmd == "upsert":
        child_upsert(args.engine, args.table, args.millions, args.seed)
        return

    os.makedirs(args.dir, exist_ok=True)
    print(
        f"{'size':>5} {'engine':>10} {'wall_s':>8} {'cpu_s':>7} {'peak_MiB':>9} {'files_rm':>8}"
    )
    summary = []
    for millions in [int(s) for s in args.sizes.split(",")]:
        base = os.path.join(args.dir, f"base_{millions}m")
        if not os.path.isdir(os.path.join(base, "_delta_log")):
            run_child("build", "--table", base, "--millions", str(millions))
        results: dict[str, list[dict]] = {"deltalite": [], "merge": []}
        for run in range(args.runs):
            order = ["deltalite", "merge"] if run % 2 == 0 else ["merge", "deltalite"]
            for engine in order:
                copy = os.path.join(args.dir, f"{engine}_{millions}m")
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(base, copy)
                os.sync()  # the upsert must not compete with the copy's writeback
                r = run_child(
                    "upsert",
                    "--engine",
                    engine,
                    "--table",
                    copy,
                    "--millions",
                    str(millions),
                    "--seed",
                    str(run + 1),
                )
                results[engine].append(r)
                print(
                    f"{millions:>4}M {engine:>10} {r['wall_s']:>8.2f} {r['cpu_s']:>7.2f} "
                    f"{r['peak_rss_mib']:>9.0f} {r.get('files_removed')!s:>8}",
                    flush=True,
                )
        med = {
            e: (
                statistics.median(r["wall_s"] for r in rs),
                statistics.median(r["peak_rss_mib"] for r in rs),
                statistics.median(r["cpu_s"] for r in rs),
            )
            for e, rs in results.items()
        }
        summary.append((millions, med))
    print("\nmedians (deltalite vs MERGE):")
    for millions, med in summary:
        (dw, dr, dc), (mw, mr, mc) = med["deltalite"], med["merge"]
        print(
            f"{millions:>4}M  deltalite {dw:.2f}s {dc:.2f}cpu {dr:.0f}MiB"
            f" | MERGE {mw:.2f}s {mc:.2f}cpu {mr:.0f}MiB"
            f" | wall {dw / mw:.2f}x, cpu {dc / mc:.2f}x, peak RSS {dr / mr:.2f}x of MERGE's"
        )


if __name__ == "__main__":
    main()
