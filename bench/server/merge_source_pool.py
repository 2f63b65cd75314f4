"""A key MERGE whose source is large, in a given query pool (issue: SQL writes; the
source of a MERGE that is an upsert is held in the pool while the engine runs).

dlt's nested MERGE at scale, without dlt: `MERGE INTO tags USING staging.tags ON
_dlt_id WHEN MATCHED THEN UPDATE … WHEN NOT MATCHED THEN INSERT …` with N staged child
rows (three 14-byte keys, a list index, a value), first into an empty table (all
inserts), then again (every row matched). Prints, for one fresh server process per pool
size: each MERGE's answer, time, the path it took (the engine's upsert commits
`deltalite.operation = merge`; the general path does not), and the server's peak RSS
over the statement (VmHWM reset through `/proc/PID/clear_refs`).

Usage: .venv/bin/python bench/server/merge_source_pool.py --bin target/release/deltalite
       [--rows 10000000] [--pools 1024,4096] [--work /tmp/deltalite-merge-pool]
"""

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess
from sql_writes import sql

MERGE = (
    'MERGE INTO tags AS d USING staging.tags AS s ON d."_dlt_id" = s."_dlt_id"'
    " WHEN MATCHED THEN UPDATE SET v = s.v, _dlt_root_id = s._dlt_root_id,"
    " _dlt_parent_id = s._dlt_parent_id, _dlt_list_idx = s._dlt_list_idx"
    " WHEN NOT MATCHED THEN INSERT (_dlt_root_id, _dlt_parent_id, _dlt_list_idx, v,"
    " _dlt_id) VALUES (s._dlt_root_id, s._dlt_parent_id, s._dlt_list_idx, s.v,"
    " s._dlt_id)"
)


def path_taken(lake: Path) -> str:
    log = sorted((lake / "lakehouse" / "main" / "tags" / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in log[-1].read_text().splitlines()]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return "upsert" if info.get("deltalite.operation") == "merge" else "general"


def run(binary: str, work: Path, rows: int, pool_mb: int) -> None:
    lake = work / f"pool-{pool_mb}"
    users = (("b", "b"),)  # the credentials sql_writes.sql sends
    args = ["--query-memory-mb", str(pool_mb), "--log", "warn"]
    with ServerProcess(binary=binary, data=lake, users=users, args=args) as server:
        base = server.base
        sql(base, "CREATE SCHEMA staging")
        sql(
            base,
            "CREATE TABLE staging.tags AS SELECT"
            " substr(md5(CAST(j / 2 AS VARCHAR)), 1, 14) AS _dlt_root_id,"
            " substr(md5(CAST(j / 2 AS VARCHAR)), 1, 14) AS _dlt_parent_id,"
            " j % 2 AS _dlt_list_idx, j AS v,"
            " substr(md5('c' || CAST(j AS VARCHAR)), 1, 14) AS _dlt_id"
            f" FROM generate_series(1, {rows}) AS t(j)",
        )
        sql(base, "CREATE TABLE tags AS SELECT * FROM staging.tags LIMIT 0")
        for what in ("into empty", "every row matched"):
            Path(f"/proc/{server.pid}/clear_refs").write_text("5")
            started = time.perf_counter()
            try:
                answer = sql(base, MERGE)
            except RuntimeError as e:
                answer = "refused: " + str(e).split(": ", 1)[1].splitlines()[0][:120]
            wall = time.perf_counter() - started
            _, hwm = server.rss_mb()
            print(
                f"rows={rows} pool={pool_mb} MiB {what}: {answer} in {wall:.1f} s,"
                f" {path_taken(lake)} path (last commit), peak RSS {hwm:.0f} MB",
                flush=True,
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True, help="the deltalite binary")
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--pools", default="1024,4096", help="pool sizes in MiB")
    p.add_argument("--work", default="/tmp/deltalite-merge-pool")
    args = p.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        for pool in args.pools.split(","):
            run(args.bin, work, args.rows, int(pool))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
