"""The nested INSERT of dlt's first load, at scale, in the server's default 1 GiB pool
(issue: SQL writes; the 10M dlt benchmark's failing statement, without dlt).

`INSERT INTO tags SELECT * FROM staging.tags WHERE _dlt_root_id IN (SELECT _dlt_id FROM
staging.events)` with N staged roots and N staged children, 14-byte keys: the semi
join's hash table holds every root key. Prints, for one fresh server process:

1. the read of the same rows (`SELECT count(*) FROM (…)`), which plans a hash join and
   does not retry: refused or not, and its time;
2. the INSERT: its answer and time (a write refused by the pool runs once more with
   sort-merge joins, `crates/server/src/sql/mod.rs::SqlSession::execute`), and the
   server's peak RSS over the statement (VmHWM reset through `/proc/PID/clear_refs`).

Usage: .venv/bin/python bench/server/semi_join_retry.py --bin target/release/deltalite
       [--rows 10000000] [--work /tmp/deltalite-semi-join]
"""

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess
from sql_writes import sql

SELECT = (
    "SELECT * FROM staging.tags"
    ' WHERE "_dlt_root_id" IN (SELECT "_dlt_id" FROM staging.events)'
)


def timed(base: str, statement: str) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        answer = str(sql(base, statement))
    except RuntimeError as e:
        answer = "refused: " + str(e).split(": ", 1)[1].splitlines()[0][:160]
    return answer, time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True, help="the deltalite binary")
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--work", default="/tmp/deltalite-semi-join")
    args = p.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    n = args.rows
    users = (("b", "b"),)  # the credentials sql_writes.sql sends
    with ServerProcess(binary=args.bin, data=work, users=users) as server:
        base = server.base
        sql(base, "CREATE SCHEMA staging")
        sql(
            base,
            "CREATE TABLE staging.events AS SELECT"
            " substr(md5(CAST(i AS VARCHAR)), 1, 14) AS _dlt_id, i AS id"
            f" FROM generate_series(1, {n}) AS t(i)",
        )
        sql(
            base,
            "CREATE TABLE staging.tags AS SELECT"
            " substr(md5(CAST(j AS VARCHAR)), 1, 14) AS _dlt_root_id, j AS v,"
            " substr(md5('c' || CAST(j AS VARCHAR)), 1, 14) AS _dlt_id"
            f" FROM generate_series(1, {n}) AS t(j)",
        )
        sql(base, "CREATE TABLE tags AS SELECT * FROM staging.tags LIMIT 0")
        read, read_s = timed(base, f"SELECT count(*) FROM ({SELECT})")
        print(f"rows={n} read: {read} in {read_s:.1f} s", flush=True)
        Path(f"/proc/{server.pid}/clear_refs").write_text("5")
        insert, insert_s = timed(base, f"INSERT INTO tags {SELECT}")
        _, hwm = server.rss_mb()
        print(f"rows={n} insert: {insert} in {insert_s:.1f} s, peak RSS {hwm:.0f} MB")


if __name__ == "__main__":
    main()
