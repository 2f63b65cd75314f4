"""A whole dbt run with many tables beside the project's, side by side in one run.

dbt-altertable 0.2.13, unchanged, runs tests/dbt/run_dbt.py (seed, run, snapshot, test,
`docs generate`, `--full-refresh`, each checked) over Arrow Flight SQL against two
servers: `--baseline`, a build whose catalog listings opened every granted table, and
`--bin`. The catalog also holds N tables (5 commits each, as small loads leave them) in
a schema of their own, as a dlt pipeline's raw tables sit beside the dbt project's
models; the same data for both servers (copied). Runs alternate; prints the wall time of
each and the ratio.

Needs the CPython 3.13 root with the dbt venv that scripts/test-flight.sh builds (run it
once); run as root (chroot).

Usage: .venv/bin/python bench/server/dbt_catalog.py --bin target/release/deltalite
       --baseline <older release binary> [--tables 320] [--runs 3] [--root /work/py313]
"""

import argparse
import base64
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "harness"))
sys.path.insert(0, str(REPO / "tests" / "flight"))
from serve_and_run import USER, in_root
from server_process import ServerProcess

COMMITS = 5


def sql(s: ServerProcess, statement: str) -> None:
    auth = base64.b64encode(f"{USER[0]}:{USER[1]}".encode()).decode()
    req = urllib.request.Request(
        f"{s.base}/query",
        data=json.dumps({"statement": statement}).encode(),
        headers={"Authorization": f"Basic {auth}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        body = r.read().decode()
    assert '"error"' not in body, (statement, body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--tables", type=int, default=320)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", default="/work/py313")
    a = ap.parse_args()
    root = str(Path(a.root).resolve())
    lib = str(REPO / "scripts/lib/py313.sh")
    # The root's mount points that are not mounted yet: ours to undo.
    points = subprocess.run(
        ["bash", "-c", 'source "$0" && _py313_mounts "$1"', lib, root],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    ours = [
        p
        for p in points
        if subprocess.run(["mountpoint", "-q", p], check=False).returncode != 0
    ]
    subprocess.run(
        ["bash", "-c", 'source "$0" && _py313_mount "$1"', lib, root], check=True
    )
    # Inside the root's /tmp: run_dbt.py reads the data root there.
    tmp = Path(tempfile.mkdtemp(prefix="deltalite-dbt-bench-", dir=f"{root}/tmp"))
    try:
        seed = tmp / "seed"
        t0 = time.perf_counter()
        with ServerProcess(
            binary=a.bin, data=seed, users=(USER,), log=tmp / "seed.log"
        ) as s:
            sql(s, "CREATE SCHEMA lakehouse.raw")
            for t in range(a.tables):
                sql(
                    s,
                    f"CREATE TABLE lakehouse.raw.t{t} (id BIGINT, v VARCHAR, x DOUBLE)",
                )
                for c in range(COMMITS - 1):
                    sql(
                        s, f"INSERT INTO lakehouse.raw.t{t} VALUES ({c}, 'v{c}', {c}.5)"
                    )
        print(
            f"{a.tables} tables x {COMMITS} commits in lakehouse.raw: built in {time.perf_counter() - t0:.0f} s"
        )
        times: dict[str, list[float]] = {"baseline": [], "new": []}
        for run in range(a.runs):
            for label, binary in (("baseline", a.baseline), ("new", a.bin)):
                data = tmp / f"{label}-{run}"
                shutil.copytree(seed, data)
                with ServerProcess(
                    binary=binary,
                    data=data,
                    users=(USER,),
                    log=tmp / f"{label}-{run}.log",
                ) as s:
                    t = time.perf_counter()
                    status = in_root(
                        root,
                        s,
                        str(REPO),
                        ["/opt/dbt/bin/python", "tests/dbt/run_dbt.py"],
                    )
                    took = time.perf_counter() - t
                assert status == 0, f"{label}: run_dbt.py exited {status}"
                times[label].append(took)
                print(f"  run {run + 1} {label:8s} {took:6.1f} s", flush=True)
        b, n = statistics.median(times["baseline"]), statistics.median(times["new"])
        print(f"dbt project, {a.tables} other tables, median of {a.runs}")
        print(f"  baseline {b:6.1f} s   new {n:6.1f} s   baseline / new = {b / n:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in ours:
            subprocess.run(["umount", "-R", p], check=False)


if __name__ == "__main__":
    main()
