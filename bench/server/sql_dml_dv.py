"""SQL DELETE and UPDATE with deletion vectors vs copy-on-write, side by side in one run
(issue: deletion vectors).

On the engine benchmark's 16M-row table (`bench/engine`; `id`, `part` of 4 values, 60
bytes of payload, 64 files), each statement on a fresh hard-linked copy and in a fresh
server process that first stages 10,000 ids spread uniformly over the table (every file
holds some) and, for the deletion-vector runs, sets `delta.enableDeletionVectors` (not
timed); peak RSS is the statement's own (VmHWM reset through `/proc/PID/clear_refs`):

1. `DELETE FROM t WHERE id IN (SELECT id FROM staging)`: copy-on-write, then with vectors;
2. `UPDATE t SET payload = digest(payload, 'sha256') WHERE id IN (…)`: the same two;
3. a `MERGE` the upsert path does not take (the even staged ids deleted, the odd ones
   updated): the same two;
4. a full scan after the DELETE (`SELECT sum(id), count(*) …`), both tables;
5. delta-rs's `DeltaTable.delete` of the same ids in process (copy-on-write; it writes no
   vectors).

Usage: .venv/bin/python bench/server/sql_dml_dv.py --bin target/release/deltalite
       [--millions 16] [--work /tmp/deltalite-sql-dv] [--repeat 2]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess
from sql_writes import fresh_copy, last_commit_files, parquet, request, sql

T = "lakehouse.bench.t"


def run(args, base_table: Path, ids: bytes, vectors: bool, statement: str) -> dict:
    data = Path(args.work) / "data"
    table = fresh_copy(base_table, data)
    with ServerProcess(
        binary=args.bin, data=data, users=(("b", "b"),), catalogs=("lakehouse",)
    ) as server:
        sql(server.base, "CREATE SCHEMA IF NOT EXISTS lakehouse.stage")
        request(
            server.base,
            "/upload?catalog=lakehouse&schema=stage&table=ids&mode=create",
            ids,
            "application/octet-stream",
        )
        if vectors:
            sql(
                server.base,
                f"ALTER TABLE {T} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
            )
        Path(f"/proc/{server.pid}/clear_refs").write_text("5")
        started = time.perf_counter()
        answer = sql(server.base, statement)[0][0]
        wall = time.perf_counter() - started
        _, hwm = server.rss_mb()
        removed, added = last_commit_files(table)
        started = time.perf_counter()
        scanned = sql(
            server.base, f"SELECT sum(id), count(*) FROM {T} WHERE part <> 'x'"
        )[0]
        scan = time.perf_counter() - started
    return {
        "op": statement.split()[0] + (" dv" if vectors else " cow"),
        "wall_s": round(wall, 2),
        "peak_mb": round(hwm, 1),
        "removed": removed,
        "added": added,
        "rows": answer,
        "scan_after_s": round(scan, 2),
        "scan": scanned,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/deltalite")
    p.add_argument("--base", default="/tmp/deltalite-bench/base_16m")
    p.add_argument("--millions", type=int, default=16)
    p.add_argument("--work", default="/tmp/deltalite-sql-dv")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    base_table = Path(args.base)
    total = args.millions * 1_000_000
    # Every partition and file holds some (the step is odd; `part` is the id modulo 4).
    step = total // 10_000 + 1
    spread = list(range(7, total, step))[:10_000]
    ids = parquet(pa.table({"id": pa.array(spread, pa.int64())}))
    where = "id IN (SELECT id FROM lakehouse.stage.ids)"
    statements = [
        f"DELETE FROM {T} WHERE {where}",
        f"UPDATE {T} SET payload = digest(payload, 'sha256') WHERE {where}",
        (
            f"MERGE INTO {T} AS t USING (SELECT id FROM lakehouse.stage.ids) AS s "
            "ON t.id = s.id WHEN MATCHED AND t.id % 2 = 0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET payload = digest(t.payload, 'sha256')"
        ),
    ]
    results = []
    for round_ in range(1, args.repeat + 1):
        for statement in statements:
            scans = []
            for vectors in (False, True):
                r = run(args, base_table, ids, vectors, statement)
                r["round"] = round_
                results.append(r)
                scans.append(r["scan"])
                print(json.dumps(r), flush=True)
            # Both ways leave the same rows (sum and count of ids).
            assert scans[0] == scans[1], (statement, scans)
        table = fresh_copy(base_table, Path(args.work) / "data")
        started = time.perf_counter()
        metrics = DeltaTable(str(table)).delete(
            f"id IN ({', '.join(map(str, spread))})"
        )
        r = {
            "op": "delta-rs delete",
            "wall_s": round(time.perf_counter() - started, 2),
            "removed": metrics.get("num_removed_files"),
            "added": metrics.get("num_added_files"),
            "rows": metrics.get("num_deleted_rows"),
            "round": round_,
        }
        results.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(
        f"{'operation':16} {'round':>5} {'wall_s':>7} {'peak_MB':>8} {'removed':>8} {'added':>6} {'rows':>6} {'scan_s':>7}"
    )
    for r in results:
        print(
            f"{r['op']:16} {r['round']:>5} {r['wall_s']:>7} {r.get('peak_mb', '-'):>8} "
            f"{r['removed']:>8} {r['added']:>6} {r['rows']:>6} {r.get('scan_after_s', '-'):>7}"
        )


if __name__ == "__main__":
    main()
