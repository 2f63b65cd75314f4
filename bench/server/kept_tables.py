"""What keeping tables open between queries saves, side by side in one run.

Two servers over one data root: one with `--query-table-cache-files 0` (every query
opens its tables afresh: the last checkpoint, then every commit after it) and one with
the default (a query replays only the commits since the query before it). Tables that
took many small commits, as a dlt pipeline's or an upsert stream's do: 10, 50 and 150
commits of 100 rows (delta-rs checkpoints at version 100, so the last has 50 commits
after its checkpoint). For each, small queries alternate between the servers:

1. steady: nothing committed between queries (`count(*)`, a point lookup by id);
2. after a commit: one more commit before each pair of queries.

Every answer is checked equal between the servers. Prints medians (ms) and the ratio.

Usage: .venv/bin/python bench/server/kept_tables.py --bin target/release/deltalite
       [--runs 40] [--work /tmp/deltalite-kept-tables-bench]
"""

import argparse
import base64
import json
import shutil
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

USER, PASSWORD = "b", "b"
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
COMMITS = (10, 50, 150)


def sql(s: ServerProcess, statement: str) -> list:
    req = urllib.request.Request(
        f"{s.base}/query",
        data=json.dumps({"statement": statement}).encode(),
        headers={"Authorization": AUTH, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        lines = [json.loads(line) for line in r.read().splitlines()]
    errors = [line for line in lines if isinstance(line, dict) and "error" in line]
    assert not errors, (statement, errors)
    return lines[2:]


def timed(s: ServerProcess, statement: str) -> tuple[float, list]:
    t0 = time.perf_counter()
    rows = sql(s, statement)
    return time.perf_counter() - t0, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--work", default="/tmp/deltalite-kept-tables-bench")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    def server(name: str, args: list[str]) -> ServerProcess:
        return ServerProcess(
            binary=a.bin,
            data=work / "lake",
            users=((USER, PASSWORD),),
            log=work / f"{name}.log",
            args=["--log", "warn", *args],
        )

    fresh = server("fresh", ["--query-table-cache-files", "0"])
    kept = server("kept", [])
    try:
        sql(fresh, "CREATE SCHEMA lakehouse.bench")
        for n in COMMITS:
            sql(fresh, f"CREATE TABLE lakehouse.bench.t{n} (id BIGINT, v VARCHAR)")
            for i in range(n):
                sql(
                    fresh,
                    f"INSERT INTO lakehouse.bench.t{n} SELECT i + {i * 100}, 'x' "
                    "FROM unnest(range(0, 100)) AS r(i)",
                )
        print(f"small queries, median of {a.runs} alternating pairs (ms)")
        print(f"  {'table':30s} {'query':10s} {'fresh':>7s} {'kept':>7s}  fresh/kept")
        for n in COMMITS:
            table = f"lakehouse.bench.t{n}"
            queries = {
                "count": f"SELECT count(*) FROM {table}",
                "lookup": f"SELECT v FROM {table} WHERE id = 5",
            }
            for phase in ("steady", "commit"):
                for name, q in queries.items():
                    times = {"fresh": [], "kept": []}
                    for run in range(a.runs):
                        if phase == "commit":
                            sql(
                                fresh,
                                f"INSERT INTO {table} VALUES ({10**9 + run}, 'y')",
                            )
                        t_f, rows_f = timed(fresh, q)
                        t_k, rows_k = timed(kept, q)
                        assert rows_f == rows_k, (q, rows_f, rows_k)
                        times["fresh"].append(t_f)
                        times["kept"].append(t_k)
                    f = statistics.median(times["fresh"]) * 1000
                    k = statistics.median(times["kept"]) * 1000
                    label = f"{n} commits, {phase}"
                    print(f"  {label:30s} {name:10s} {f:7.1f} {k:7.1f}  {f / k:5.2f}x")
        print(
            f"  server peak RSS: fresh {fresh.rss_mb()[1]:.0f} MB, "
            f"kept {kept.rss_mb()[1]:.0f} MB"
        )
    finally:
        fresh.stop()
        kept.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
