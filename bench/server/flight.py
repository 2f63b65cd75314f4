"""Arrow Flight SQL benchmark, side by side in one run (issue: Flight SQL endpoint).

1. Full-table result: `SELECT *` over a 16M-row table through Flight SQL (DoGet, read
   into Arrow by the ADBC Flight SQL driver and by Altertable's own client,
   `altertable-flightsql`, which reads through pyarrow's Flight client) vs the same
   statement over HTTP `/query` as NDJSON and as Parquet vs DuckDB reading the table's
   Parquet files locally into Arrow.
2. Bulk ingest: 8M rows over Flight SQL (`adbc_ingest`, CommandStatementIngest) vs the
   same rows POSTed as one Parquet file to `/upload?mode=append`.

Every side reads its whole result and the row counts are checked equal. The query and
the ingest each run in a fresh server process, so each peak RSS (VmHWM) is that phase's.

Usage: .venv/bin/python bench/server/flight.py --bin target/release/deltalite
       [--query-rows 16000000] [--ingest-rows 8000000] [--runs 3]
       [--work /tmp/deltalite-flight-bench]
Needs requirements-bench.txt in the venv (the ADBC Flight SQL driver, altertable-flightsql).
"""

import argparse
import base64
import json
import os
import shutil
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import adbc_driver_flightsql.dbapi as adbc
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from altertable_flightsql import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_query import make_parquet, post
from server_process import ServerProcess

USER, PASSWORD = "b", "b"
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
TABLE = "lakehouse.bench.facts"


def server(binary: str, work: Path, name: str) -> ServerProcess:
    return ServerProcess(
        binary=binary,
        data=work / "lake",
        users=((USER, PASSWORD),),
        log=work / f"{name}.log",
        args=["--log", "warn"],
    )


def connect(s: ServerProcess):
    return adbc.connect(s.flight, db_kwargs={"username": USER, "password": PASSWORD})


def http_rows(s: ServerProcess, fmt: str, work: Path) -> int:
    """Reads a whole /query result; returns its row count."""
    body = json.dumps({"statement": f"SELECT * FROM {TABLE}", "format": fmt}).encode()
    req = urllib.request.Request(
        f"{s.base}/query",
        data=body,
        headers={"Authorization": AUTH, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=3600) as r:
        if fmt == "parquet":
            path = work / "result.parquet"
            with open(path, "wb") as f:
                shutil.copyfileobj(r, f, 1 << 20)
            return pq.ParquetFile(path).metadata.num_rows
        # NDJSON: two header lines (column names, then types), then one line per row.
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: r.read(1 << 20), b""))
        return lines - 2


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def median_of(fn, runs: int):
    results = [timed(fn) for _ in range(runs)]
    counts = {out for _, out in results}
    assert len(counts) == 1, counts
    return statistics.median(t for t, _ in results), counts.pop()


