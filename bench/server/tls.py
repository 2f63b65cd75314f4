"""What TLS costs, side by side in one run (issue: operator-grade serving).

Two servers over one data root, one plain and one with `--tls-cert/--tls-key` (a
self-signed P-256 certificate made here by `openssl`), alternating run by run:

1. A full-table result of a 16M-row table: over Flight SQL (DoGet through the ADBC driver,
   `grpc://` vs `grpc+tls://`) and over HTTP `/query` as NDJSON (`http://` vs `https://`).
2. An upload: one Parquet file POSTed to `/upload?mode=append` (`http` vs `https`).

Every side reads its whole result; row counts are checked equal. Prints medians and the
TLS / plain ratio of each.

Usage: .venv/bin/python bench/server/tls.py --bin target/release/deltalite
       [--query-rows 16000000] [--upload-rows 8000000] [--runs 3]
       [--work /tmp/deltalite-tls-bench]
Needs requirements-bench.txt in the venv (the ADBC Flight SQL driver) and `openssl`.
"""

import argparse
import base64
import json
import shutil
import ssl
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as adbc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from certs import self_signed
from ingest_query import make_parquet
from server_process import ServerProcess

USER, PASSWORD = "b", "b"
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
TABLE = "lakehouse.bench.facts"


def ndjson_rows(s: ServerProcess, context) -> int:
    body = json.dumps({"statement": f"SELECT * FROM {TABLE}"}).encode()
    req = urllib.request.Request(
        f"{s.base}/query",
        data=body,
        headers={"Authorization": AUTH, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=3600, context=context) as r:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: r.read(1 << 20), b""))
    return lines - 2  # the column names and types lines


def upload(
    s: ServerProcess, context, table: str, path: Path, mode: str = "append"
) -> int:
    q = f"catalog=lakehouse&schema=bench&table={table}&mode={mode}"
    with open(path, "rb") as f:
        req = urllib.request.Request(
            f"{s.base}/upload?{q}",
            data=f,
            headers={
                "Authorization": AUTH,
                "Content-Type": "application/parquet",
                "Content-Length": str(path.stat().st_size),
            },
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=3600, context=context) as r:
            return json.loads(r.read())["rows"]


def flight_rows(conn) -> int:
    cur = conn.cursor()
    cur.execute(f"SELECT * FROM {TABLE}")
    n = cur.fetch_arrow_table().num_rows
    cur.close()
    return n


def timed(fn) -> tuple[float, int]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def pairs(plain, tls, runs: int) -> tuple[float, float]:
    """Medians of `runs` alternating runs of each; their results must agree."""
    p, t = [], []
    for _ in range(runs):
        p.append(timed(plain))
        t.append(timed(tls))
    counts = {n for _, n in p + t}
    assert len(counts) == 1, counts
    return statistics.median(x for x, _ in p), statistics.median(x for x, _ in t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--query-rows", type=int, default=16_000_000)
    ap.add_argument("--upload-rows", type=int, default=8_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/deltalite-tls-bench")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cert, key = self_signed(work)
    trusting = ssl.create_default_context(cafile=str(cert))

    def serve(name: str, args: list[str]) -> ServerProcess:
        return ServerProcess(
            binary=a.bin,
            data=work / "lake",
            users=((USER, PASSWORD),),
            log=work / f"{name}.log",
            args=["--log", "warn", *args],
        )

    plain = serve("plain", [])
    tls = serve("tls", ["--tls-cert", str(cert), "--tls-key", str(key)])
    try:
        source = work / "query.parquet"
        make_parquet(source, a.query_rows, 0, 3)
        upload(plain, None, "facts", source, mode="create")
        flight_plain = adbc.connect(
            plain.flight, db_kwargs={"username": USER, "password": PASSWORD}
        )
        flight_tls = adbc.connect(
            tls.flight,
            db_kwargs={
                "username": USER,
                "password": PASSWORD,
                adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: cert.read_text(),
            },
        )
        print(
            f"full-table result, {a.query_rows} rows (id, day, v, x), median of {a.runs}"
        )
        for name, (p, t) in {
            "flight": pairs(
                lambda: flight_rows(flight_plain),
                lambda: flight_rows(flight_tls),
                a.runs,
            ),
            "ndjson": pairs(
                lambda: ndjson_rows(plain, None),
                lambda: ndjson_rows(tls, trusting),
                a.runs,
            ),
        }.items():
            print(
                f"  {name:7s} plain {p:7.3f} s   tls {t:7.3f} s   tls / plain = {t / p:.2f}x"
            )
        flight_plain.close()
        flight_tls.close()

        up = work / "upload.parquet"
        make_parquet(up, a.upload_rows, 0, 5)
        size_mb = up.stat().st_size / 2**20
        p, t = pairs(
            lambda: upload(plain, None, "facts", up),
            lambda: upload(tls, trusting, "facts", up),
            a.runs,
        )
        print(
            f"/upload of {a.upload_rows} rows ({size_mb:.0f} MB Parquet), median of {a.runs}"
        )
        print(
            f"  upload  plain {p:7.3f} s   tls {t:7.3f} s   tls / plain = {t / p:.2f}x"
        )
        print(
            f"server peak RSS: plain {plain.rss_mb()[1]:.0f} MB, tls {tls.rss_mb()[1]:.0f} MB"
        )
    finally:
        plain.stop()
        tls.stop()


if __name__ == "__main__":
    main()
