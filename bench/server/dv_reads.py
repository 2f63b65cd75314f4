"""What readers pay for deletion vectors (issue: deletion vectors): the engine benchmark's
16M-row table after N upserts (default 50) copy-on-write and the same N with deletion
vectors, then scanned (issue's targets: ≤ 1.2x, and parity after OPTIMIZE).

1. Two hard-linked copies of the base table (`engine-bench run` builds it); one gets
   `delta.enableDeletionVectors` (not timed). The same N 20,000-row upserts (seeds 1..N,
   half uniform updates, half inserts) go into each, through `engine-bench upsert` (ten
   per process), so each upsert's wall is printed too; the copy-on-write table is
   vacuumed between processes to fit on disk.
2. One release server over both tables. Each query runs once to warm, then `--repeat`
   rounds that take the two tables in turn (drift falls on both alike); medians: a full scan (`count(*)`, `sum(id)`,
   `max(payload)`), a selective query (`id = K` for 5 keys spread over the table),
   and the same full scan through delta-rs's reader (`deltalake` QueryBuilder, in this
   process) as an independent reader.
3. `OPTIMIZE` both tables through the server, then the same queries again.

Usage: .venv/bin/python bench/server/dv_reads.py --bin target/release/deltalite \\
       --engine-bench target/release/engine-bench [--upserts 50] [--repeat 5]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess
from sql_writes import sql

TABLES = ("cow", "dv")


def upserts(args, table: Path, vectors: bool) -> list[float]:
    """The upserts' walls, in chunks of 10 (one process each, so the later upserts of a
    chunk find the probe cache warm); the copy-on-write table is vacuumed between chunks
    (each of its upserts rewrites every file: 50 would keep 50 GB)."""
    walls = []
    for first in range(1, args.upserts + 1, 10):
        command = [
            args.engine_bench,
            "upsert",
            "--millions",
            str(args.millions),
            "--table",
            str(table),
            "--seed",
            str(first),
            "--repeat",
            str(min(10, args.upserts + 1 - first)),
        ]
        if vectors:
            command.append("--deletion-vectors")
        out = subprocess.run(command, check=True, capture_output=True, text=True)
        walls += [
            json.loads(line)["wall_s"]
            for line in out.stdout.splitlines()
            if line.strip()
        ]
        if not vectors:
            DeltaTable(str(table)).vacuum(
                retention_hours=0, enforce_retention_duration=False, dry_run=False
            )
    return walls


def interleaved(runs: dict, repeat: int) -> tuple[dict, dict]:
    """Each of `runs` (by table) once to warm, then `repeat` rounds taking the tables in
    turn, so that drift on the machine (page cache, other work) falls on both alike;
    per table the median wall and the answer (asserted the same every time)."""
    answers = {t: run() for t, run in runs.items()}
    walls = {t: [] for t in runs}
    for _ in range(repeat):
        for t, run in runs.items():
            started = time.perf_counter()
            again = run()
            walls[t].append(time.perf_counter() - started)
            assert again == answers[t], (again, answers[t])
    return {t: statistics.median(w) for t, w in walls.items()}, answers


def measure(args, base: str, data: Path, label: str) -> dict:
    total = args.millions * 1_000_000
    keys = [total * i // 5 + 12_345 for i in range(5)]
    queries = {
        "full scan": "SELECT count(*), sum(id), max(payload) FROM lakehouse.bench.{t}",
        "selective": f"SELECT id, payload FROM lakehouse.bench.{{t}} WHERE id IN ({', '.join(map(str, keys))}) ORDER BY id",
    }
    out = {}
    for name, query in queries.items():
        runs = {
            t: (lambda t=t, query=query: sql(base, query.format(t=t))) for t in TABLES
        }
        walls, answers = interleaved(runs, args.repeat)
        assert answers["cow"] == answers["dv"], (name, answers)
        out[name] = walls

    def scan(table):
        q = QueryBuilder().register("t", table)
        return pa.table(
            q.execute("SELECT count(*), sum(id) FROM t").read_all()
        ).to_pylist()

    tables = {t: DeltaTable(str(data / "lakehouse" / "bench" / t)) for t in TABLES}
    walls, answers = interleaved(
        {t: (lambda t=t: scan(tables[t])) for t in TABLES}, args.repeat
    )
    assert answers["cow"] == answers["dv"], answers
    out["delta-rs full scan"] = walls
    for name, walls in out.items():
        print(
            f"{label:14} {name:18} cow {walls['cow']:.3f} s  dv {walls['dv']:.3f} s  "
            f"dv/cow {walls['dv'] / walls['cow']:.2f}x",
            flush=True,
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/deltalite")
    p.add_argument("--engine-bench", default="target/release/engine-bench")
    p.add_argument("--base", default="/tmp/deltalite-bench/base_16m")
    p.add_argument("--millions", type=int, default=16)
    p.add_argument("--work", default="/tmp/deltalite-dv-reads")
    p.add_argument("--upserts", type=int, default=50)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--reuse", action="store_true", help="query the tables a previous run left"
    )
    p.add_argument(
        "--skip-optimize",
        action="store_true",
        help="stop before OPTIMIZE (to query the same tables again, e.g. with another --bin)",
    )
    args = p.parse_args()
    data = Path(args.work) / "data"
    if data.exists() and not args.reuse:
        shutil.rmtree(data)
    fresh = not data.exists()
    for t in TABLES if fresh else ():
        (data / "lakehouse" / "bench").mkdir(parents=True, exist_ok=True)
        target = data / "lakehouse" / "bench" / t
        subprocess.run(["cp", "-al", args.base, str(target)], check=True)
        walls = upserts(args, target, vectors=t == "dv")
        print(
            f"{t}: {len(walls)} upserts, wall first {walls[0]:.2f} s, median "
            f"{statistics.median(walls):.2f} s, last {walls[-1]:.2f} s, total {sum(walls):.1f} s",
            flush=True,
        )
    with ServerProcess(
        binary=args.bin, data=data, users=(("b", "b"),), catalogs=("lakehouse",)
    ) as server:
        measure(args, server.base, data, f"{args.upserts} upserts")
        if args.skip_optimize:
            return
        for t in TABLES:
            print(t, "OPTIMIZE:", sql(server.base, f"OPTIMIZE lakehouse.bench.{t}"))
        measure(args, server.base, data, "after OPTIMIZE")


if __name__ == "__main__":
    main()
