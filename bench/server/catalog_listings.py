"""What pruning catalog listings by name saves dbt, side by side in one run.

dbt-altertable asks for one relation's columns (`get_columns_in_relation`) and one
schema's relations (`list_relations_without_caching`) through `duckdb_columns()`,
`duckdb_tables()` and `duckdb_views()` with filters on names, many times per run; `dbt
docs generate` lists every column. ADBC's `adbc_get_objects(depth="all")` (Flight SQL
`GetTables` with schemas, what BI tools and ADBC users list a catalog with) opens every
table too. Two servers over one data root: `--baseline`, an older build, and `--bin`. A catalog of N tables in
schema `raw` (5 commits each, as small loads leave them) and N/10 views in `marts`, for N
in 20, 80, 320; the queries alternate between the servers and every answer is checked
equal. Prints medians (ms), the ratio, and how each grows with N.

Usage: .venv/bin/python bench/server/catalog_listings.py --bin target/release/deltalite
       --baseline <older release binary> [--runs 15] [--work /tmp/deltalite-catalog-bench]
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
from kept_tables import PASSWORD, USER, sql
from server_process import ServerProcess

SIZES = (20, 80, 320)
COMMITS = 5

# The SQL dbt-altertable 0.2.13's macros render (adapters.sql), for table t7 and schema marts.
GET_COLUMNS = """select column_name, data_type, cast(null as integer) as character_maximum_length,
  cast(null as integer) as numeric_precision, cast(null as integer) as numeric_scale
from duckdb_columns() where table_name = 't7' and lower(schema_name) = lower('raw')
  and lower(database_name) = lower('lakehouse') order by column_index"""
LIST_RELATIONS = """select 'lakehouse' as database, table_name as name, schema_name as schema,
  'table' as type from duckdb_tables()
where lower(schema_name) = 'marts' and lower(database_name) = 'lakehouse'
union all
select 'lakehouse' as database, view_name as name, schema_name as schema, 'view' as type
from duckdb_views() where lower(schema_name) = 'marts' and lower(database_name) = 'lakehouse'
order by name"""
ALL_COLUMNS = "select count(*), count(distinct table_name) from duckdb_columns()"
QUERIES = (
    ("get_columns", GET_COLUMNS),
    ("list_relations", LIST_RELATIONS),
    ("all columns", ALL_COLUMNS),
    ("adbc get_objects", None),
)


def get_objects(s: ServerProcess) -> list:
    """Every catalog, schema, table and column over Flight SQL, as ADBC lists them."""
    with adbc.connect(
        s.flight, db_kwargs={"username": USER, "password": PASSWORD}
    ) as conn:
        return conn.adbc_get_objects(depth="all").read_all().to_pylist()


def build(s: ServerProcess, n: int) -> None:
    sql(s, f"CREATE SCHEMA lakehouse.raw{n}")
    sql(s, f"CREATE SCHEMA lakehouse.marts{n}")
    for t in range(n):
        sql(s, f"CREATE TABLE lakehouse.raw{n}.t{t} (id BIGINT, v VARCHAR, x DOUBLE)")
        for c in range(COMMITS - 1):
            sql(s, f"INSERT INTO lakehouse.raw{n}.t{t} VALUES ({c}, 'v{c}', {c}.5)")
    for v in range(n // 10):
        sql(
            s,
            f"CREATE VIEW lakehouse.marts{n}.v{v} AS SELECT id, v FROM lakehouse.raw{n}.t{v}",
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--work", default="/tmp/deltalite-catalog-bench")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    medians: dict[tuple[str, str, int], float] = {}
    for n in SIZES:
        # A catalog of its own per size: listings see every schema of the catalog.
        data = work / f"lake{n}"

        def server(
            name: str, binary: str, data: Path = data, n: int = n
        ) -> ServerProcess:
            return ServerProcess(
                binary=binary,
                data=data,
                users=((USER, PASSWORD),),
                log=work / f"{name}{n}.log",
                args=["--log", "warn"],
            )

        base, new = server("baseline", a.baseline), server("new", a.bin)
        try:
            t0 = time.perf_counter()
            build(new, n)
            print(
                f"{n} tables x {COMMITS} commits, {n // 10} views: built in {time.perf_counter() - t0:.0f} s"
            )
            for name, q in QUERIES:
                if q is None:
                    ask = get_objects
                else:
                    q = q.replace("'raw'", f"'raw{n}'")
                    q = q.replace("'marts'", f"'marts{n}'")

                    def ask(s: ServerProcess, q: str = q) -> list:
                        return sql(s, q)

                times: dict[str, list[float]] = {"baseline": [], "new": []}
                for _ in range(a.runs):
                    answers = []
                    for label, s in (("baseline", base), ("new", new)):
                        t = time.perf_counter()
                        answers.append(ask(s))
                        times[label].append(time.perf_counter() - t)
                    assert answers[0] == answers[1], (name, answers)
                for label, taken in times.items():
                    medians[(name, label, n)] = statistics.median(taken) * 1000
                b, w = medians[(name, "baseline", n)], medians[(name, "new", n)]
                print(
                    f"  {name:16s} baseline {b:8.1f} ms   new {w:7.1f} ms   baseline / new = {b / w:6.1f}x"
                )
        finally:
            base.stop()
            new.stop()
    print(f"growth from {SIZES[0]} to {SIZES[-1]} tables (x{SIZES[-1] // SIZES[0]}):")
    for name, _ in QUERIES:
        for label in ("baseline", "new"):
            g = medians[(name, label, SIZES[-1])] / medians[(name, label, SIZES[0])]
            print(f"  {name:16s} {label:8s} x{g:.1f}")


if __name__ == "__main__":
    main()
