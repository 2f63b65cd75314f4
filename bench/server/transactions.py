"""What a Flight SQL transaction costs, side by side in one run (issue: Flight SQL endpoint).

A transaction's statements commit to a private log and COMMIT publishes each table as one
commit (crates/server/src/flight/transaction.rs). Over ADBC, the same statements run on
two tables of one server: once with autocommit (each statement its own commit) and once
in one transaction, then COMMIT:

1. `--inserts` single-row INSERTs into an empty table;
2. `--updates` UPDATEs, each of 1% of the rows (`WHERE id % 100 = k`), on a table of
   `--rows` rows (id, day, v, x) loaded by /upload.

Both tables end with the same rows (checked). Prints medians over `--runs` fresh table
pairs and the server's peak RSS (VmHWM).

Usage: .venv/bin/python bench/server/transactions.py --bin target/release/deltalite
       [--rows 1000000] [--inserts 50] [--updates 10] [--runs 3]
       [--work /tmp/deltalite-transactions-bench]
Needs requirements-bench.txt in the venv (the ADBC Flight SQL driver).
"""

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as adbc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_query import make_parquet, post
from server_process import ServerProcess

USER, PASSWORD = "b", "b"


def connect(s: ServerProcess, autocommit: bool):
    return adbc.connect(
        s.flight,
        db_kwargs={"username": USER, "password": PASSWORD},
        autocommit=autocommit,
    )


def run_both(s: ServerProcess, statements, prepare) -> dict:
    """`statements(table)` run on one table with autocommit and on another in one
    transaction; seconds for each, and the COMMIT's."""
    out = {}
    for mode in ("autocommit", "transaction"):
        table = f"lakehouse.bench.{mode}"
        prepare(table)
        conn = connect(s, autocommit=mode == "autocommit")
        cur = conn.cursor()
        started = time.perf_counter()
        for sql in statements(table):
            cur.execute(sql)
        out[mode] = time.perf_counter() - started
        if mode == "transaction":
            started = time.perf_counter()
            conn.commit()
            out["commit"] = time.perf_counter() - started
        cur.close()
        conn.close()
    check = connect(s, autocommit=True)
    cur = check.cursor()
    sums = []
    for mode in ("autocommit", "transaction"):
        cur.execute(
            f"SELECT count(*), sum(v), sum(id * (v % 7)) FROM lakehouse.bench.{mode}"
        )
        sums.append(cur.fetchall())
    cur.close()
    check.close()
    assert sums[0] == sums[1], sums
    return out


def report(name: str, runs: list[dict], count: int) -> None:
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    per = 1000 / count
    print(f"{name}, median of {len(runs)}")
    print(
        f"  autocommit    {med['autocommit']:7.3f} s  {med['autocommit'] * per:6.1f} ms each"
    )
    print(
        f"  transaction   {med['transaction']:7.3f} s  {med['transaction'] * per:6.1f} ms each"
        f"  + COMMIT {med['commit']:.3f} s"
    )
    total = med["transaction"] + med["commit"]
    print(f"  transaction + COMMIT / autocommit = {total / med['autocommit']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--inserts", type=int, default=50)
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/deltalite-transactions-bench")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "rows.parquet"
    make_parquet(source, args.rows, 0, 7)
    s = ServerProcess(
        binary=args.bin,
        data=work / "lake",
        users=((USER, PASSWORD),),
        log=work / "server.log",
        args=["--log", "warn"],
    )
    try:
        admin = connect(s, autocommit=True)
        cur = admin.cursor()
        cur.execute("CREATE SCHEMA IF NOT EXISTS lakehouse.bench")

        def empty(table: str) -> None:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute(f"CREATE TABLE {table} (id BIGINT, v BIGINT)")

        def loaded(table: str) -> None:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            name = table.rsplit(".", 1)[1]
            q = f"catalog=lakehouse&schema=bench&table={name}&mode=create"
            post(f"{s.base}/upload?{q}", None, "application/parquet", source)

        inserts = [
            run_both(
                s,
                lambda t: [
                    f"INSERT INTO {t} VALUES ({i}, {i})" for i in range(args.inserts)
                ],
                empty,
            )
            for _ in range(args.runs)
        ]
        updates = [
            run_both(
                s,
                lambda t: [
                    f"UPDATE {t} SET v = v + 1 WHERE id % 100 = {k}"
                    for k in range(args.updates)
                ],
                loaded,
            )
            for _ in range(args.runs)
        ]
        cur.close()
        admin.close()
        report(f"{args.inserts} single-row INSERTs", inserts, args.inserts)
        report(
            f"{args.updates} UPDATEs of 1% of {args.rows} rows each",
            updates,
            args.updates,
        )
        print(f"server peak RSS {s.rss_mb()[1]:.0f} MB")
    finally:
        s.stop()


if __name__ == "__main__":
    main()
