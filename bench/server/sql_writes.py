"""SQL writes benchmark, side by side in one run (issue: SQL writes through the engine).

On the engine benchmark's 16M-row table (`id` int64, `part` string partition column of 4
values, 60 random bytes of payload; `bench/engine`), each operation on a fresh hard-linked
copy of the table and in a fresh server process that first stages the operation's input
(`CREATE SCHEMA` and an `/upload` of the staging table, not timed, the same for every
operation), then has its peak RSS (VmHWM) reset through `/proc/PID/clear_refs`, so the
peak printed is the operation's own, over the RSS the staging left:

1. 20,000 rows (10,000 updates spread uniformly over the ids, 10,000 inserts):
   a. `POST /upsert` of the rows (the engine's direct upsert);
   b. SQL `MERGE … ON d.id = s.id AND d.part = s.part WHEN MATCHED THEN UPDATE SET *
      WHEN NOT MATCHED THEN INSERT *` from a staging table holding the same rows (the
      upload of the staging table is not timed): the upsert path;
   c. the same MERGE with `AND s.payload IS NOT NULL` in `ON`, which takes the general
      path (join plans through DataFusion).
2. `DELETE FROM t WHERE id IN (SELECT id FROM staging)` of 1% of the keys (a contiguous
   id range, so a few files hold them) vs delta-rs's `DeltaTable.delete` of the same rows
   (`id < N`, a predicate it can prune on) in process.

Usage: .venv/bin/python bench/server/sql_writes.py --bin target/release/deltalite
       --engine-bench target/release/engine-bench [--millions 16] [--work /tmp/sqlw]
"""

import argparse
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

AUTH = "Basic " + base64.b64encode(b"b:b").decode()
PAYLOAD = 60


def request(base: str, path: str, body: bytes, content_type: str) -> bytes:
    req = urllib.request.Request(
        base + path,
        data=body,
        headers={"Authorization": AUTH, "Content-Type": content_type},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=3600) as r:
        return r.read()


def sql(base: str, statement: str) -> list:
    out = request(
        base,
        "/query",
        json.dumps({"statement": statement}).encode(),
        "application/json",
    )
    lines = [json.loads(line) for line in out.splitlines() if line]
    for line in lines:
        if isinstance(line, dict) and "error" in line:
            raise RuntimeError(f"{statement[:80]}: {line['error']}")
    return lines[2:]


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def batch(millions: int) -> pa.Table:
    """10,000 updates spread over the table's ids, 10,000 new ids."""
    total = millions * 1_000_000
    updates = list(range(0, total, total // 10_000))[:10_000]
    inserts = list(range(total, total + 10_000))
    ids = updates + inserts
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % 4}" for i in ids], pa.string()),
            "payload": pa.array([os.urandom(PAYLOAD) for _ in ids], pa.binary()),
        }
    )


def fresh_copy(base_table: Path, data: Path) -> Path:
    """A hard-linked copy of the base table at <data>/lakehouse/bench/t: Delta never
    rewrites a file in place, so runs cannot disturb the base."""
    if data.exists():
        shutil.rmtree(data)
    target = data / "lakehouse" / "bench" / "t"
    target.parent.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(base_table), str(target)], check=True)
    return target


def measure(args, base_table: Path, name: str, prepare, operation) -> dict:
    data = Path(args.work) / "data"
    table = fresh_copy(base_table, data)
    with ServerProcess(
        binary=args.bin, data=data, users=(("b", "b"),), catalogs=("lakehouse",)
    ) as server:
        prepare(server.base)
        # The operation's own peak: VmHWM starts again from the RSS the preparation left.
        Path(f"/proc/{server.pid}/clear_refs").write_text("5")
        rss_before, _ = server.rss_mb()
        started = time.perf_counter()
        answer = operation(server.base)
        wall = time.perf_counter() - started
        _, hwm = server.rss_mb()
    removed, added = last_commit_files(table)
    return {
        "op": name,
        "wall_s": round(wall, 2),
        "server_rss_before_mb": round(rss_before, 1),
        "server_peak_mb": round(hwm, 1),
        "files_removed": removed,
        "files_added": added,
        "answer": answer,
    }


