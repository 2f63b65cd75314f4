"""Does the server's RSS follow the requests or the tables? Appends 1,000 small Parquet
files to one table in four phases of 250, and after each phase runs 300 aggregate queries
over it, printing the server's RSS after each step. A leak per request would grow during
the query steps; table state grows with the appends.

Usage: .venv/bin/python correctness/soak/rss_probe.py --bin target/release/deltalite
"""

import argparse
import io
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

AUTH = ("probe", "probe")
TABLE = "catalog=lakehouse&schema=main&table=t"


def parquet_body(i: int) -> bytes:
    t = pa.table(
        {
            "id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
            "v": pa.array([float(i)] * 100),
        }
    )
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    server = ServerProcess(
        binary=a.bin,
        data=work / "lake",
        users=(AUTH,),
        log=work / "server.log",
        args=["--log", "warn"],
    )
    http = requests.Session()
    http.auth = AUTH
    try:
        print(f"start                      RSS {server.rss_mb()[0]:6.0f} MB")
        for phase in range(4):
            for i in range(250):
                n = phase * 250 + i
                mode = "create" if n == 0 else "append"
                r = http.post(
                    f"{server.base}/upload?{TABLE}&mode={mode}",
                    data=parquet_body(n),
                    headers={"Content-Type": "application/octet-stream"},
                )
                r.raise_for_status()
            print(
                f"after {250 * (phase + 1):4} appends          RSS {server.rss_mb()[0]:6.0f} MB"
            )
            for _ in range(300):
                r = http.post(
                    f"{server.base}/query",
                    json={"statement": "SELECT count(*), sum(v) FROM lakehouse.main.t"},
                )
                r.raise_for_status()
            print(f"  after 300 more queries   RSS {server.rss_mb()[0]:6.0f} MB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
