"""dbt-altertable 0.2.13 (dbt-core 1.11, dbt-duckdb 1.11.0 macros), unchanged, against a
real `deltalite serve` over Arrow Flight SQL: the project in tests/dbt/project (a seed,
a view, a `table` model over it, incremental `merge`, `append` and `delete+insert` models, an
incremental model whose column changes type (`on_schema_change: sync_all_columns`), a timestamp
snapshot, schema and singular tests) is seeded, run and snapshotted, changed at the
source, run and snapshotted again, tested, documented (`docs generate`), fully
refreshed and re-seeded; after each step the tables' contents are read back through
altertable-flightsql and compared with what dbt's semantics say they hold.

Run by tests/flight/serve_and_run.py inside the CPython 3.13 root, with the dbt venv's
python (requirements-dbt.txt); the server's address and user come in `ALTERTABLE_*`.
The project is copied to a temporary folder (dbt writes target/ and logs/ next to it)
and runs in a fresh schema. Exit status 0 when every step holds.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from datetime import datetime
from pathlib import Path

from altertable_flightsql import Client
from dbt.cli.main import dbtRunner

PROJECT = Path(__file__).resolve().parent / "project"
CATALOG = os.environ.setdefault("ALTERTABLE_CATALOG", "lakehouse")
SCHEMA = os.environ.setdefault("DBT_SCHEMA", f"dbt_{uuid.uuid4().hex[:8]}")


def client() -> Client:
    return Client(
        username=os.environ["ALTERTABLE_USERNAME"],
        password=os.environ["ALTERTABLE_PASSWORD"],
        host=os.environ["ALTERTABLE_HOST"],
        port=int(os.environ["ALTERTABLE_PORT"]),
        tls=False,
    )


def rows(sql: str) -> list[dict]:
    with client() as c:
        return c.query(sql).read_all().to_pylist()


def execute(sql: str) -> None:
    with client() as c:
        c.execute(sql)


def table(name: str, columns: str = "*", order: str = "id") -> list[dict]:
    return rows(
        f'SELECT {columns} FROM "{CATALOG}"."{SCHEMA}"."{name}" ORDER BY {order}'
    )


def tables() -> list[str]:
    got = rows(
        "SELECT table_name FROM information_schema.tables "
        f"WHERE table_catalog = '{CATALOG}' AND table_schema = '{SCHEMA}' ORDER BY 1"
    )
    return [r["table_name"] for r in got]


def dbt(project: Path, *args: str):
    print(f"== dbt {' '.join(args)}", flush=True)
    result = dbtRunner().invoke(
        [*args, "--project-dir", str(project), "--profiles-dir", str(project)]
    )
    if not result.success:
        raise AssertionError(f"dbt {' '.join(args)} failed: {result.exception}")
    return result


def check(what: str, got, expected) -> None:
    if got != expected:
        raise AssertionError(f"{what}:\n  got      {got!r}\n  expected {expected!r}")
    print(f"ok: {what}", flush=True)


def ts(day: int, hour: int) -> datetime:
    return datetime(2024, 1, day, hour)


SEEDED = [
    {"id": 1, "name": "Alice", "created_at": ts(1, 10), "amount": 1.5},
    {"id": 2, "name": "Bob", "created_at": ts(2, 11), "amount": 2.25},
    {"id": 3, "name": "Carl", "created_at": ts(3, 12), "amount": None},
]
MODELS = [
    "inc_append",
    "inc_delete_insert",
    "inc_merge",
    "inc_sync",
    "people",
    "people_table",
    "stg_people",
]
WITH_SNAPSHOT = sorted([*MODELS, "people_snapshot"])


def leftovers() -> list[dict]:
    """dbt's tmp, backup and snapshot staging tables, in any schema of the catalog."""
    return rows(
        "SELECT table_schema, table_name FROM information_schema.tables "
        f"WHERE table_catalog = '{CATALOG}' AND (table_name LIKE '%dbt_tmp%' "
        "OR table_name LIKE '%dbt_backup%')"
    )


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="deltalite-dbt-"))
    try:
        project = work / "project"
        shutil.copytree(PROJECT, project)
        dbt(project, "seed")
        check("seed people", table("people"), SEEDED)

        dbt(project, "run")
        names = [{"id": r["id"], "name": r["name"]} for r in SEEDED]
        for model in ("inc_append", "inc_delete_insert", "inc_merge"):
            check(f"first run {model}", table(model, "id, name"), names)
        check(
            "first run people_table",
            table("people_table", "id, uname"),
            [
                {"id": 1, "uname": "ALICE"},
                {"id": 2, "uname": "BOB"},
                {"id": 3, "uname": "CARL"},
            ],
        )
        check("first run stg_people (a view)", table("stg_people"), SEEDED)
        check(
            "first run inc_sync",
            table("inc_sync", "id, code"),
            [{"id": i, "code": 10 * i} for i in (1, 2, 3)],
        )
        check("no tmp, backup or temporary tables left", tables(), MODELS)
        dbt(project, "snapshot")
        check(
            "first snapshot",
            table("people_snapshot", "id, name, dbt_valid_to IS NULL AS current"),
            [{"id": r["id"], "name": r["name"], "current": True} for r in SEEDED],
        )

        # The source changes: Bob renamed (and touched later than anyone), Dee arrives.
        execute(
            f'UPDATE "{CATALOG}"."{SCHEMA}".people SET name = \'Bobby\', '
            "created_at = TIMESTAMP '2024-01-05 08:00:00' WHERE id = 2"
        )
        execute(
            f'INSERT INTO "{CATALOG}"."{SCHEMA}".people VALUES '
            "(4, 'Dee', TIMESTAMP '2024-01-04 09:00:00', 4.0)"
        )
        dbt(project, "run", "--vars", "{codes_as_text: true}")
        changed = [
            {"id": 1, "name": "Alice"},
            {"id": 2, "name": "Bobby"},
            {"id": 3, "name": "Carl"},
            {"id": 4, "name": "Dee"},
        ]
        # merge and delete+insert take the changed row; append adds only the newer one.
        check("second run inc_merge", table("inc_merge", "id, name"), changed)
        check(
            "second run inc_delete_insert",
            table("inc_delete_insert", "id, name"),
            changed,
        )
        check(
            "second run inc_append",
            table("inc_append", "id, name", "id, name"),
            # The rows newer than what it holds: Bobby (a second row for id 2), Dee.
            [
                *names[:2],
                {"id": 2, "name": "Bobby"},
                names[2],
                {"id": 4, "name": "Dee"},
            ],
        )
        check(
            "second run people_table",
            table("people_table", "id, uname"),
            [{"id": r["id"], "uname": r["name"].upper()} for r in changed],
        )
        check(
            "second run stg_people (a view: the source as it is now)",
            table("stg_people", "id, name"),
            changed,
        )
        check(
            "second run inc_sync: code retyped to text, every row merged",
            (
                rows(
                    "SELECT data_type FROM information_schema.columns WHERE "
                    f"table_schema = '{SCHEMA}' AND table_name = 'inc_sync' "
                    "AND column_name = 'code'"
                ),
                table("inc_sync", "id, code"),
            ),
            (
                [{"data_type": "VARCHAR"}],
                [{"id": i, "code": str(10 * i)} for i in (1, 2, 3, 4)],
            ),
        )
        check("no tmp, backup or temporary tables left", tables(), WITH_SNAPSHOT)
        dbt(project, "snapshot")
        # Bob's version is closed and Bobby's opened; Dee is new; the rest unchanged.
        check(
            "second snapshot",
            table(
                "people_snapshot",
                "id, name, dbt_valid_to IS NULL AS current",
                "id, name",
            ),
            [
                {"id": 1, "name": "Alice", "current": True},
                {"id": 2, "name": "Bob", "current": False},
                {"id": 2, "name": "Bobby", "current": True},
                {"id": 3, "name": "Carl", "current": True},
                {"id": 4, "name": "Dee", "current": True},
            ],
        )
        check("no dbt staging tables anywhere", leftovers(), [])

        tested = dbt(project, "test").result.results
        check(
            "dbt test: every test ran and passed",
            sorted((r.node.name, str(r.status)) for r in tested),
            sorted(
                (name, "pass")
                for name in (
                    "no_negative_ids",
                    "not_null_people_id",
                    "not_null_people_table_id",
                    "unique_inc_merge_id",
                    "unique_people_id",
                    "unique_people_table_id",
                )
            ),
        )

        catalog = dbt(project, "docs", "generate").result
        documented = {
            node.metadata.name: list(node.columns) for node in catalog.nodes.values()
        }
        check(
            "docs generate: every relation with its columns",
            {k: documented.get(k) for k in ("people_table", "inc_merge", "people")},
            {
                "people_table": ["id", "uname", "amount"],
                "inc_merge": ["id", "name", "created_at"],
                "people": ["id", "name", "created_at", "amount"],
            },
        )

        dbt(project, "run", "--full-refresh", "--select", "inc_append")
        check("full refresh inc_append", table("inc_append", "id, name"), changed)
        check("tables at the end", tables(), WITH_SNAPSHOT)

        # A seed loaded again replaces its rows (TRUNCATE, then the CSV's rows).
        dbt(project, "seed")
        check("re-seeded people", table("people"), SEEDED)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