def last_commit_files(table: Path) -> tuple[int, int]:
    """(removes, adds) of the table's latest commit."""
    log = max((table / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in log.read_text().splitlines() if line]
    return (
        sum(1 for a in actions if "remove" in a),
        sum(1 for a in actions if "add" in a),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/deltalite")
    p.add_argument("--engine-bench", default="target/release/engine-bench")
    p.add_argument("--millions", type=int, default=16)
    p.add_argument("--work", default="/tmp/deltalite-sql-writes")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    base_table = work / f"base_{args.millions}m"
    if not (base_table / "_delta_log").exists():
        print(f"building the {args.millions}M-row table at {base_table}", flush=True)
        subprocess.run(
            [
                args.engine_bench,
                "build",
                "--millions",
                str(args.millions),
                "--table",
                str(base_table),
            ],
            check=True,
        )
    rows = batch(args.millions)
    body = parquet(rows)
    deleted = args.millions * 10_000
    delete_ids = parquet(pa.table({"id": pa.array(range(deleted), pa.int64())}))

    def stage(table_body: bytes, table: str = "staging"):
        def run(base):
            sql(base, "CREATE SCHEMA IF NOT EXISTS lakehouse.stage")
            request(
                base,
                f"/upload?catalog=lakehouse&schema=stage&table={table}&mode=create",
                table_body,
                "application/octet-stream",
            )

        return run

    merge = (
        "MERGE INTO lakehouse.bench.t AS d USING lakehouse.stage.staging AS s "
        "ON d.id = s.id AND d.part = s.part{extra} "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    ops = [
        (
            "upsert (POST /upsert)",
            stage(body),  # the same staging table as the MERGE's, unused here
            lambda base: request(
                base,
                "/upsert?catalog=lakehouse&schema=bench&table=t&primary_key=id,part",
                body,
                "application/octet-stream",
            ).decode()[:60],
        ),
        (
            "MERGE, upsert path",
            stage(body),
            lambda base: sql(base, merge.format(extra=""))[0][0],
        ),
        (
            "MERGE, general path",
            stage(body),
            lambda base: sql(base, merge.format(extra=" AND s.payload IS NOT NULL"))[0][
                0
            ],
        ),
        (
            f"DELETE … IN (SELECT …) of {deleted} ids",
            stage(delete_ids),
            lambda base: sql(
                base,
                "DELETE FROM lakehouse.bench.t WHERE id IN "
                "(SELECT id FROM lakehouse.stage.staging)",
            )[0][0],
        ),
    ]
    results = []
    for round_ in range(args.repeat):
        for name, prepare, operation in ops:
            r = measure(args, base_table, name, prepare, operation)
            r["round"] = round_ + 1
            results.append(r)
            print(json.dumps(r), flush=True)
        # delta-rs DELETE of the same rows, in process, on a fresh copy.
        table = fresh_copy(base_table, work / "data")
        started = time.perf_counter()
        metrics = DeltaTable(str(table)).delete(f"id < {deleted}")
        wall = time.perf_counter() - started
        r = {
            "op": f"delta-rs DeltaTable.delete of {deleted} ids",
            "wall_s": round(wall, 2),
            "files_removed": metrics.get("num_removed_files"),
            "files_added": metrics.get("num_added_files"),
            "rows_deleted": metrics.get("num_deleted_rows"),
            "round": round_ + 1,
        }
        results.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(
        f"{'operation':45} {'round':>5} {'wall_s':>8} {'before_MB':>9} {'peak_MB':>8} "
        f"{'removed':>8} {'added':>6}  rows"
    )
    for r in results:
        print(
            f"{r['op']:45} {r['round']:>5} {r['wall_s']:>8} "
            f"{r.get('server_rss_before_mb', '-'):>9} "
            f"{r.get('server_peak_mb', '-'):>8} {r['files_removed']:>8} "
            f"{r['files_added']:>6}  {r.get('answer', r.get('rows_deleted'))}"
        )


if __name__ == "__main__":
    main()
