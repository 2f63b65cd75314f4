"""Server benchmark, side by side in one run (issue: lakehouse server).

1. Ingest: a ~1 GB Parquet file POSTed to /upload (append to a matching table) vs
   deltalake.write_deltalake of the same file in-process: wall time, MB/s, server peak RSS.
2. Query: GROUP BY day, a selective filter, integer arithmetic (checked for overflow),
   casts of DOUBLEs to integers (rounded), EXCEPT ALL (copies counted) and EXCEPT over
   a 16M-row table through /query (NDJSON and Parquet) vs DuckDB reading the same
   Parquet files directly; medians of --runs.

Usage: .venv/bin/python bench/server/ingest_query.py --bin target/release/deltalite
       [--ingest-mb 1024] [--query-rows 16000000] [--runs 3]
       [--work /tmp/deltalite-server-bench]
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

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

AUTH = "Basic " + base64.b64encode(b"b:b").decode()


def post(url: str, body, content_type: str, stream_file: Path | None = None) -> bytes:
    headers = {"Authorization": AUTH, "Content-Type": content_type}
    if stream_file is None:
        return send(
            urllib.request.Request(url, data=body, headers=headers, method="POST")
        )
    headers["Content-Length"] = str(stream_file.stat().st_size)
    with open(stream_file, "rb") as f:  # streamed by urllib, never read whole
        return send(urllib.request.Request(url, data=f, headers=headers, method="POST"))


def send(req: urllib.request.Request) -> bytes:
    with urllib.request.urlopen(req, timeout=3600) as r:
        return r.read()


def make_parquet(path: Path, rows: int, payload: int, seed: int) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("day", pa.date32()),
            ("v", pa.int64()),
            ("x", pa.float64()),
            ("p", pa.binary()),
        ]
    )
    with pq.ParquetWriter(path, schema) as w:
        chunk = 1_000_000
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            ids = pa.array(range(start, start + n), pa.int64())
            blob = os.urandom(n * payload) if payload else b""
            w.write_table(
                pa.table(
                    {
                        "id": ids,
                        "day": pc.cast(
                            pc.add(pc.divide(ids, 1_000_000), 19700), pa.int32()
                        ).cast(pa.date32()),
                        "v": pc.cast(
                            pc.floor(
                                pc.multiply(
                                    pc.random(n, initializer=seed + start), 1000
                                )
                            ),
                            pa.int64(),
                        ),
                        "x": pc.random(n, initializer=seed + start + 1),
                        "p": pa.array(
                            [blob[i * payload : (i + 1) * payload] for i in range(n)],
                            pa.binary(),
                        ),
                    },
                    schema=schema,
                )
            )


# Queries whose rows are compared with DuckDB's (the others' averages may differ in
# their last digits).
EXACT = ("integer arithmetic", "cast to integer", "except all", "except")


def out_rows(url: str, sql: str) -> list[bytes]:
    """The NDJSON rows of `sql` over the bench table (after the header lines)."""
    body = json.dumps({"statement": sql.format(t="lakehouse.bench.facts")}).encode()
    return post(f"{url}/query", body, "application/json").splitlines()[2:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ingest-mb", type=int, default=1024)
    ap.add_argument("--query-rows", type=int, default=16_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/deltalite-server-bench")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    payload = 100
    ingest_rows = a.ingest_mb * 1024 * 1024 // (payload + 28)
    big, small = work / "big.parquet", work / "small.parquet"
    make_parquet(big, ingest_rows, payload, 1)
    make_parquet(small, 10, payload, 2)
    size_mb = big.stat().st_size / 2**20

    server = ServerProcess(
        binary=a.bin,
        data=work / "lake",
        users=(("b", "b"),),
        log=work / "server.log",
        args=["--log", "warn"],
    )
    try:
        url = server.base
        q = "catalog=lakehouse&schema=bench&table="
        post(f"{url}/upload?{q}ingest&mode=create", None, "application/parquet", small)
        t0 = time.perf_counter()
        post(f"{url}/upload?{q}ingest&mode=append", None, "application/parquet", big)
        upload_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reader = pa.RecordBatchReader.from_batches(
            pq.read_schema(big), pq.ParquetFile(big).iter_batches()
        )
        write_deltalake(str(work / "inproc"), reader)
        inproc_s = time.perf_counter() - t0
        print(f"ingest {size_mb:.0f} MB ({ingest_rows} rows)")
        print(
            f"  /upload append      {upload_s:7.2f} s  {size_mb / upload_s:7.1f} MB/s  server peak RSS {server.rss_mb()[1]:.0f} MB"
        )
        print(
            f"  write_deltalake     {inproc_s:7.2f} s  {size_mb / inproc_s:7.1f} MB/s"
        )
        print(f"  ratio upload / in-process = {upload_s / inproc_s:.2f}x")

        qfile = work / "query.parquet"
        make_parquet(qfile, a.query_rows, 0, 3)
        post(f"{url}/upload?{q}facts&mode=create", None, "application/parquet", qfile)
        files = str(work / "lake" / "lakehouse" / "bench" / "facts" / "*.parquet")
        queries = {
            "group by day": "SELECT day, count(*), sum(v), avg(x) FROM {t} GROUP BY day ORDER BY day",
            "selective filter": "SELECT id, v, x FROM {t} WHERE id BETWEEN 5000000 AND 5000100 ORDER BY id",
            "integer arithmetic": "SELECT day, sum(v * 3 + id - 7) FROM {t} GROUP BY day ORDER BY day",
            "cast to integer": "SELECT day, sum(CAST(x * 1000 AS BIGINT)) FROM {t} GROUP BY day ORDER BY day",
            "except all": (
                "SELECT count(*) FROM (SELECT day, v FROM {t} "
                "EXCEPT ALL SELECT day, v FROM {t} WHERE id % 3 = 0)"
            ),
            "except": (
                "SELECT count(*) FROM (SELECT day, v FROM {t} "
                "EXCEPT SELECT day, v FROM {t} WHERE id % 3 = 0)"
            ),
        }
        print(f"query over {a.query_rows} rows, median of {a.runs}")
        con = duckdb.connect()
        for name, sql in queries.items():
            timings = {}
            for fmt in ("default", "parquet"):
                body = json.dumps(
                    {"statement": sql.format(t="lakehouse.bench.facts"), "format": fmt}
                ).encode()
                runs = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    out = post(f"{url}/query", body, "application/json")
                    runs.append(time.perf_counter() - t0)
                    assert b'"error"' not in out[:2000] or fmt == "parquet", out[:500]
                timings[fmt] = statistics.median(runs)
            theirs = sql.format(t=f"read_parquet('{files}')")
            runs = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                con.execute(theirs).fetchall()
                runs.append(time.perf_counter() - t0)
            duck = statistics.median(runs)
            if name in EXACT:
                ours_rows = [json.loads(r) for r in out_rows(url, sql)]
                assert ours_rows == [
                    [v.isoformat() if hasattr(v, "isoformat") else v for v in r]
                    for r in con.execute(theirs).fetchall()
                ], name
            print(
                f"  {name:18s} ndjson {timings['default']:6.3f} s  parquet {timings['parquet']:6.3f} s  "
                f"duckdb {duck:6.3f} s  ratio {min(timings.values()) / duck:5.2f}x"
            )
        print(f"server peak RSS {server.rss_mb()[1]:.0f} MB")
    finally:
        server.stop()
        if os.environ.get("KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
