"""What keeping a table's row order costs, two server builds side by side in one run.

Session 39 made rows read back in the order they were written (ARCHITECTURE.md, "Row
order"): no round-robin repartitions in any plan, `UPDATE` in one pass with its values
put in place, and a `MERGE` over files under 1 MiB in one `LEFT JOIN` sorted by a row
number. This times the statements those changes touch with build A and build B, each in
fresh servers, the builds alternating run by run:

- `CREATE TABLE … AS` of `--rows` rows from `range()` with an `md5` per row (a single
  partition source, which round-robin used to spread over the cores);
- `UPDATE` of 1% of a `--rows`-row table (every file rewritten);
- a `MERGE` that is not upsert-shaped on that table (files over 1 MiB: the two queries);
- the same `MERGE` and an `UPDATE` 10 times on a 10,000-row table (the ordered pass);
- `sum(length(md5(h)))` over the small table 20 times and over the large one once.

Usage: .venv/bin/python bench/server/row_order.py --a OLD_BINARY --b NEW_BINARY
       [--rows 1000000] [--runs 3]
"""

import argparse
import base64
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

USER, PASSWORD = "b", "b"


def session(s: ServerProcess):
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    def run(sql: str) -> float:
        """Seconds for `sql`, its answer read whole (an error raises)."""
        req = urllib.request.Request(
            f"{s.base}/query",
            data=json.dumps({"statement": sql}).encode(),
            headers={"Authorization": auth, "Content-Type": "application/json"},
        )
        start = time.perf_counter()
        with urllib.request.urlopen(req) as r:
            body = r.read()
        if b'"error"' in body:
            raise RuntimeError(body.decode()[-300:])
        return time.perf_counter() - start

    return run


def cases(rows: int) -> list[tuple[str, int, str]]:
    small_merge = (
        "MERGE INTO small USING (SELECT range AS id FROM range(0, 10000, 97)) s "
        "ON small.id = s.id AND small.id >= 0 WHEN MATCHED THEN UPDATE SET h = 'm'"
    )
    return [
        (
            f"CTAS {rows} rows from range() with md5",
            1,
            (
                f"CREATE OR REPLACE TABLE g AS SELECT range AS id, md5(range::VARCHAR) AS h "
                f"FROM range({rows})"
            ),
        ),
        (f"UPDATE 1% of {rows} rows", 1, "UPDATE t SET h = 'x' WHERE id % 100 = 7"),
        (
            f"general MERGE on {rows} rows",
            1,
            (
                f"MERGE INTO t USING (SELECT range AS id FROM range(0, {rows}, 97)) s "
                "ON t.id = s.id AND t.id >= 0 WHEN MATCHED THEN UPDATE SET h = 'm'"
            ),
        ),
        ("general MERGE x10, 10k rows", 10, small_merge),
        ("UPDATE x10, 10k rows", 10, "UPDATE small SET h = 'u' WHERE id % 50 = 3"),
        (
            "sum(length(md5(h))) x20, 10k rows",
            20,
            "SELECT sum(length(md5(h))) FROM small",
        ),
        (f"sum(length(md5(h))), {rows} rows", 1, "SELECT sum(length(md5(h))) FROM t"),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="the build before")
    p.add_argument("--b", required=True, help="the build after")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    builds = {"A": args.a, "B": args.b}
    timings = {k: {name: [] for name, _, _ in cases(args.rows)} for k in builds}
    for run in range(args.runs):
        order = ["A", "B"] if run % 2 == 0 else ["B", "A"]
        for key in order:
            with ServerProcess(users=((USER, PASSWORD),), binary=builds[key]) as s:
                q = session(s)
                q(
                    f"CREATE TABLE t AS SELECT range AS id, md5(range::VARCHAR) AS h "
                    f"FROM range({args.rows})"
                )
                q(
                    "CREATE TABLE small AS SELECT range AS id, md5(range::VARCHAR) AS h "
                    "FROM range(10000)"
                )
                for name, times, sql in cases(args.rows):
                    timings[key][name].append(sum(q(sql) for _ in range(times)))
    print(f"median of {args.runs}, seconds (A: {args.a}, B: {args.b})")
    for name, _, _ in cases(args.rows):
        a = statistics.median(timings["A"][name])
        b = statistics.median(timings["B"][name])
        print(f"  {name:40s} A {a:7.3f}  B {b:7.3f}  B/A {b / a:5.2f}")


if __name__ == "__main__":
    main()
