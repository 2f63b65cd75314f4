"""DB-API `executemany` through ADBC: an `INSERT … VALUES (?, ?, ?)` bound to N rows, on two
servers side by side (`--baseline`, an older build, and `--bin`), runs alternating.
Prints the wall time per run and the data files each left (one per statement that
wrote), and checks both tables hold the same rows.

Usage: .venv/bin/python bench/server/executemany.py --bin target/release/deltalite
       --baseline <older release binary> [--rows 300] [--runs 3]
"""

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import adbc_driver_flightsql.dbapi as adbc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

USER, PASSWORD = "b", "b"


def run(s: ServerProcess, table: str, rows: list[tuple]) -> tuple[float, list]:
    with adbc.connect(
        s.flight, db_kwargs={"username": USER, "password": PASSWORD}
    ) as conn:
        cur = conn.cursor()
        cur.execute(f"CREATE TABLE {table} (id INT, s VARCHAR, ts TIMESTAMP)")
        conn.commit()
        t = time.perf_counter()
        cur.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", rows)
        conn.commit()
        taken = time.perf_counter() - t
        cur.execute(f"SELECT id, s, ts FROM {table} ORDER BY id")
        got = cur.fetchall()
        cur.close()
    return taken, got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    rows = [
        (i, None if i % 7 == 0 else f"it's {i}", datetime(2024, 1, 1, i % 24))
        for i in range(a.rows)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        servers = {
            label: ServerProcess(
                binary=binary,
                data=Path(tmp) / label,
                users=((USER, PASSWORD),),
                log=Path(tmp) / f"{label}.log",
                args=["--log", "warn"],
            )
            for label, binary in (("baseline", a.baseline), ("new", a.bin))
        }
        try:
            times: dict[str, list[float]] = {label: [] for label in servers}
            files: dict[str, list[int]] = {label: [] for label in servers}
            for run_no in range(a.runs):
                answers = []
                for label, s in servers.items():
                    table = f"m{run_no}"
                    taken, got = run(s, table, rows)
                    answers.append(got)
                    times[label].append(taken)
                    folder = Path(tmp) / label / "lakehouse" / "main" / table
                    files[label].append(len(list(folder.glob("*.parquet"))))
                assert answers[0] == answers[1], "the tables differ"
            print(f"executemany of {a.rows} rows (id, s, ts), {a.runs} runs")
            for label in servers:
                m = statistics.median(times[label])
                print(
                    f"  {label:8s} median {m:7.2f} s  ({m / a.rows * 1000:6.2f} ms a row)"
                    f"  data files {files[label][0]}"
                )
            b, n = (statistics.median(times[k]) for k in ("baseline", "new"))
            print(f"  baseline / new = {b / n:.1f}x")
        finally:
            for s in servers.values():
                s.stop()


if __name__ == "__main__":
    main()
