"""dlt merge load with hard deletes and a nested table: our dlt_altertable vs the real
PyPI dlt-altertable 0.2.2, both into our server (issue: SQL writes through the engine).

Workload: a merge resource `events` (primary key `id`, cursor `version` with `dedup_sort`,
bool `hard_delete` column `deleted`), each row with a nested list `tags` of two dicts (the
nested table `events__tags`). First load N rows (default 1M), then M changes (default
100k): half updates of existing keys spread over the table (a fifth of them deletes), half
new keys. Each update carries new tags, so the merge must replace every updated root's
children and drop the deleted roots' children.

Each side loads into its own fresh server process (release build), so the server's peak
RSS (VmHWM, reset before the change load through /proc/PID/clear_refs) is that side's.
Ours runs on the host (.venv-dlt, CPython 3.11); the real package runs in the CPython 3.13
root of scripts/lib/py313.sh (venv /opt/clients, pins of requirements-clients.txt), which
this script builds or reuses and mounts (needs root). The tables each side leaves are read
back over HTTP and must hold the same rows.

    .venv-dlt/bin/python bench/dlt_merge_deletes.py --bin target/release/deltalite \\
        [--rows 1000000] [--changes 100000] [--root /work/py313]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USER, PASSWORD = "bench", "bench"
REAL_PYTHON = "/opt/clients/bin/python"


# -- one side's load (runs in the side's own Python) --------------------------------


def rows(start: int, count: int, version: int, deletes_every: int = 0):
    for i in range(start, start + count):
        yield {
            "id": i,
            "version": version,
            "name": f"name-{i}-{version}",
            "amount": float(i % 1000) * version,
            "deleted": bool(deletes_every) and i % deletes_every == 0,
            "tags": [{"k": f"k{i % 7}", "v": version}, {"k": "all", "v": i % 5}],
        }


def changes(total: int, count: int):
    """Half updates spread over the existing keys (every fifth a delete), half new keys."""
    half = count // 2
    stride = max(total // half, 1)
    for n in range(half):
        row = next(rows(n * stride, 1, 2))
        row["deleted"] = n % 5 == 0
        yield row
    yield from rows(total, count - half, 2)


def run_side(a: argparse.Namespace) -> dict:
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")
    import dlt

    from dlt_altertable import altertable

    common = {
        "host": a.host,
        "port": a.port,
        "tls": False,
        "catalog": "lakehouse",
        "username": USER,
        "password": PASSWORD,
        "max_table_nesting": 2,
    }
    if a.side == "ours":
        destination = altertable(dataset_name="bench", retry_backoff=0.0, **common)
    else:  # 0.2.2 refuses dataset_name= and takes the pipeline's
        destination = altertable(**common)

    @dlt.resource(
        name="events",
        write_disposition="merge",
        primary_key="id",
        columns={
            "version": {"dedup_sort": "desc"},
            "deleted": {"hard_delete": True, "data_type": "bool"},
        },
    )
    def events(items):
        yield from items

    pipeline = dlt.pipeline(
        pipeline_name=f"bench_{a.side}",
        pipelines_dir=a.pipelines_dir,
        destination=destination,
        dataset_name="bench",
    )
    items = rows(0, a.rows, 1) if a.step == "initial" else changes(a.rows, a.changes)
    started = time.perf_counter()
    pipeline.run(events(items))
    return {
        "wall_s": round(time.perf_counter() - started, 2),
        "client_peak_rss_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        ),
    }


# -- the orchestrator (host) ----------------------------------------------------------


def query(base: str, statement: str) -> list:
    req = urllib.request.Request(
        f"{base}/query",
        data=json.dumps({"statement": statement}).encode(),
        headers={
            "Authorization": "Basic "
            + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
            "Content-Type": "application/json",
        },
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        lines = [json.loads(line) for line in r.read().splitlines() if line]
    for line in lines:
        if isinstance(line, dict) and "error" in line:
            raise RuntimeError(f"{statement}: {line['error']}")
    return lines[2:]


def py313(root: Path, *command: str) -> list[str]:
    shell = 'source "$0/scripts/lib/py313.sh" && "$1" "${@:2}"'
    return ["bash", "-c", shell, str(REPO), *command]


def side(a: argparse.Namespace, name: str, work: Path) -> dict:
    sys.path.insert(0, str(REPO / "harness"))
    from server_process import ServerProcess

    server = ServerProcess(
        binary=a.bin,
        data=work / f"lake_{name}",
        users=((USER, PASSWORD),),
        log=work / f"server_{name}.log",
        args=["--log", a.server_log, "--query-memory-mb", str(a.query_memory_mb)],
    )
    peak = [0.0]

    def watch() -> None:
        while server.proc.poll() is None:
            peak[0] = max(peak[0], server.rss_mb()[1])
            time.sleep(0.2)

    try:
        threading.Thread(target=watch, daemon=True).start()
        if name == "ours":
            pipelines = tempfile.mkdtemp(prefix="dlt-bench-ours-", dir=work)
        else:  # a folder of the root, as the root sees it
            host = Path(tempfile.mkdtemp(prefix="dlt-bench-real-", dir=a.root / "tmp"))
            pipelines = "/tmp/" + host.name
        host_, port = server.addr
        out: dict = {}
        for step in ("initial", "changes"):
            if step == "changes":
                # The change load's own peak: VmHWM starts again from the current RSS.
                Path(f"/proc/{server.pid}/clear_refs").write_text("5")
                peak[0] = 0.0
            args = [
                str(Path(__file__).resolve()),
                "--side", name, "--step", step, "--host", host_, "--port", str(port),
                "--rows", str(a.rows), "--changes", str(a.changes),
                "--pipelines-dir", pipelines,
            ]  # fmt: skip
            if name == "ours":
                command = [a.ours_python, *args]
            else:
                command = py313(a.root, "py313_run", str(a.root), REAL_PYTHON, *args)
            done = subprocess.run(
                command, capture_output=True, text=True, check=False, cwd=REPO
            )
            lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
            if done.returncode != 0 or not lines:
                # The cause comes before the failed statement's SQL: keep both ends.
                text = f"{name} {step}: {done.stdout}\n{done.stderr}"
                if len(text) > 8000:
                    text = f"{text[:4000]}\n…\n{text[-4000:]}"
                raise RuntimeError(text)
            result = json.loads(lines[-1])
            out[f"{step}_s"] = result["wall_s"]
            out[f"{step}_client_peak_rss_mb"] = result["client_peak_rss_mb"]
            time.sleep(0.5)  # the watcher's last sample
            out[f"{step}_server_peak_rss_mb"] = round(peak[0], 1)
        out["tables"] = {
            "events": query(
                server.base,
                "SELECT count(*), sum(version), count(*) FILTER (WHERE deleted) "
                "FROM lakehouse.bench.events",
            )[0],
            # 0.2.2 names nested tables with dlt's `direct` naming convention
            # (`events▶tags`); ours keeps dlt's default `snake_case` (`events__tags`).
            "tags": query(
                server.base,
                "SELECT count(*), sum(v), count(DISTINCT _dlt_parent_id) "
                f'FROM lakehouse.bench."{"events__tags" if name == "ours" else "events▶tags"}"',
            )[0],
        }
        return out
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/deltalite")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--root", type=Path, default=Path("/work/py313"))
    ap.add_argument(
        "--keep-work",
        action="store_true",
        help="leave --work (servers' logs and data) behind",
    )
    ap.add_argument(
        "--server-log",
        default="warn",
        help="the servers' --log filter; deltalite_server=debug logs each statement's time",
    )
    ap.add_argument(
        "--query-memory-mb",
        type=int,
        default=1024,
        help="the servers' query memory pool (their default: 1024); a smaller pool finds at"
        " a small scale what the default finds at a large one",
    )
    ap.add_argument("--ours-python", default=str(REPO / ".venv-dlt" / "bin" / "python"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/deltalite-dlt-bench"))
    ap.add_argument(
        "--sides",
        default="ours,real",
        help="comma-separated: ours, real (default both)",
    )
    ap.add_argument("--side", choices=("ours", "real"), help=argparse.SUPPRESS)
    ap.add_argument("--step", choices=("initial", "changes"), help=argparse.SUPPRESS)
    ap.add_argument("--host", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pipelines-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.side:
        print(json.dumps(run_side(a)))
        return 0
    a.root = a.root.resolve()
    # Unmount afterwards only what this run mounted (another user may share the root).
    binds = [a.root / "proc", a.root / "dev", a.root / str(REPO).lstrip("/")]
    ours = [
        m
        for m in binds
        if subprocess.run(["mountpoint", "-q", str(m)], check=False).returncode
    ]
    subprocess.run(py313(a.root, "py313_root", str(a.root)), check=True)
    subprocess.run(
        py313(
            a.root, "py313_venv", str(a.root), "/opt/clients",
            str(REPO / "requirements-clients.txt"),
        ),
        check=True,
    )  # fmt: skip
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    try:
        results = {name: side(a, name, a.work) for name in a.sides.split(",")}
    finally:
        for m in reversed(ours):
            subprocess.run(["umount", "-R", str(m)], check=False)
        if not a.keep_work:
            shutil.rmtree(a.work, ignore_errors=True)
    same = True
    if {"ours", "real"} <= set(results):
        same = results["ours"]["tables"] == results["real"]["tables"]
        results["same_tables"] = same
        results["changes_ours_over_real"] = round(
            results["ours"]["changes_s"] / results["real"]["changes_s"], 2
        )
    print(json.dumps({"rows": a.rows, "changes": a.changes, **results}, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