def query_phase(binary: str, work: Path, rows: int, runs: int) -> None:
    source = work / "query.parquet"
    make_parquet(source, rows, 0, 3)
    s = server(binary, work, "query")
    try:
        q = "catalog=lakehouse&schema=bench&table=facts&mode=create"
        post(f"{s.base}/upload?{q}", None, "application/parquet", source)
        files = str(work / "lake" / "lakehouse" / "bench" / "facts" / "*.parquet")
        conn = connect(s)
        cur = conn.cursor()

        def flight() -> int:
            cur.execute(f"SELECT * FROM {TABLE}")
            return cur.fetch_arrow_table().num_rows

        host, port = s.flight_addr
        altertable = Client(USER, PASSWORD, host=host, port=port, tls=False)

        def flight_altertable() -> int:
            return altertable.query(f"SELECT * FROM {TABLE}").read_all().num_rows

        con = duckdb.connect()

        def duck() -> int:
            sql = f"SELECT * FROM read_parquet('{files}')"
            return con.sql(sql).to_arrow_table().num_rows

        timings = {
            "flight": median_of(flight, runs),
            "altertable": median_of(flight_altertable, runs),
            "ndjson": median_of(lambda: http_rows(s, "default", work), runs),
            "parquet": median_of(lambda: http_rows(s, "parquet", work), runs),
            "duckdb": median_of(duck, runs),
        }
        altertable.close()
        cur.close()
        conn.close()
        counts = {n for _, n in timings.values()}
        assert counts == {rows}, timings
        print(f"full-table result, {rows} rows (id, day, v, x), median of {runs}")
        for name, (secs, _) in timings.items():
            print(f"  {name:10s} {secs:7.3f} s  {rows / secs / 1e6:6.1f} M rows/s")
        f = timings["flight"][0]
        a = timings["altertable"][0]
        d = timings["duckdb"][0]
        print(
            f"  NDJSON / Flight = {timings['ndjson'][0] / f:.2f}x   "
            f"Parquet / Flight = {timings['parquet'][0] / f:.2f}x   "
            f"Flight / DuckDB = {f / d:.2f}x (ADBC), {a / d:.2f}x (altertable)"
        )
        print(f"  server peak RSS {s.rss_mb()[1]:.0f} MB")
    finally:
        s.stop()


def ingest_phase(binary: str, work: Path, rows: int, runs: int) -> None:
    source = work / "ingest.parquet"
    make_parquet(source, rows, 0, 5)
    size_mb = source.stat().st_size / 2**20
    small = work / "small.parquet"
    make_parquet(small, 10, 0, 6)
    s = server(binary, work, "ingest")
    try:
        q = "catalog=lakehouse&schema=bench&table="
        post(f"{s.base}/upload?{q}up&mode=create", None, "application/parquet", small)
        conn = connect(s)
        cur = conn.cursor()
        cur.adbc_ingest(
            "fl",
            pq.read_table(small),
            mode="create",
            catalog_name="lakehouse",
            db_schema_name="bench",
        )
        conn.commit()
        upload, flight = [], []
        for _ in range(runs):
            t, _ = timed(
                lambda: post(
                    f"{s.base}/upload?{q}up&mode=append",
                    None,
                    "application/parquet",
                    source,
                )
            )
            upload.append(t)

            def ingest() -> int:
                batches = pq.ParquetFile(source).iter_batches(batch_size=65536)
                stream = pa.RecordBatchReader.from_batches(
                    pq.read_schema(source), batches
                )
                n = cur.adbc_ingest(
                    "fl",
                    stream,
                    mode="append",
                    catalog_name="lakehouse",
                    db_schema_name="bench",
                )
                conn.commit()
                return n

            t, n = timed(ingest)
            assert n in (rows, -1), n
            flight.append(t)
        cur.execute(
            "SELECT (SELECT count(*) FROM lakehouse.bench.up) AS up, "
            "(SELECT count(*) FROM lakehouse.bench.fl) AS fl"
        )
        assert cur.fetchone() == (10 + runs * rows, 10 + runs * rows)
        cur.close()
        conn.close()
        u, f = statistics.median(upload), statistics.median(flight)
        print(
            f"bulk ingest, {rows} rows ({size_mb:.0f} MB as Parquet), median of {runs}"
        )
        print(f"  /upload Parquet append   {u:7.2f} s")
        print(f"  Flight adbc_ingest       {f:7.2f} s")
        print(f"  Flight / upload = {f / u:.2f}x")
        print(f"  server peak RSS {s.rss_mb()[1]:.0f} MB")
    finally:
        s.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--query-rows", type=int, default=16_000_000)
    ap.add_argument("--ingest-rows", type=int, default=8_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/deltalite-flight-bench")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        query_phase(a.bin, work, a.query_rows, a.runs)
        ingest_phase(a.bin, work, a.ingest_rows, a.runs)
    finally:
        if os.environ.get("KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
