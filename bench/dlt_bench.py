"""dlt merge benchmark: the altertable destination (deltalite server) vs dlt's filesystem
destination with table_format="delta" on a local folder.

Workload: a merge resource with primary_key + dedup_sort desc; first load N rows (default 1M),
then M changed rows (default 100k: half updates of existing keys, half new keys).
Each side runs in its own subprocess so that peak RSS (ru_maxrss) is per destination; the
server's own peak RSS is read from /proc while it runs.

    python bench/dlt_bench.py [--rows 1000000] [--changes 100000] [--bin target/release/deltalite]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow as pa

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness")
)
from server_process import ServerProcess


def make_batch(start: int, count: int, version: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table(
        {
            "id": ids,
            "name": pa.array(
                [f"name-{i}-{version}" for i in range(start, start + count)]
            ),
            "amount": pa.array(
                [float(i % 1000) * version for i in range(start, start + count)]
            ),
            "updated_at": pa.array([version] * count, pa.int64()),
        }
    )


def run_side(side: str, rows: int, changes: int, workdir: str, url: str | None) -> dict:
    import dlt

    @dlt.resource(
        name="bench",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
        columns={"updated_at": {"dedup_sort": "desc"}},
    )
    def bench(table):
        chunk = 100_000
        for offset in range(0, table.num_rows, chunk):
            yield table.slice(offset, chunk)

    if side == "altertable":
        from urllib.parse import urlparse

        from dlt_altertable import altertable

        u = urlparse(url)
        destination = altertable(
            host=u.hostname,
            port=u.port,
            tls=False,
            catalog="lakehouse",
            dataset_name="bench",
            username="bench",
            password="bench",
        )
        kwargs = {}
    else:
        destination = dlt.destinations.filesystem(os.path.join(workdir, "delta"))
        kwargs = {"table_format": "delta"}
    pipeline = dlt.pipeline(
        pipeline_name=f"bench_{side}",
        pipelines_dir=os.path.join(workdir, "pipelines"),
        destination=destination,
        dataset_name="bench",
    )
    timings = {}
    start = time.perf_counter()
    pipeline.run(bench(make_batch(0, rows, 1)), **kwargs)
    timings["initial_s"] = round(time.perf_counter() - start, 2)
    half = changes // 2
    changed = pa.concat_tables(
        [make_batch(rows - half, half, 2), make_batch(rows, changes - half, 2)]
    )
    start = time.perf_counter()
    pipeline.run(bench(changed), **kwargs)
    timings["changes_s"] = round(time.perf_counter() - start, 2)
    if side == "altertable":
        with pipeline.sql_client() as client:
            count = client.execute_sql(
                "SELECT count(*), sum(CASE WHEN updated_at = 2 THEN 1 ELSE 0 END) FROM bench"
            )[0]
    else:
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        table = DeltaTable(
            os.path.join(workdir, "delta", "bench", "bench")
        ).to_pyarrow_table(columns=["updated_at"])
        count = (table.num_rows, pc.sum(pc.equal(table["updated_at"], 2)).as_py())
    timings["rows"] = int(count[0])
    timings["updated_rows"] = int(count[1])
    timings["client_peak_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    return timings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument(
        "--bin", default=os.environ.get("DELTALITE_BIN", "target/release/deltalite")
    )
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.side:
        print(
            json.dumps(
                run_side(args.side, args.rows, args.changes, args.workdir, args.url)
            )
        )
        return 0

    results = {}
    root = tempfile.mkdtemp(prefix="dlt-bench-")
    try:
        # altertable: start the server, run the client in a subprocess
        server = ServerProcess(
            binary=args.bin,
            data=os.path.join(root, "lake"),
            users=(("bench", "bench"),),
            log=os.path.join(root, "server.log"),
        )
        server_peak = [0.0]

        def watch() -> None:
            while server.proc.poll() is None:
                server_peak[0] = max(server_peak[0], server.rss_mb()[1])
                time.sleep(0.2)

        threading.Thread(target=watch, daemon=True).start()
        url = server.base
        for side in ("altertable", "filesystem_delta"):
            workdir = os.path.join(root, side)
            os.makedirs(workdir)
            start = time.perf_counter()
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--side",
                    side,
                    "--rows",
                    str(args.rows),
                    "--changes",
                    str(args.changes),
                    "--workdir",
                    workdir,
                    "--url",
                    url,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                print(out.stderr[-4000:], file=sys.stderr)
                return 1
            result = json.loads(out.stdout.strip().splitlines()[-1])
            result["total_wall_s"] = round(time.perf_counter() - start, 2)
            if side == "altertable":
                result["server_peak_rss_mb"] = server.rss_mb()[1] or server_peak[0]
            results[side] = result
        server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"rows": args.rows, "changes": args.changes, **results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
