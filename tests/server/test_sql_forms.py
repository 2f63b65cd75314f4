"""The DuckDB statement forms Altertable's clients send, one by one against a real server,
with the exact answer and the state left behind (the random differential coverage is in
`test_sql_oracle.py`)."""

from __future__ import annotations

import datetime
import itertools
import json
import random
import re
from pathlib import Path

import duckdb
import pytest
from conftest import Client, SqlError
from deltalake import DeltaTable
from server_process import ServerProcess

_names = itertools.count()


def in_both(client, setup, schema):
    """Run each statement of `setup` (`{s}` for the schema) in our server and in a fresh
    DuckDB, where the schema is `f`; the DuckDB connection."""
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    for sql in setup:
        client.query(sql.format(s=schema))
        duck.execute(sql.format(s="f"))
    return duck


def assert_refused(client, cases):
    """Each statement of `cases`, `(sql, message)` pairs, fails with exactly its message."""
    for sql, message in cases:
        with pytest.raises(SqlError) as e:
            client.query(sql)
        assert e.value.message == message, sql


@pytest.fixture
def schema(client) -> str:
    name = f"f{next(_names)}"
    client.query(f"CREATE SCHEMA lakehouse.{name}")
    return f"lakehouse.{name}"


def table_dir(server, schema: str, table: str) -> Path:
    catalog, name = schema.split(".")
    return Path(server.data) / catalog / name / table


def commits(server, schema: str, table: str) -> list[list[dict]]:
    log = table_dir(server, schema, table) / "_delta_log"
    return [
        [json.loads(line) for line in f.read_text().splitlines() if line]
        for f in sorted(log.glob("*.json"))
    ]


def test_dlt_merge_script_runs_as_one_request(client, server, schema):
    """dlt-altertable 0.2.2's staged merge script (recorded), verbatim but for names."""
    s = schema
    stg = f"{schema}_stg"
    client.query(f"CREATE SCHEMA {stg}")
    client.query(
        f'CREATE TABLE {s}."orders" ("id" BIGINT, "updated" BIGINT, "deleted" BOOLEAN, '
        f'"_dlt_load_id" VARCHAR, "_dlt_id" VARCHAR); '
        f'CREATE TABLE {s}."_dlt_loads" ("load_id" VARCHAR, "schema_name" VARCHAR, '
        f'"status" BIGINT, "inserted_at" TIMESTAMP WITH TIME ZONE, "schema_version_hash" VARCHAR); '
        f"INSERT INTO {s}.\"orders\" VALUES (1, 1, false, 'l0', 'a'), (2, 5, false, 'l0', 'b'), "
        f"(3, 1, false, 'l0', 'c')"
    )
    client.query(
        f'CREATE TABLE {stg}."_dlt_file_x" AS SELECT * FROM (VALUES '
        f"(1, 2, false, 'l1', 'a1'), (2, 4, false, 'l1', 'b1'), (3, 3, true, 'l1', 'c1'), "
        f'(4, 1, false, \'l1\', \'d1\')) AS v("id", "updated", "deleted", "_dlt_load_id", "_dlt_id")'
    )
    script = f"""BEGIN TRANSACTION;
SELECT CASE WHEN EXISTS (SELECT 1 FROM {s}."_dlt_loads" WHERE load_id = E'l1' AND status = 0) THEN error('Load already committed') ELSE TRUE END;
CREATE OR REPLACE TABLE {stg}."orders" AS SELECT * FROM (SELECT * FROM {stg}."_dlt_file_x") QUALIFY row_number() OVER (PARTITION BY "id" ORDER BY "updated" DESC NULLS LAST) = 1;
SELECT CASE WHEN count(*) = count(DISTINCT row("id")) THEN TRUE ELSE error(E'Table orders: nested upsert requires one row per primary key per load.') END FROM {stg}."orders";
DELETE FROM {stg}."orders" AS s WHERE EXISTS (SELECT 1 FROM {s}."orders" AS d WHERE s."id" = d."id" AND NOT ((s."updated" > d."updated" OR (d."updated" IS NULL AND s."updated" IS NOT NULL)) IS TRUE));
                MERGE INTO {s}."orders" d USING {stg}."orders" s
                ON d."id" = s."id"
                WHEN MATCHED
                    THEN UPDATE SET "id" = s."id", "updated" = s."updated", "deleted" = s."deleted", "_dlt_load_id" = s."_dlt_load_id", "_dlt_id" = s."_dlt_id"
                WHEN NOT MATCHED
                    THEN INSERT ("id", "updated", "deleted", "_dlt_load_id", "_dlt_id") VALUES (s."id", s."updated", s."deleted", s."_dlt_load_id", s."_dlt_id");
DELETE FROM {s}."orders" WHERE ("id") IN (SELECT "id" FROM {stg}."orders" WHERE "deleted" = True);
INSERT INTO {s}."_dlt_loads" ("load_id", "schema_name", "status", "inserted_at", "schema_version_hash") VALUES (E'l1', E'rec', 0, '2026-12-01T04:21:04.849823+00:00', E'h');
COMMIT;"""
    client.query(script)
    assert client.rows(
        f'SELECT "id", "updated", "_dlt_id" FROM {s}."orders" ORDER BY 1'
    ) == [
        (1, 2, "a1"),  # newer: updated
        (2, 5, "b"),  # older staging row dropped by the cursor filter
        (4, 1, "d1"),  # inserted; 3 was newer and deleted
    ]
    # Run again: the receipt check refuses, nothing changes.
    with pytest.raises(SqlError) as e:
        client.query(script)
    assert e.value.message == "Invalid Input Error: Load already committed"
    assert client.rows(f'SELECT count(*) FROM {s}."orders"') == [(3,)]


def test_merge_by_name_is_an_upsert_commit(client, server, schema):
    """dbt-duckdb's incremental merge; the commit is the engine's upsert."""
    client.query(
        f"CREATE TABLE {schema}.inc (id INT, name VARCHAR, n INT); "
        f"INSERT INTO {schema}.inc VALUES (1, 'a', 1), (2, 'b', 2)"
    )
    client.query(
        f"CREATE TABLE {schema}.tmp AS SELECT * FROM (VALUES (2, 'B', 20), (3, 'C', 30)) "
        "AS v(id, name, n)"
    )
    out = client.rows(
        f"MERGE INTO {schema}.inc AS DBT_INTERNAL_DEST USING {schema}.tmp AS DBT_INTERNAL_SOURCE "
        "ON (DBT_INTERNAL_SOURCE.id = DBT_INTERNAL_DEST.id) "
        "WHEN MATCHED THEN UPDATE BY NAME WHEN NOT MATCHED THEN INSERT BY NAME"
    )
    assert out == [(2,)]
    assert client.rows(f"SELECT * FROM {schema}.inc ORDER BY id") == [
        (1, "a", 1),
        (2, "B", 20),
        (3, "C", 30),
    ]
    last = commits(server, schema, "inc")[-1]
    info = next(a["commitInfo"] for a in last if "commitInfo" in a)
    assert info.get("deltalite.operation") == "merge"


def test_cardinality_violation_changes_nothing(client, server, schema):
    client.query(
        f"CREATE TABLE {schema}.t (k INT, v INT); INSERT INTO {schema}.t VALUES (1, 1)"
    )
    before = len(commits(server, schema, "t"))
    with pytest.raises(SqlError) as e:
        client.query(
            f"MERGE INTO {schema}.t AS d USING (SELECT 1 AS k, 2 AS v UNION ALL SELECT 1, 3) "
            "AS s ON d.k = s.k WHEN MATCHED THEN UPDATE SET v = s.v"
        )
    assert e.value.message == (
        'Invalid Input Error: MERGE INTO "t": a target row matches more than one source row '
        "that would change it"
    )
    assert len(commits(server, schema, "t")) == before
    assert client.rows(f"SELECT * FROM {schema}.t") == [(1, 1)]


def test_on_conflict_matches_duckdb(client, schema):
    duck = duckdb.connect()
    duck.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, w VARCHAR)")
    client.query(f"CREATE TABLE {schema}.t (k INT, v INT, w VARCHAR)")
    for statement in [
        "INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')",
        (
            "INSERT INTO {t} VALUES (2, 20, 'bb'), (3, 30, 'c') "
            "ON CONFLICT (k) DO UPDATE SET v = v + EXCLUDED.v, w = EXCLUDED.w"
        ),
        "INSERT INTO {t} (k, v) VALUES (3, 300), (4, 400) ON CONFLICT (k) DO NOTHING",
        (
            "INSERT INTO {t} VALUES (1, 5, 'z') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v "
            "WHERE v > 100"
        ),
    ]:
        ours = client.rows(statement.format(t=f"{schema}.t"))
        theirs = duck.execute(statement.format(t="t")).fetchall()
        assert ours == theirs, statement
        assert (
            client.rows(f"SELECT * FROM {schema}.t ORDER BY k")
            == duck.execute("SELECT * FROM t ORDER BY k").fetchall()
        )


def test_comments_are_stored_and_shown(client, server, schema):
    client.query(f"CREATE TABLE {schema}.c (id INT, name VARCHAR)")
    before = len(commits(server, schema, "c"))
    client.query(
        f"BEGIN TRANSACTION; COMMENT ON TABLE {schema}.c IS E'Created by DLT'; "
        f"COMMENT ON COLUMN {schema}.c.id IS 'the key'; COMMIT;"
    )
    client.query(
        f"comment on column {schema}.c.name is $dbt_comment_literal_block$It's a "
        "name$dbt_comment_literal_block$"
    )
    name = schema.split(".")[1]
    assert client.rows(
        "SELECT column_name, column_comment FROM information_schema.columns "
        f"WHERE table_schema = '{name}' AND table_name = 'c' ORDER BY ordinal_position"
    ) == [("id", "the key"), ("name", "It's a name")]
    assert client.rows(
        "SELECT table_comment FROM information_schema.tables "
        f"WHERE table_schema = '{name}' AND table_name = 'c'"
    ) == [("Created by DLT",)]
    assert len(commits(server, schema, "c")) == before + 3
    # The same comment again (dlt re-sends them): no new commit.
    client.query(f"COMMENT ON COLUMN {schema}.c.id IS 'the key'")
    assert len(commits(server, schema, "c")) == before + 3
    # Other readers see the comment as the field's metadata.
    field = DeltaTable(str(table_dir(server, schema, "c"))).schema().fields[0]
    assert field.metadata.get("comment") == "the key"


def test_a_view_keeps_its_comment_until_replaced(client, server, schema):
    """dbt's `persist_docs` for a view model: `COMMENT ON VIEW`, listed by
    `duckdb_views()` (dbt-altertable's catalog reads it there), stored (a second server
    over the same data lists it) and kept through a rename, cleared by `NULL`, dropped when the view is replaced (as in DuckDB)."""
    name = schema.split(".")[1]
    client.query(f"CREATE TABLE {schema}.vt (a INT)")
    client.query(f"CREATE VIEW {schema}.v AS SELECT a FROM {schema}.vt")
    client.query(f"COMMENT ON VIEW {schema}.v IS $c$the view's comment$c$")

    def listed(view="v", by=client):
        return by.rows(
            "SELECT comment FROM duckdb_views() "
            f"WHERE schema_name = '{name}' AND view_name = '{view}'"
        )

    assert listed() == [("the view's comment",)]
    with ServerProcess(data=server.data) as second:
        assert listed(by=Client(second)) == [("the view's comment",)]
    client.query(f"ALTER VIEW {schema}.v RENAME TO w")
    assert listed("w") == [("the view's comment",)]
    client.query(f"COMMENT ON VIEW {schema}.w IS NULL")
    assert listed("w") == [(None,)]
    client.query(f"COMMENT ON VIEW {schema}.w IS 'again'")
    client.query(
        f"CREATE OR REPLACE VIEW {schema}.w AS SELECT a + 1 AS b FROM {schema}.vt"
    )
    assert listed("w") == [(None,)]
    with pytest.raises(SqlError) as e:
        client.query(f"COMMENT ON VIEW {schema}.nope IS 'x'")
    assert e.value.message == "Catalog Error: View with name nope does not exist!"
    assert listed("nope") == []


def test_partition_ddl_lays_out_the_table(client, server, schema):
    client.query(
        f"CREATE TABLE {schema}.m (region VARCHAR, ts TIMESTAMP, id INT) "
        "PARTITIONED BY (region, month(ts))"
    )
    path = str(table_dir(server, schema, "m"))
    assert DeltaTable(path).metadata().partition_columns == ["region"]
    client.query(
        f"INSERT INTO {schema}.m VALUES ('eu', TIMESTAMP '2024-01-01 00:00:00', 1), "
        "('us', TIMESTAMP '2024-02-01 00:00:00', 2)"
    )
    # dlt re-sends its hint on every load: the same hint changes nothing.
    versions = len(commits(server, schema, "m"))
    client.query(f'ALTER TABLE {schema}.m SET PARTITIONED BY ("region", month("ts"))')
    assert len(commits(server, schema, "m")) == versions
    client.query(f"ALTER TABLE {schema}.m SET PARTITIONED BY (id, bucket(8, id))")
    dt = DeltaTable(path)
    assert dt.metadata().partition_columns == ["id"]
    assert (
        dt.metadata().configuration["deltalite.partitioned_by"] == "id, bucket(8, id)"
    )
    assert sorted(p.name for p in Path(path).iterdir() if p.name.startswith("id=")) == [
        "id=1",
        "id=2",
    ]
    expected = [("eu", "2024-01-01T00:00:00", 1), ("us", "2024-02-01T00:00:00", 2)]
    assert client.rows(f"SELECT * FROM {schema}.m ORDER BY id") == expected
    client.query(f"ALTER TABLE {schema}.m RESET PARTITIONED BY")
    dt = DeltaTable(path)
    assert dt.metadata().partition_columns == []
    assert "deltalite.partitioned_by" not in dt.metadata().configuration
    assert client.rows(f"SELECT * FROM {schema}.m ORDER BY id") == expected
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == [1, 2]
    with pytest.raises(SqlError) as e:
        client.query(f"ALTER TABLE {schema}.m SET PARTITIONED BY (nope)")
    assert e.value.message == (
        'Binder Error: partition key column "nope" is not a column of the table'
    )


def test_session_functions_describe_and_joins(client, schema):
    name = schema.split(".")[1]
    client.query(f"CREATE TABLE {schema}.d (id INT NOT NULL, v DOUBLE, t TIMESTAMP)")
    assert client.rows("SELECT current_database(), current_schema(), version()") == [
        ("lakehouse", "main", "v1.5.3")
    ]
    assert client.query("SELECT current_schema()", catalog="lakehouse", schema=name)[
        1
    ] == [[name]]
    assert client.rows(f"DESCRIBE SELECT * FROM {schema}.d") == [
        ("id", "INTEGER", "NO", None, None, None),
        ("v", "DOUBLE", "YES", None, None, None),
        ("t", "TIMESTAMP", "YES", None, None, None),
    ]
    assert client.rows(f"DESCRIBE {schema}.d")[0][:2] == ("id", "INTEGER")
    client.query(f"INSERT INTO {schema}.d VALUES (1, 1.5, NULL), (2, NULL, NULL)")
    assert client.rows(
        f"SELECT a.id FROM {schema}.d AS a SEMI JOIN (SELECT 2 AS id) AS b "
        "ON a.id IS NOT DISTINCT FROM b.id"
    ) == [(2,)]
    assert client.rows(
        f"SELECT a.id FROM {schema}.d AS a ANTI JOIN (SELECT 2 AS id) AS b ON a.id = b.id"
    ) == [(1,)]
    assert client.rows(
        f"SELECT CASE WHEN EXISTS (SELECT 1 FROM {schema}.d WHERE id = 9) "
        "THEN error('present') ELSE TRUE END"
    ) == [(True,)]
    with pytest.raises(SqlError) as e:
        client.query(
            f"SELECT CASE WHEN EXISTS (SELECT 1 FROM {schema}.d WHERE id = 1) "
            "THEN error('present') ELSE TRUE END"
        )
    assert e.value.message == "Invalid Input Error: present"


def test_later_statements_of_a_script_see_earlier_writes(client, schema):
    out = client.rows(
        f"CREATE TABLE {schema}.s (k INT); INSERT INTO {schema}.s VALUES (1), (2); "
        f"SELECT count(*) FROM {schema}.s; DELETE FROM {schema}.s WHERE k = 1; "
        f"CREATE OR REPLACE TABLE {schema}.s2 AS SELECT * FROM {schema}.s; "
        f"SELECT * FROM {schema}.s2"
    )
    assert out == [(2,)]


def test_count_distinct_row_of_a_large_staging_table(client, schema):
    """dlt's merge-key check over 300,000 staged rows: DataFusion's generic distinct
    accumulator charged each struct value with its whole batch and exhausted the 1 GiB
    query pool at 200,000 rows; the tuples are counted as bytes instead."""
    client.query(
        f"CREATE TABLE {schema}.big AS SELECT value AS id, value % 7 AS part "
        "FROM unnest(range(300000)) AS r(value)"
    )
    _, rows = client.query(
        f'SELECT count(*) AS n, count(DISTINCT row("id")) AS k, '
        f"count(DISTINCT row(part, id % 2)) AS p FROM {schema}.big"
    )
    assert rows == [[300000, 300000, 14]]


def test_unaliased_subqueries_in_one_select_list_are_named_after_their_text(
    client, schema
):
    """DataFusion names every scalar subquery `(<subquery>)` and refused two in one list;
    DuckDB names each after its text as it prints it, and so do we (an alias still
    wins)."""
    client.query(
        f"CREATE TABLE {schema}.t AS SELECT * FROM (VALUES (1), (2), (3)) AS v(id)"
    )
    select = (
        "SELECT (SELECT count(*) FROM {t}), (SELECT max(id) FROM {t}), "
        "EXISTS (SELECT 1 FROM {t} WHERE id = 9), "
        "(SELECT min(id) FROM {t}) AS low, id IN (SELECT id FROM {t} WHERE id < 2) "
        "FROM {t} WHERE id = 1"
    )
    columns, rows = client.query(select.format(t=f"{schema}.t"))
    assert columns == [
        f"(SELECT count_star() FROM {schema}.t)",
        f"(SELECT max(id) FROM {schema}.t)",
        f"EXISTS(SELECT 1 FROM {schema}.t WHERE (id = 9))",
        "low",
        f"(id = ANY(SELECT id FROM {schema}.t WHERE (id < 2)))",
    ]
    assert rows == [[3, 3, False, 1, True]]
    # DuckDB answers the same values, under the same names.
    duck = duckdb.connect()
    duck.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1), (2), (3)) AS v(id)")
    cursor = duck.execute(select.format(t="t"))
    assert cursor.fetchall() == [(3, 3, False, 1, True)]
    assert [c[0] for c in cursor.description] == [
        c.replace(f"{schema}.t", "t") for c in columns
    ]


def duck_rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return [tuple(r) for r in con.execute(sql).fetchall()]


def both_refuse(client, duck, schema, *cases) -> None:
    """Each `(sql, message)`: our exact message, and DuckDB's starts with it (schema
    `{s}` here, `f` there)."""
    for sql, message in cases:
        with pytest.raises(SqlError) as e:
            client.query(sql.format(s=schema))
        assert e.value.message == message
        with pytest.raises(duckdb.Error) as d:
            duck.execute(sql.format(s="f"))
        assert str(d.value).startswith(message)


def test_drop_column_rewrites_the_table_without_it(client, server, schema):
    """dbt's `on_schema_change: sync_all_columns` drops columns: one overwrite commit, the
    rows as DuckDB leaves them."""
    s = schema
    setup = [
        "CREATE TABLE {s}.t (a INTEGER, b VARCHAR, c DOUBLE)",
        "INSERT INTO {s}.t VALUES (1, 'x', 1.5), (2, NULL, 2.5), (3, 'z', NULL)",
    ]
    duck = in_both(client, setup, s)
    before = len(commits(server, s, "t"))
    client.query(f"ALTER TABLE {s}.t DROP COLUMN b")
    duck.execute("ALTER TABLE f.t DROP COLUMN b")
    assert client.query(f"SELECT * FROM {s}.t ORDER BY a") == (
        ["a", "c"],
        [list(r) for r in duck_rows(duck, "SELECT * FROM f.t ORDER BY a")],
    )
    log = commits(server, s, "t")
    assert len(log) == before + 1
    info = next(a["commitInfo"] for a in log[-1] if "commitInfo" in a)
    assert info["operation"] == "WRITE"
    assert info["operationParameters"]["mode"] == "Overwrite"
    # IF EXISTS of a missing column changes nothing; without it, DuckDB's error.
    client.query(f"ALTER TABLE {s}.t DROP COLUMN IF EXISTS b")
    assert len(commits(server, s, "t")) == before + 1
    with pytest.raises(SqlError) as e:
        client.query(f"ALTER TABLE {s}.t DROP COLUMN b")
    assert (
        e.value.message
        == 'Catalog Error: Table "t" does not have a column with name "b"'
    )
    client.query(f"CREATE TABLE {s}.p (k INTEGER, v INTEGER) PARTITIONED BY (k)")
    with pytest.raises(SqlError) as e:
        client.query(f"ALTER TABLE {s}.p DROP COLUMN k")
    assert e.value.message == (
        'Catalog Error: cannot drop column "k": the table is partitioned by it'
    )
    # The dropped column's values stay in the history.
    assert client.rows(f"SELECT b FROM {s}.t VERSION AS OF 1 ORDER BY a") == [
        ("x",),
        (None,),
        ("z",),
    ]


def test_rename_column_rewrites_the_table_under_the_new_name(client, server, schema):
    """dbt's `alter_column_type` (`on_schema_change: sync_all_columns` when a column's
    type changes) as dbt sends it, one script: add a column, copy, drop the old one,
    rename the new. Each rename is one overwrite commit; the rows, types and errors as
    DuckDB's, the column's comment kept, the old name in the history."""
    s = schema
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    script = (
        "CREATE TABLE {s}.r (id INTEGER, v INTEGER); "
        "INSERT INTO {s}.r VALUES (1, 10), (2, NULL); "
        'ALTER TABLE {s}.r ADD COLUMN "v__dbt_alter" VARCHAR; '
        'UPDATE {s}.r SET "v__dbt_alter" = "v"; '
        'ALTER TABLE {s}.r DROP COLUMN "v" CASCADE; '
        'ALTER TABLE {s}.r RENAME COLUMN "v__dbt_alter" TO "v"'
    )
    client.query(script.format(s=s))
    duck.execute(script.format(s="f"))
    query = "SELECT *, typeof(v) FROM {s}.r ORDER BY id"
    assert client.query(query.format(s=s)) == (
        ["id", "v", "typeof(v)"],
        [list(r) for r in duck_rows(duck, query.format(s="f"))],
    )
    client.query(f"COMMENT ON COLUMN {s}.r.id IS 'the key'")
    before = len(commits(server, s, "r"))
    client.query(f"ALTER TABLE {s}.r RENAME id TO key")
    log = commits(server, s, "r")
    assert len(log) == before + 1
    info = next(a["commitInfo"] for a in log[-1] if "commitInfo" in a)
    assert info["operationParameters"]["mode"] == "Overwrite"
    name = s.split(".")[1]
    assert client.rows(
        "SELECT column_name, data_type, column_comment FROM information_schema.columns "
        f"WHERE table_schema = '{name}' AND table_name = 'r' ORDER BY ordinal_position"
    ) == [("key", "INTEGER", "the key"), ("v", "VARCHAR", None)]
    assert client.rows(f"SELECT key, v FROM {s}.r ORDER BY key") == [
        (1, "10"),
        (2, None),
    ]
    # The same name again changes nothing; DuckDB's errors change nothing either.
    client.query(f"ALTER TABLE {s}.r RENAME COLUMN key TO key")
    duck.execute("ALTER TABLE f.r RENAME COLUMN id TO key")
    both_refuse(
        client,
        duck,
        s,
        (
            "ALTER TABLE {s}.r RENAME COLUMN nope TO x",
            'Binder Error: Table "r" does not have a column with name "nope"',
        ),
        (
            "ALTER TABLE {s}.r RENAME COLUMN key TO v",
            'Catalog Error: Column with name "v" already exists!',
        ),
    )
    assert len(commits(server, s, "r")) == before + 1
    client.query(f"CREATE TABLE {s}.rp (d DATE, x INTEGER) PARTITIONED BY (d)")
    with pytest.raises(SqlError) as e:
        client.query(f"ALTER TABLE {s}.rp RENAME COLUMN d TO day")
    assert e.value.message == (
        'Catalog Error: cannot rename column "d": the table\'s layout keys name it'
    )
    assert client.rows(
        f"SELECT id FROM {s}.r VERSION AS OF {before - 1} ORDER BY id"
    ) == [
        (1,),
        (2,),
    ]


def test_ddl_keeps_a_names_case_and_each_select_binds_its_own_tables(client, schema):
    """DuckDB keeps the case an unquoted column name is written in (`TEST_VALID_TO`) and
    matches names without regard to case, also in `ALTER`; where two tables of one
    statement spell a name two ways (dbt's snapshot suites compare such tables with
    `EXCEPT`), each `SELECT` binds it in its own tables. `date(x)` and a date compared
    with a timestamp past 2262, as DuckDB answers them, side by side."""
    s = schema
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    setup = [
        'CREATE TABLE {s}.q ("TEST_VALID_TO" TIMESTAMP, id INTEGER)',
        "CREATE TABLE {s}.w (TEST_VALID_TO TIMESTAMP, Id INTEGER)",
        "INSERT INTO {s}.q VALUES (TIMESTAMP '2024-01-01 00:00:00', 1), (NULL, 2)",
        "INSERT INTO {s}.w (test_valid_to, ID) VALUES (TIMESTAMP '2024-01-01 00:00:00', 1)",
        "ALTER TABLE {s}.w ADD COLUMN Note VARCHAR",
        "ALTER TABLE {s}.w ALTER COLUMN ID TYPE BIGINT",
    ]
    for sql in setup:
        client.query(sql.format(s=s))
        duck.execute(sql.format(s="f"))
    name = s.split(".")[1]
    assert client.rows(
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = '{name}' AND table_name = 'w' ORDER BY ordinal_position"
    ) == [("TEST_VALID_TO", "TIMESTAMP"), ("Id", "BIGINT"), ("Note", "VARCHAR")]
    for query in [
        'SELECT "TEST_VALID_TO", "id" FROM {s}.q EXCEPT SELECT "TEST_VALID_TO", "id" FROM {s}.w',
        "SELECT test_valid_to, id FROM {s}.q EXCEPT SELECT test_valid_to, id FROM {s}.w",
        "SELECT id FROM {s}.q WHERE test_valid_to IN (SELECT TEST_VALID_TO FROM {s}.w)",
        (
            "SELECT count(*) FROM {s}.q WHERE test_valid_to < date('9999-12-31') "
            "OR DATE '9999-12-31' <= test_valid_to"
        ),
        "SELECT date('2099-12-31') AS d, date(TIMESTAMP '2024-01-02 10:00:00') AS t",
    ]:
        ours = client.query(query.format(s=s))
        cursor = duck.execute(query.format(s="f"))
        theirs = [list(r) for r in cursor.fetchall()]
        theirs = [
            [v.isoformat() if hasattr(v, "isoformat") else v for v in r] for r in theirs
        ]
        assert ours == ([d[0] for d in cursor.description], theirs), query
    both_refuse(
        client,
        duck,
        s,
        (
            "CREATE TABLE {s}.dup (a INTEGER, A INTEGER)",
            'Catalog Error: Column with name "A" already exists!',
        ),
        (
            "ALTER TABLE {s}.w ADD COLUMN note INTEGER",
            'Catalog Error: Column with name "note" already exists!',
        ),
    )


def test_a_date_meeting_a_timestamp_becomes_that_timestamp(client, schema):
    """DataFusion made a DATE and a TIMESTAMP that meet nanoseconds without a zone, which
    end in 2262: dbt's `dbt_valid_to_current: date('9999-12-31')` failed in a
    `coalesce`, a comparison and the staging table's `UNION ALL`. DuckDB's answers and
    types, side by side, also through a CTE and a table made of such a `coalesce`."""
    s = schema
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    setup = (
        "CREATE TABLE {s}.snap AS SELECT 1 AS id, coalesce(nullif(TIMESTAMP "
        "'2024-01-01 00:00:00', TIMESTAMP '2024-01-01 00:00:00'), date('9999-12-31')) "
        "AS valid_to"
    )
    client.query(setup.format(s=s))
    duck.execute(setup.format(s="f"))
    for query in [
        (
            "SELECT coalesce(NULL::TIMESTAMP, DATE '9999-12-31') AS c, "
            "typeof(coalesce(NULL::TIMESTAMPTZ, DATE '9999-12-31')) AS tz"
        ),
        "SELECT CASE WHEN id = 1 THEN DATE '9999-12-31' ELSE valid_to END AS c FROM {s}.snap",
        "SELECT TIMESTAMP '2024-01-01 00:00:00' IN (DATE '2024-01-01', DATE '9999-12-31') AS i",
        "SELECT greatest(DATE '9999-12-31', TIMESTAMP '2024-01-01 00:00:00') AS g",
        "SELECT id, valid_to FROM {s}.snap WHERE valid_to = DATE '9999-12-31'",
        "SELECT typeof(valid_to) AS t, valid_to FROM {s}.snap",
        (
            "WITH i AS (SELECT 'i' AS k, coalesce(NULL::TIMESTAMP, date('9999-12-31')) AS v), "
            "u AS (SELECT 'u' AS k, valid_to AS v FROM {s}.snap) "
            "SELECT * FROM i UNION ALL SELECT * FROM u UNION ALL "
            "SELECT 'd', DATE '2024-01-01' ORDER BY k"
        ),
    ]:
        ours = client.query(query.format(s=s))
        cursor = duck.execute(query.format(s="f"))
        rows = [
            [v.isoformat() if hasattr(v, "isoformat") else v for v in r]
            for r in cursor.fetchall()
        ]
        assert ours == ([d[0] for d in cursor.description], rows), query


def test_column_defaults_fill_what_a_write_leaves_out(client, server, schema):
    """A constant `DEFAULT` (`CREATE TABLE`, `ADD COLUMN`) fills the column wherever a
    write leaves it out: `INSERT` with a column list or `BY NAME`, `DEFAULT` in `VALUES`,
    `DEFAULT VALUES`, a `MERGE`'s `INSERT`, an upsert's new rows; `SET c = DEFAULT` in
    `UPDATE` (also `… FROM`) and a `MERGE`'s `UPDATE`; `ADD COLUMN … DEFAULT` gives it to the rows already there (dbt's
    snapshot suites add a column so). Rows and `column_default` as DuckDB's, side by
    side. A default that is not a constant is refused, and nothing is created."""
    s = schema
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    for sql in [
        (
            "CREATE TABLE {s}.d (k INTEGER, n INTEGER DEFAULT 7, tag VARCHAR DEFAULT 'it''s', "
            "day DATE DEFAULT DATE '2024-02-29', x DOUBLE DEFAULT 1.5, flag BOOLEAN DEFAULT "
            "true, neg BIGINT DEFAULT -(3), amount DECIMAL(10,2) DEFAULT 2.50, "
            "none INTEGER DEFAULT NULL)"
        ),
        "INSERT INTO {s}.d (k) VALUES (1)",
        "INSERT INTO {s}.d (k, n) VALUES (2, NULL)",
        "INSERT INTO {s}.d BY NAME SELECT 3 AS k, 'x' AS tag",
        (
            "MERGE INTO {s}.d USING (SELECT 4 AS k) AS src ON d.k = src.k "
            "WHEN NOT MATCHED THEN INSERT (k) VALUES (src.k)"
        ),
        (
            "INSERT INTO {s}.d VALUES (5, DEFAULT, 'v', DEFAULT, 2.5, DEFAULT, DEFAULT, "
            "DEFAULT, 1)"
        ),
        "INSERT INTO {s}.d DEFAULT VALUES",
        "ALTER TABLE {s}.d ADD COLUMN extra VARCHAR(50) DEFAULT 'dummy_value'",
        "INSERT INTO {s}.d (k) VALUES (6)",
        # `DEFAULT` as an update's value: the column's default, NULL without one.
        "UPDATE {s}.d SET n = DEFAULT, tag = default, none = DEFAULT WHERE k = 2",
        "UPDATE {s}.d SET extra = 'changed', x = 9, none = 4 WHERE k IN (3, 4)",
        (
            "UPDATE {s}.d SET extra = DEFAULT FROM (SELECT 3 AS k UNION ALL SELECT 4) AS src "
            "WHERE d.k = src.k"
        ),
        (
            "MERGE INTO {s}.d USING (SELECT 4 AS k UNION ALL SELECT 7) AS src "
            "ON d.k = src.k WHEN MATCHED THEN UPDATE SET x = DEFAULT, none = DEFAULT "
            "WHEN NOT MATCHED THEN INSERT VALUES (src.k, DEFAULT, 'm', DEFAULT, DEFAULT, "
            "DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT)"
        ),
    ]:
        client.query(sql.format(s=s))
        duck.execute(sql.format(s="f"))
    query = (
        "SELECT k, n, tag, CAST(day AS VARCHAR), x, flag, neg, CAST(amount AS VARCHAR), "
        "none, extra FROM {s}.d ORDER BY k"
    )
    ours = client.rows(query.format(s=s))
    assert ours == duck_rows(duck, query.format(s="f"))
    assert ours[0] == (
        1,
        7,
        "it's",
        "2024-02-29",
        1.5,
        True,
        -3,
        "2.50",
        None,
        "dummy_value",
    )
    # Another Delta reader (delta-rs) sees the values written, and the default kept in
    # the column's metadata under our own key.
    other = DeltaTable(str(table_dir(server, s, "d")))
    assert set(other.to_pyarrow_table().column("extra").to_pylist()) == {"dummy_value"}
    extra = next(f for f in other.schema().fields if f.name == "extra")
    assert extra.metadata == {"deltalite.default": "dummy_value"}
    name = s.split(".")[1]
    listed = (
        "SELECT column_name, column_default FROM information_schema.columns "
        "WHERE table_schema = '{n}' AND table_name = 'd' ORDER BY ordinal_position"
    )
    # DuckDB lists a written `DEFAULT NULL` as 'NULL'; here it is no default at all.
    theirs = duck_rows(duck, listed.format(n="f"))
    assert theirs[8] == ("none", "NULL")
    theirs[8] = ("none", None)
    assert client.rows(listed.format(n=name)) == theirs
    assert client.rows(
        f"SELECT column_name, column_default FROM duckdb_columns() "
        f"WHERE schema_name = '{name}' AND table_name = 'd' AND column_default IS NOT NULL "
        "ORDER BY column_index"
    ) == [
        ("n", "7"),
        ("tag", "'it''s'"),
        ("day", "CAST('2024-02-29' AS DATE)"),
        ("x", "1.5"),
        ("flag", "true"),
        ("neg", "-3"),
        ("amount", "2.50"),
        ("extra", "'dummy_value'"),
    ]
    # The rows the engine writes from outside SQL take the defaults too: an upsert's
    # new row; a matched row keeps what it had (HTTP `/upsert` keeps omitted columns). A
    # column is left out by a whole request: one that carries it writes what it sends.
    where = f"catalog={s.split('.')[0]}&schema={name}&table=d&primary_key=k"
    assert client.upsert(where, [{"k": 1, "n": 70}, {"k": 9}])[0] == 200
    assert client.upsert(where, [{"k": 8}])[0] == 200
    assert client.rows(
        f"SELECT k, n, tag, extra FROM {s}.d WHERE k IN (1, 8, 9) ORDER BY k"
    ) == [
        (1, 70, "it's", "dummy_value"),
        (8, 7, "it's", "dummy_value"),
        (9, None, "it's", "dummy_value"),
    ]
    # Not a constant, or a value the type cannot hold: refused, nothing created.
    not_constant = (
        "the DEFAULT of column {c} is not a constant (it calls a function, names a "
        "column or runs a query): a default is stored once, not computed for each row"
    )
    for sql, message in [
        (
            "CREATE TABLE {s}.e (k INTEGER, at TIMESTAMP DEFAULT now())",
            "Not implemented Error: " + not_constant.format(c="at"),
        ),
        (
            "CREATE TABLE {s}.e (k INTEGER, j INTEGER DEFAULT k + 1)",
            "Not implemented Error: " + not_constant.format(c="j"),
        ),
    ]:
        with pytest.raises(SqlError) as e:
            client.query(sql.format(s=s))
        assert e.value.message == message
    with pytest.raises(SqlError) as e:
        client.query(f"CREATE TABLE {s}.e (k INTEGER DEFAULT 'abc')")
    assert e.value.message == (
        "Conversion Error: DEFAULT 'abc' (column k): "
        "Cast error: Cannot cast string 'abc' to value of Int32 type"
    )
    assert not table_dir(server, s, "e").exists()
    before = len(commits(server, s, "d"))
    with pytest.raises(SqlError) as e:
        client.query(f"ALTER TABLE {s}.d ADD COLUMN big INTEGER DEFAULT 3000000000")
    assert e.value.message == (
        "Conversion Error: DEFAULT 3000000000 (column big): "
        "Cast error: Can't cast value 3000000000 to type Int32"
    )
    assert len(commits(server, s, "d")) == before


def test_rows_keep_the_order_they_were_written_in(client, server, schema):
    """`SELECT *` without `ORDER BY` gives a table's rows in the order they were written,
    as DuckDB does, for a table small enough to be read as one stream (under DataFusion's
    1 MiB `repartition_file_min_size`): files oldest first (delta-rs lists them newest
    first), and `UPDATE`, `DELETE`, `UPDATE … FROM`, `DELETE … USING` and `MERGE` write
    a rewritten file's rows back in its order, through checkpoints (every 2 commits).
    Several batches (8192 rows) per file. Side by side with DuckDB after every step."""
    s = schema
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    steps = [
        (
            "CREATE TABLE {s}.t AS SELECT range AS k, range * 10 AS v, 'x' || range AS w "
            "FROM range(20000) ORDER BY k"
        ),
        "INSERT INTO {s}.t SELECT range AS k, 0, 'y' FROM range(100000, 100500) ORDER BY k",
        "INSERT INTO {s}.t VALUES (200000, 1, 'z'), (200004, 2, 'z')",
        # Each rewrite below touches every file: a rewritten file is the newest.
        "UPDATE {s}.t SET v = -1 WHERE k % 7 = 0",
        "DELETE FROM {s}.t WHERE k % 11 = 5",
        (
            "UPDATE {s}.t SET v = src.n FROM (SELECT range AS k, -range AS n "
            "FROM range(0, 200010, 3)) AS src WHERE t.k = src.k"
        ),
        "DELETE FROM {s}.t USING (SELECT range AS k FROM range(1, 200010, 13)) AS d WHERE t.k = d.k",
        (
            "MERGE INTO {s}.t USING (SELECT range AS k, range % 4 AS m "
            "FROM range(2, 200100, 17)) AS src ON t.k = src.k "
            "WHEN MATCHED AND src.m = 0 THEN DELETE "
            "WHEN MATCHED AND src.m = 1 THEN UPDATE SET w = 'merged' "
            "WHEN MATCHED THEN UPDATE SET v = 7 "
            "WHEN NOT MATCHED THEN INSERT VALUES (src.k, 0, 'new')"
        ),
    ]
    for i, sql in enumerate(steps):
        client.query(sql.format(s=s))
        duck.execute(sql.format(s="f"))
        if i == 0:
            client.query(
                f"ALTER TABLE {s}.t SET TBLPROPERTIES ('delta.checkpointInterval' = '2')"
            )
        ours = client.rows(f"SELECT k, v, w FROM {s}.t")
        theirs = duck_rows(duck, "SELECT k, v, w FROM f.t")
        # A MERGE's inserted rows come last, in its join's order, in both.
        new = sum(1 for r in ours if r[2] == "new")
        assert all(r[2] == "new" for r in ours[len(ours) - new :])
        assert ours[: len(ours) - new] == theirs[: len(theirs) - new], sql
        assert sorted(ours) == sorted(theirs), sql
    assert new == 10759
    log = table_dir(server, s, "t") / "_delta_log"
    assert len(list(log.glob("*.checkpoint.parquet"))) >= 3

    # A rewrite that touches only the older file writes its rows as the newest file:
    # they come after the others', where DuckDB keeps them in place.
    client.query(f"CREATE TABLE {s}.u AS SELECT range AS k FROM range(5)")
    client.query(f"INSERT INTO {s}.u VALUES (10), (11)")
    client.query(f"UPDATE {s}.u SET k = -3 WHERE k = 3")
    assert client.rows(f"SELECT k FROM {s}.u") == [
        (10,),
        (11,),
        (0,),
        (1,),
        (2,),
        (-3,),
        (4,),
    ]

    # OPTIMIZE copies a bin's files oldest first, and RESTORE re-adds files as the log
    # listed them: neither changes the order.
    client.query(f"CREATE TABLE {s}.o AS SELECT range AS k FROM range(3)")
    for sql in ["INSERT INTO {s}.o VALUES (3), (4)", "INSERT INTO {s}.o VALUES (5)"]:
        client.query(sql.format(s=s))
    written = [(k,) for k in range(6)]
    names, rows = client.query(f"OPTIMIZE {s}.o")
    optimized = dict(zip(names, rows[0], strict=True))
    assert (optimized["files_removed"], optimized["files_added"]) == (3, 1)
    assert client.rows(f"SELECT k FROM {s}.o") == written
    client.query(f"RESTORE {s}.o TO VERSION AS OF {optimized['version'] - 1}")
    assert client.rows(f"SELECT k FROM {s}.o") == written

    # Files of 1 MiB or more are read side by side, so their MERGE keeps the two
    # streaming queries (changed rows, untouched rows): the same rows, in no set order.
    for sql in [
        "CREATE TABLE {s}.big AS SELECT range AS k, md5(range::VARCHAR) AS h FROM range(150000)",
        (
            "MERGE INTO {s}.big USING (SELECT range AS k FROM range(0, 160000, 7)) AS src "
            "ON big.k = src.k WHEN MATCHED AND src.k % 2 = 0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET h = 'merged' "
            "WHEN NOT MATCHED THEN INSERT VALUES (src.k, 'new')"
        ),
    ]:
        client.query(sql.format(s=s))
        duck.execute(sql.format(s="f"))
    assert (
        sum(p.stat().st_size for p in table_dir(server, s, "big").glob("*.parquet"))
        > 2**20
    )
    query = (
        "SELECT CASE WHEN h IN ('merged', 'new') THEN h ELSE 'kept' END AS kind, count(*), "
        "sum(k), min(h), max(h), count(DISTINCT h) FROM {s}.big GROUP BY 1 ORDER BY 1"
    )
    assert client.rows(query.format(s=s)) == duck_rows(duck, query.format(s="f"))

    # A value is given its column's type on its own: a kept row's BIGINT is not carried
    # through the DOUBLE it is assigned beside (2^53 + 1 is no DOUBLE).
    for sql in [
        "CREATE TABLE {s}.b (k BIGINT, d DOUBLE)",
        "INSERT INTO {s}.b VALUES (9007199254740993, 1.5), (2, 2.5), (4, 4.5)",
        "UPDATE {s}.b SET k = d WHERE k = 2",
        "UPDATE {s}.b SET k = src.d FROM (SELECT 4 AS k, 6.7::DOUBLE AS d) AS src WHERE b.k = src.k",
        (
            "MERGE INTO {s}.b USING (SELECT 7 AS k) AS src ON b.k = src.k "
            "WHEN MATCHED THEN UPDATE SET k = b.d * 2 WHEN NOT MATCHED BY TARGET THEN "
            "INSERT VALUES (src.k, 0)"
        ),
    ]:
        client.query(sql.format(s=s))
        duck.execute(sql.format(s="f"))
    query = "SELECT CAST(k AS VARCHAR), d FROM {s}.b"
    ours = client.rows(query.format(s=s))
    assert ours == duck_rows(duck, query.format(s="f"))
    assert ours == [("9007199254740993", 1.5), ("2", 2.5), ("9", 4.5)]


def test_a_column_assigned_twice_is_refused_as_duckdb_refuses_it(client, schema):
    """`UPDATE t SET v = 1, V = 2` updated `v` to 2 (the in-place update puts each value
    in place in turn); DuckDB refuses it, as the `MERGE` forms here already did. A
    column the table lacks is refused in DuckDB's words. Nothing changes."""
    s = schema
    duck = duckdb.connect()
    duck.execute("CREATE SCHEMA f")
    for con, name in ((client.query, s), (duck.execute, "f")):
        con(f"CREATE TABLE {name}.t AS SELECT range AS k, range AS v FROM range(3)")
    both_refuse(
        client,
        duck,
        s,
        (
            "UPDATE {s}.t SET v = 1, V = 2 WHERE k = 1",
            'Binder Error: Multiple assignments to same column "V"',
        ),
        (
            "UPDATE {s}.t SET v = 1, v = 2 FROM (SELECT 1 AS k) AS src WHERE t.k = src.k",
            'Binder Error: Multiple assignments to same column "v"',
        ),
        (
            (
                "MERGE INTO {s}.t USING (SELECT 1 AS k) AS src ON t.k = src.k "
                "WHEN MATCHED THEN UPDATE SET v = 1, v = 2"
            ),
            'Binder Error: Multiple assignments to same column "v"',
        ),
        # The columns are checked in the order written, a missing one as DuckDB says.
        (
            "UPDATE {s}.t SET v = 1, v = 2, nope = 3",
            'Binder Error: Multiple assignments to same column "v"',
        ),
        (
            "UPDATE {s}.t SET nope = 3, v = 1, v = 2",
            "Binder Error: Referenced update column nope not found in table!",
        ),
        (
            "UPDATE {s}.t SET nope = 1 FROM (SELECT 1 AS k) AS src WHERE t.k = src.k",
            "Binder Error: Referenced update column nope not found in table!",
        ),
        (
            (
                "MERGE INTO {s}.t USING (SELECT 1 AS k) AS src ON t.k = src.k "
                "WHEN MATCHED THEN UPDATE SET nope = 1"
            ),
            "Binder Error: Referenced update column nope not found in table!",
        ),
        (
            (
                "MERGE INTO {s}.t USING (SELECT 1 AS k) AS src ON t.k = src.k "
                "WHEN NOT MATCHED THEN INSERT (nope) VALUES (1)"
            ),
            'Binder Error: Table "t" does not have a column with name "nope"',
        ),
    )
    assert client.rows(f"SELECT k, v FROM {s}.t") == [(0, 0), (1, 1), (2, 2)]


def test_integer_overflow_is_an_error_not_a_wrapped_number(client, server, schema):
    """`+`, `-` and `*` of integers that leave their type fail, as in DuckDB (DataFusion
    wrapped: 9e18 * 2 was -446744073709551616); a failed UPDATE leaves the table as it
    was; arithmetic that fits answers as DuckDB does."""
    s = schema
    client.query(f"CREATE TABLE {s}.n (k INTEGER, big BIGINT)")
    client.query(f"INSERT INTO {s}.n VALUES (1, 9000000000000000000), (2, -5)")
    before = len(commits(server, s, "n"))
    assert_refused(
        client,
        [
            (
                f"SELECT big * 2 FROM {s}.n",
                "Out of Range Error: Overflow happened on: 9000000000000000000 * 2",
            ),
            (
                f"SELECT big + big FROM {s}.n WHERE k = 1",
                (
                    "Out of Range Error: Overflow happened on: "
                    "9000000000000000000 + 9000000000000000000"
                ),
            ),
            (
                "SELECT -9223372036854775807 - 2",
                "Out of Range Error: Overflow happened on: -9223372036854775807 - 2",
            ),
            (
                f"UPDATE {s}.n SET big = big * 3 WHERE k = 1",
                "Out of Range Error: Overflow happened on: 9000000000000000000 * 3",
            ),
            # A remainder by zero fails as DuckDB's does (its class, not a conversion's).
            (f"SELECT k % 0 FROM {s}.n", "Invalid Input Error: Division by zero"),
            (
                f"UPDATE {s}.n SET k = k % (k - 1) WHERE k = 1",
                "Invalid Input Error: Division by zero",
            ),
        ],
    )
    assert len(commits(server, s, "n")) == before
    duck = duckdb.connect()
    duck.execute("CREATE TABLE n (k INTEGER, big BIGINT)")
    duck.execute("INSERT INTO n VALUES (1, 9000000000000000000), (2, -5)")
    query = "SELECT k, big - 1 AS a, big * -1 AS b, k * 2 + 1 AS c FROM {} ORDER BY k"
    assert client.query(query.format(f"{s}.n")) == (
        ["k", "a", "b", "c"],
        [list(r) for r in duck_rows(duck, query.format("n"))],
    )


def test_age_counts_as_duckdb_does(client):
    """`age(a, b)` in years, months, days and a clock, a negative field borrowed from
    the next (a day from the earlier date's month), negated when `a` is earlier: equal
    to DuckDB's over 300 seeded pairs around month ends. `age(a)` is from today's
    midnight."""
    rng = random.Random(20261207)

    def moment() -> datetime.datetime:
        t = datetime.datetime(2019, 1, 1) + datetime.timedelta(
            days=rng.randint(0, 2500),
            seconds=rng.randint(0, 86399),
            microseconds=rng.choice([0, 0, 123456]),
        )
        return t.replace(day=rng.choice([28, 29, 30])) if t.month != 2 else t

    pairs = [(moment(), moment()) for _ in range(300)]
    values = ", ".join(f"(TIMESTAMP '{a}', TIMESTAMP '{b}')" for a, b in pairs)
    query = (
        "SELECT a, b, CAST(age(a, b) AS VARCHAR) AS g "
        f"FROM (VALUES {values}) AS v(a, b) ORDER BY a, b"
    )
    duck = duckdb.connect()
    want = [
        [a.isoformat(), b.isoformat(), g] for a, b, g in duck.execute(query).fetchall()
    ]
    assert client.query(query) == (["a", "b", "g"], want)
    assert client.query(
        "SELECT age(DATE '2024-03-05', DATE '2023-01-01') = INTERVAL '1 year 2 months 4 days' "
        "AS x, typeof(age(DATE '2024-03-05', NULL)) AS t, age(NULL, DATE '2024-01-01') AS n, "
        "age(DATE '2000-02-29') = age(CAST(current_date AS TIMESTAMP), DATE '2000-02-29') AS y"
    ) == (["x", "t", "n", "y"], [[True, "INTERVAL", None, True]])


def test_json_object_refuses_what_duckdb_refuses(client, schema):
    """`json_object` needs pairs whose keys are text, and a key that is NULL fails the
    statement, each with DuckDB's message; `to_json` of a NULL is NULL."""
    client.query(f"CREATE TABLE {schema}.j (k INTEGER, s VARCHAR)")
    client.query(f"INSERT INTO {schema}.j VALUES (1, NULL), (2, 'b')")
    assert_refused(
        client,
        [
            (
                "SELECT json_object('a') AS x",
                "Binder Error: json_object() requires an even number of arguments",
            ),
            (
                "SELECT json_object(1, 2) AS x",
                (
                    "Binder Error: json_object() keys must be VARCHAR, add an explicit cast "
                    'to argument "Int64(1)"'
                ),
            ),
            (
                f"SELECT json_object(s, k) AS x FROM {schema}.j",
                "Invalid Input Error: JSON key cannot be NULL",
            ),
        ],
    )
    assert client.query(
        f"SELECT to_json(s) AS t, json_object('s', s) AS o FROM {schema}.j ORDER BY k"
    ) == (["t", "o"], [[None, '{"s":null}'], ['"b"', '{"s":"b"}']])


def test_lambdas_take_both_syntaxes_and_refuse_what_duckdb_refuses(client, schema):
    """DuckDB's lambdas (`sql/lambdas`): `lambda x, i: …` and the older arrow form,
    which DuckDB 2.0 refuses by default but 1.x took and dbt models written for it use;
    an arrow elsewhere is still JSON's. A table's lists reduce per row, an empty one
    without an initial value fails the statement, and a subquery in a lambda, a lambda
    with too many parameters, or a reduction's with too few are refused, each with
    DuckDB's message, leaving the table as it was."""
    client.query(f"CREATE TABLE {schema}.l (k INTEGER, l INTEGER[], j VARCHAR)")
    client.query(
        f"INSERT INTO {schema}.l VALUES (1, [1, 2, 3], '{{\"a\": 1}}'), (2, NULL, NULL), "
        "(3, [5], NULL)"
    )
    assert client.query(
        f"SELECT k, list_transform(l, x -> x * k) AS t, list_filter(l, (x, i) -> i > 1) AS f, "
        f"list_reduce(l, lambda a, x: a + x) AS r, j -> 'a' AS a FROM {schema}.l ORDER BY k"
    ) == (
        ["k", "t", "f", "r", "a"],
        [
            [1, [1, 2, 3], [2, 3], 6, "1"],
            [2, None, None, None, None],
            [3, [15], [], 5, None],
        ],
    )
    client.query(f"INSERT INTO {schema}.l VALUES (4, [], NULL)")
    before = client.query(f"SELECT * FROM {schema}.l ORDER BY k")
    assert_refused(
        client,
        [
            (
                f"UPDATE {schema}.l SET k = list_reduce(l, lambda a, x: a + x)",
                "Invalid Input Error: Cannot perform list_reduce on an empty input list",
            ),
            (
                (
                    "SELECT list_reduce(k, lambda a, x: a + x, 0) AS r FROM (VALUES ([1]), ([])) t(k) "
                    "UNION ALL SELECT list_reduce([], lambda a, x: a + x)"
                ),
                "Invalid Input Error: Cannot perform list_reduce on an empty input list",
            ),
            (
                "SELECT list_transform([1], lambda x: (SELECT 1)) AS r",
                "Binder Error: subqueries in lambda expressions are not supported",
            ),
            (
                f"SELECT list_filter(l, lambda x: x IN (SELECT k FROM {schema}.l)) AS r FROM {schema}.l",
                "Binder Error: subqueries in lambda expressions are not supported",
            ),
            (
                "SELECT list_transform([1], lambda a, b, c: a) AS r",
                "Binder Error: This lambda function only supports up to two lambda parameters!",
            ),
            (
                "SELECT list_reduce([1], lambda a: a) AS r",
                "Binder Error: list_reduce expects a function with 2 or 3 arguments",
            ),
            (
                "SELECT list_transform(1, lambda x: x) AS r",
                "Binder Error: Invalid LIST argument during lambda function binding!",
            ),
        ],
    )
    assert client.query(f"SELECT * FROM {schema}.l ORDER BY k") == before


def test_collate_nocase_orders_without_regard_to_case(client):
    """`ORDER BY s COLLATE NOCASE` orders as DuckDB does, by the lowercased text, each row
    keeping its own; a collation other than NOCASE, C, BINARY or POSIX is refused with
    a message that names it (it was DataFusion's 'Unsupported ast node')."""
    rows = "(VALUES ('b'), ('A'), ('a'), ('B')) t(s)"
    assert client.query(f"SELECT s FROM {rows} ORDER BY s COLLATE NOCASE, s") == (
        ["s"],
        [["A"], ["a"], ["B"], ["b"]],
    )
    assert client.query(f"SELECT s FROM {rows} ORDER BY s COLLATE C") == (
        ["s"],
        [["A"], ["B"], ["a"], ["b"]],
    )
    with pytest.raises(SqlError) as e:
        client.query(f"SELECT s FROM {rows} ORDER BY s COLLATE NOACCENT")
    assert e.value.message == (
        "Not implemented Error: collation NOACCENT is not supported here "
        "(NOCASE, C, BINARY and POSIX are)"
    )


def test_arithmetic_of_literals_is_integer_when_it_fits(client, schema):
    """`24 * 60` of literals only is an INTEGER, as DuckDB types it (DataFusion: BIGINT),
    so `CREATE TABLE … AS` makes DuckDB's column; where a step leaves INTEGER's range the
    arithmetic stays BIGINT and answers the number, where DuckDB fails with an overflow."""
    s = schema
    client.query(
        f"CREATE TABLE {s}.lit AS SELECT 24 * 60 AS m, -(7 % 2) AS r, "
        "2 - 3 * 4 AS d, 3000000000 + 1 AS b"
    )
    duck = duckdb.connect()
    duck.execute(
        "CREATE TABLE lit AS SELECT 24 * 60 AS m, -(7 % 2) AS r, "
        "2 - 3 * 4 AS d, 3000000000 + 1 AS b"
    )
    assert client.rows(f"DESCRIBE {s}.lit") == [
        tuple(r) for r in duck_rows(duck, "DESCRIBE lit")
    ]
    assert client.rows(f"SELECT * FROM {s}.lit") == [(1440, -1, -10, 3000000001)]
    assert [r[1] for r in duck_rows(duck, "DESCRIBE lit")] == [
        "INTEGER",
        "INTEGER",
        "INTEGER",
        "BIGINT",
    ]
    assert client.query("SELECT 65536 * 65536 AS x, typeof(2147483647 + 1) AS t") == (
        ["x", "t"],
        [[4294967296, "BIGINT"]],
    )
    with pytest.raises(duckdb.OutOfRangeException):
        duck.execute("SELECT 65536 * 65536")


def test_at_time_zone_keeps_the_wall_clock_and_names_bad_zones(client, schema):
    """`TIMESTAMPTZ … AT TIME ZONE` is the zone's wall clock, a TIMESTAMP that every client
    sees as written (DataFusion labelled the same instant with the zone, which clients
    showed back in UTC); an unknown zone is DuckDB's error, with one class name."""
    client.query(
        f"CREATE TABLE {schema}.tz AS SELECT TIMESTAMPTZ '2024-01-15 10:30:00+00' AS at"
    )
    assert client.query(
        f"SELECT at AT TIME ZONE 'America/New_York' AS ny, "
        f"timezone('Asia/Tokyo', at) AS tokyo FROM {schema}.tz"
    ) == (["ny", "tokyo"], [["2024-01-15T05:30:00", "2024-01-15T19:30:00"]])
    assert_refused(
        client,
        [
            (
                f"SELECT at AT TIME ZONE 'Nowhere/X' FROM {schema}.tz",
                "Not implemented Error: Unknown TimeZone 'Nowhere/X'",
            ),
            (
                "SELECT make_timestamptz(2024, 1, 1, 0, 0, 0.0, 'Nowhere/X')",
                "Not implemented Error: Unknown TimeZone 'Nowhere/X'",
            ),
            (
                "SELECT 3 AT TIME ZONE 'UTC'",
                "Binder Error: timezone takes a TIMESTAMP, TIMESTAMPTZ or DATE, not Int64",
            ),
        ],
    )


def test_a_column_named_twice_gets_duckdbs_name_for_the_copy(client, schema):
    """dbt writes `SELECT DISTINCT state, state` for a unique key listed twice."""
    client.query(f"CREATE TABLE {schema}.u AS SELECT 'CT' AS state, 1 AS v")
    client.query(f"CREATE TABLE {schema}.w AS SELECT 'CT' AS state, 5 AS v")
    duck = duckdb.connect()
    duck.execute("CREATE TABLE u AS SELECT 'CT' AS state, 1 AS v")
    sub = "SELECT * FROM (SELECT state, state FROM {t})"
    assert client.query(sub.format(t=f"{schema}.u")) == (
        [d[0] for d in duck.execute(sub.format(t="u")).description],
        [["CT", "CT"]],
    )
    assert client.query(sub.format(t=f"{schema}.u"))[0] == ["state", "state_1"]
    # At the top, DuckDB answers two columns named `state`; one result cannot hold two
    # equal names here, so the copy keeps its subquery name.
    assert client.query(f"SELECT state, state FROM {schema}.u")[0] == [
        "state",
        "state_1",
    ]
    client.query(
        f"DELETE FROM {schema}.u AS d WHERE (state, state) IN "
        f"(SELECT DISTINCT state, state FROM {schema}.w AS s)"
    )
    assert client.rows(f"SELECT count(*) FROM {schema}.u") == [(0,)]


def test_now_is_microseconds_and_a_table_takes_its_querys_coerced_types(client, schema):
    """dbt's snapshots: `CREATE TABLE … AS` over `now()::timestamp`, and a `UNION` of a
    DATE and a TIMESTAMP, whose type is the TIMESTAMP (the frame's schema said DATE)."""
    columns, rows = client.query("SELECT now() AS n, now() = current_timestamp AS same")
    assert columns == ["n", "same"] and rows[0][1] is True
    described = client.query("DESCRIBE SELECT now() AS n")
    assert [r[:2] for r in described[1]] == [["n", "TIMESTAMP WITH TIME ZONE"]]
    client.query(
        f"CREATE TABLE {schema}.snap AS (SELECT DATE '2020-01-02' AS d "
        f"UNION ALL SELECT now()::timestamp)"
    )
    assert client.rows(
        "SELECT data_type FROM information_schema.columns "
        f"WHERE table_schema = '{schema.split('.')[1]}' AND table_name = 'snap'"
    ) == [("TIMESTAMP",)]
    assert client.rows(f"SELECT count(*), min(d) FROM {schema}.snap") == [
        (2, "2020-01-02T00:00:00")
    ]


def test_literal_items_list_columns_and_text_lengths_take_duckdbs_types(client, schema):
    """What dbt's model contracts compare: `select 1 AS id` is an INTEGER (a literal out
    of INTEGER's range a BIGINT, typed before its sign), as DuckDB types it, also in the table `CREATE TABLE …
    AS` makes; a contract's DDL declares lists (`VARCHAR[]`) and text with a length
    (`character varying(256)`, which DuckDB ignores). DuckDB's answers, side by side."""
    query = (
        "SELECT 1 AS i, -2147483648 AS lo, 2147483648 AS big, 'x' AS s, "
        "CAST('abc' AS character varying(2)) AS v, CAST('abc' AS char(1)) AS c "
        "UNION ALL SELECT 2, 0, 0, 'y', 'd', 'e'"
    )
    ddb = duckdb.connect()
    expected = [(r[0], r[1]) for r in ddb.sql(f"DESCRIBE {query}").fetchall()]
    assert expected == [
        ("i", "INTEGER"),
        ("lo", "BIGINT"),
        ("big", "BIGINT"),
        ("s", "VARCHAR"),
        ("v", "VARCHAR"),
        ("c", "VARCHAR"),
    ]
    assert [tuple(r[:2]) for r in client.query(f"DESCRIBE {query}")[1]] == expected
    assert sorted(client.rows(query)) == sorted(ddb.sql(query).fetchall())
    client.query(f"CREATE TABLE {schema}.lit AS {query}")
    client.query(f"CREATE TABLE {schema}.lists (tags VARCHAR[], ns INTEGER[][], k INT)")
    client.query(f"INSERT INTO {schema}.lists VALUES (['a', 'b'], [[1], [2, 3]], 1)")
    types = client.rows(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = '{schema.split('.')[1]}' ORDER BY table_name, column_name"
    )
    assert types == [
        ("lists", "k", "INTEGER"),
        ("lists", "ns", "INTEGER[][]"),
        ("lists", "tags", "VARCHAR[]"),
        ("lit", "big", "BIGINT"),
        ("lit", "c", "VARCHAR"),
        ("lit", "i", "INTEGER"),
        ("lit", "lo", "BIGINT"),
        ("lit", "s", "VARCHAR"),
        ("lit", "v", "VARCHAR"),
    ]
    assert client.rows(f"SELECT tags[2], ns[2][2] FROM {schema}.lists") == [("b", 3)]
    with pytest.raises(SqlError) as e:
        client.query(f"CREATE TABLE {schema}.times (t TIME[])")
    assert e.value.message == "Not implemented Error: lists of TIME are not supported"
    assert client.rows(
        "SELECT count(*) FROM information_schema.tables "
        f"WHERE table_schema = '{schema.split('.')[1]}' AND table_name = 'times'"
    ) == [(0,)]


def test_a_models_literals_take_the_type_of_what_they_meet(client, schema):
    """A dbt model's `coalesce(k, 0)`, `CASE WHEN … THEN 1 ELSE 0 END`, `greatest(s, 0)`
    and `[1, 2]` made BIGINT columns where DuckDB makes INTEGER (SMALLINT, a DECIMAL of
    DuckDB's width) ones; `extract(year …)` and `length(…)` INTEGER ones where DuckDB's
    are BIGINT, `CAST(k AS NUMERIC)` a DECIMAL(38,10) where DuckDB's is (18,3): the types of the table `CREATE TABLE … AS` writes, as DuckDB's
    `DESCRIBE` of the same table, and its rows."""
    setup = [
        "CREATE TABLE {s}.src (k INTEGER, amount DECIMAL(10,2), small SMALLINT)",
        "INSERT INTO {s}.src VALUES (1, 2.50, 3), (NULL, NULL, NULL), (5, 1.25, -2)",
        (
            "CREATE TABLE {s}.model AS SELECT coalesce(k, 0) AS k0, "
            "CASE WHEN k > 1 THEN 1 ELSE 0 END AS flag, coalesce(amount, 0) AS amt, "
            "greatest(small, 0) AS g, ifnull(small, 100000) AS wide, [1, 2] AS l, "
            "coalesce(k, 3000000000) AS big, extract(year FROM DATE '2024-03-05') AS y, "
            "length(CAST(k AS VARCHAR)) AS len, CAST(k AS NUMERIC) AS num FROM {s}.src"
        ),
    ]
    duck = in_both(client, setup, schema)
    expected = [(r[0], r[1]) for r in duck.sql("DESCRIBE f.model").fetchall()]
    assert expected == [
        ("k0", "INTEGER"),
        ("flag", "INTEGER"),
        ("amt", "DECIMAL(12,2)"),
        ("g", "SMALLINT"),
        ("wide", "INTEGER"),
        ("l", "INTEGER[]"),
        ("big", "BIGINT"),
        ("y", "BIGINT"),
        ("len", "BIGINT"),
        ("num", "DECIMAL(18,3)"),
    ]
    assert (
        client.rows(
            "SELECT column_name, data_type FROM information_schema.columns "
            f"WHERE table_schema = '{schema.split('.')[1]}' AND table_name = 'model' "
            "ORDER BY ordinal_position"
        )
        == expected
    )
    query = (
        "SELECT k0, flag, CAST(amt AS VARCHAR), g, wide, l[2], big, y, len, "
        "CAST(num AS VARCHAR) FROM {s}.model"
    )
    assert sorted(client.rows(query.format(s=schema)), key=str) == sorted(
        duck.sql(query.format(s="f")).fetchall(), key=str
    )


def test_parser_errors_read_as_duckdbs(client):
    """`syntax error at or near "…"`, which dbt's conformance suite looks for (`dbt show`
    of a query with two `LIMIT`s, a seed read with the wrong delimiter), then sqlparser's
    own account; at the end of the text, DuckDB's `syntax error at end of input`."""
    assert_refused(
        client,
        [
            (
                "SELECT 1 LIMIT 1 LIMIT 2",
                (
                    'Parser Error: syntax error at or near "LIMIT" (Expected: end of '
                    "statement, found: LIMIT at Line: 1, Column: 18)"
                ),
            ),
            (
                "SELEC 1",
                (
                    'Parser Error: syntax error at or near "SELEC" (Expected: an SQL '
                    "statement, found: SELEC at Line: 1, Column: 1)"
                ),
            ),
            (
                "SELECT (1",
                "Parser Error: syntax error at end of input (Expected: ), found: EOF)",
            ),
        ],
    )


def test_values_are_assigned_to_their_columns_type_as_duckdb_does(client, schema):
    """`UPDATE`/`MERGE` of a TIMESTAMP into a DATE keeps the day (dbt's snapshots close
    rows with `now()`); an out-of-range value is an error and changes nothing."""
    s = schema
    setup = [
        "CREATE TABLE {s}.d (id INTEGER, day DATE, n INTEGER)",
        "INSERT INTO {s}.d VALUES (1, DATE '2020-01-01', 1), (2, DATE '2020-01-02', 2)",
        "UPDATE {s}.d SET day = TIMESTAMP '2024-05-06 23:59:59' WHERE id = 1",
        (
            "MERGE INTO {s}.d AS t USING (SELECT 2 AS id, TIMESTAMP '2025-07-08 01:02:03'"
            " AS ts) AS src ON t.id = src.id WHEN MATCHED AND t.n > 0 THEN UPDATE SET"
            " day = src.ts"
        ),
    ]
    duck = in_both(client, setup, s)
    want = [
        (i, d.isoformat(), n)
        for i, d, n in duck_rows(duck, "SELECT * FROM f.d ORDER BY id")
    ]
    assert client.rows(f"SELECT * FROM {s}.d ORDER BY id") == want
    assert want == [(1, "2024-05-06", 1), (2, "2025-07-08", 2)]
    with pytest.raises(SqlError) as e:
        client.query(f"UPDATE {s}.d SET n = 3000000000 WHERE id = 1")
    assert e.value.message.startswith("Conversion Error")
    assert client.rows(f"SELECT * FROM {s}.d ORDER BY id") == want


def test_time_columns_hold_times_of_day_in_one_form(client, schema):
    """A `TIME` column (stored as text: Delta has no TIME) takes what DuckDB's takes, by
    INSERT, UPDATE and MERGE, in one form (`7:00` as `07:00:00`), so that its order and
    `max` are the times'; text that is no time of day is refused and changes nothing."""
    s = schema
    setup = [
        "CREATE TABLE {s}.shifts (id INTEGER, start_at TIME)",
        (
            "INSERT INTO {s}.shifts VALUES (1, '09:30:00'), (2, '13:05:00.5'), (3, '7:00'),"
            " (4, NULL)"
        ),
        "INSERT INTO {s}.shifts VALUES (5, TIME '23:59:59.123456')",
        "UPDATE {s}.shifts SET start_at = '8:15' WHERE id = 1",
        (
            "MERGE INTO {s}.shifts AS t USING (SELECT 2 AS id, '6:00:01' AS v) AS src"
            " ON t.id = src.id WHEN MATCHED THEN UPDATE SET start_at = src.v"
        ),
    ]
    duck = in_both(client, setup, s)
    order = "SELECT id FROM {s}.shifts ORDER BY start_at NULLS LAST, id"
    assert client.rows(order.format(s=s)) == duck_rows(duck, order.format(s="f"))
    want = [
        (i, t and t.isoformat())
        for i, t in duck_rows(duck, "SELECT * FROM f.shifts ORDER BY id")
    ]
    assert want == [
        (1, "08:15:00"),
        (2, "06:00:01"),
        (3, "07:00:00"),
        (4, None),
        (5, "23:59:59.123456"),
    ]
    assert client.rows(f"SELECT * FROM {s}.shifts ORDER BY id") == want
    assert client.rows(f"SELECT max(start_at) FROM {s}.shifts") == [
        ("23:59:59.123456",)
    ]
    for bad in [
        f"INSERT INTO {s}.shifts VALUES (6, 'banana')",
        f"INSERT INTO {s}.shifts VALUES (6, '25:99:00')",
        f"UPDATE {s}.shifts SET start_at = 'nope' WHERE id = 1",
    ]:
        with pytest.raises(SqlError) as e:
            client.query(bad)
        assert e.value.message.startswith(
            "Conversion Error: Cast error: Cannot cast string"
        )
    assert client.rows(f"SELECT * FROM {s}.shifts ORDER BY id") == want


def test_views_list_their_columns_and_read_their_cte_chains(client, schema):
    """dbt's docs read a view's columns from `duckdb_columns()`; dbt's ephemeral models
    put a CTE chain in parentheses in a view's body."""
    name = schema.split(".")[1]
    client.query(
        f"CREATE TABLE {schema}.base AS SELECT CAST(1 AS INTEGER) AS id, 'a' AS name"
    )
    client.query(
        f"CREATE VIEW {schema}.v AS (WITH a AS (WITH b AS (SELECT name, id FROM "
        f"{schema}.base) SELECT id, name FROM b), c AS (SELECT id, name FROM a "
        f"WHERE id < 1000) SELECT name, id FROM c)"
    )
    assert client.rows(f"SELECT * FROM {schema}.v") == [("a", 1)]
    listed = (
        "SELECT table_name, column_name, {index}, data_type FROM {source} "
        f"WHERE schema_name = '{name}' ORDER BY table_name, 3"
    )
    want = [
        ("base", "id", 1, "INTEGER"),
        ("base", "name", 2, "VARCHAR"),
        ("v", "name", 1, "VARCHAR"),
        ("v", "id", 2, "INTEGER"),
    ]
    assert (
        client.rows(listed.format(index="column_index", source="duckdb_columns()"))
        == want
    )
    assert (
        client.rows(
            listed.format(
                index="ordinal_position", source="information_schema.columns"
            ).replace("schema_name", "table_schema")
        )
        == want
    )


def test_tables_are_scanned_into_plain_strings_and_binaries(client, schema):
    """A Delta scan yields Utf8/Binary, as the session asks, not views: results go out
    without a cast, and a hash table holds each value, not the decoded page it sits in."""
    client.query(
        f"CREATE TABLE {schema}.typed AS SELECT 'a' AS s, CAST('b' AS BYTEA) AS b; "
        f"INSERT INTO {schema}.typed VALUES ('c', CAST('d' AS BYTEA))"
    )
    assert client.rows(
        f"SELECT DISTINCT arrow_typeof(s), arrow_typeof(b) FROM {schema}.typed"
    ) == [("Utf8", "Binary")]


def test_show_statements_answer_as_duckdb_within_the_grants(tmp_path):
    """SHOW TABLES [FROM …], SHOW ALL TABLES, SHOW SCHEMAS, SHOW DATABASES and SHOW
    table answer DuckDB's rows and errors; a user granted one catalog sees nothing of another, in any
    form (`FROM` a hidden catalog fails as a missing schema does). A catalog without a table
    is listed too, with its `main`; other dialects' words (`SHOW FULL TABLES`) are refused."""
    setup = [
        "CREATE SCHEMA lakehouse.s2",
        "CREATE TABLE lakehouse.main.t (a INTEGER)",
        "CREATE TABLE lakehouse.s2.u (b VARCHAR, a INTEGER)",
        "CREATE TABLE lakehouse.s2.t (a INTEGER)",
        "CREATE VIEW lakehouse.s2.w AS SELECT a FROM lakehouse.s2.t",
        "CREATE TABLE other.main.secret (x INTEGER)",
    ]
    # DuckDB's default database is the file's: `lakehouse`, as the server's default.
    duck = duckdb.connect(str(tmp_path / "lakehouse.duckdb"))
    duck.execute(
        "ATTACH ':memory:' AS other; ATTACH ':memory:' AS empty; SET TimeZone = 'UTC'"
    )
    for statement in setup:
        duck.execute(statement)

    def duckdb_answer(sql: str):
        try:
            cursor = duck.execute(sql)
        except duckdb.Error as e:
            return str(e)
        # The HTTP API writes lists as JSON arrays.
        return [d[0] for d in cursor.description], [list(r) for r in cursor.fetchall()]

    def ours(client: Client, sql: str):
        try:
            return client.query(sql)
        except SqlError as e:
            return e.message

    with ServerProcess(
        data=tmp_path / "lake",
        users=(("alice", "secret"), ("bob", "pw")),
        catalogs=("lakehouse", "other", "empty"),
        grants={"bob": ["lakehouse"]},
    ) as server:
        alice, bob = Client(server), Client(server, "bob", "pw")
        alice.query("; ".join(setup))
        for sql in [
            "SHOW TABLES",
            "USE lakehouse.s2; SHOW TABLES",
            "SHOW TABLES FROM lakehouse",
            "SHOW TABLES FROM s2",
            "SHOW TABLES FROM lakehouse.s2",
            "SHOW TABLES FROM other",
            "SHOW TABLES FROM lakehouse.nope",
            "SHOW TABLES FROM nope",
            "SHOW TABLES FROM empty",
            "SHOW TABLES FROM empty.main",
            "USE empty; SHOW TABLES",
            "SHOW ALL TABLES",
            "SHOW SCHEMAS",
            "USE lakehouse.s2; SHOW SCHEMAS",
            "SHOW DATABASES",
            "SHOW lakehouse.s2.u",
            "USE lakehouse.s2; SHOW w",
        ]:
            # DuckDB's connection keeps a `USE`: each statement starts from the default.
            duck.execute("USE lakehouse.main")
            assert ours(alice, sql) == duckdb_answer(sql), sql

        hidden = (
            'Catalog Error: SHOW TABLES FROM: No catalog + schema named "{}" found.'
        )
        assert bob.query("SHOW DATABASES") == (["database_name"], [["lakehouse"]])
        assert bob.query("SHOW SCHEMAS") == (
            ["database_name", "schema_name", "current"],
            [["lakehouse", "main", True], ["lakehouse", "s2", False]],
        )
        assert [r[:3] for r in bob.query("SHOW ALL TABLES")[1]] == [
            ["lakehouse", "main", "t"],
            ["lakehouse", "s2", "t"],
            ["lakehouse", "s2", "u"],
            ["lakehouse", "s2", "w"],
        ]
        for sql, message in [
            ("SHOW TABLES FROM other", hidden.format("lakehouse.other")),
            ("SHOW TABLES FROM other.main", hidden.format("other.main")),
            (
                "SHOW other.main.secret",
                "Catalog Error: Catalog with name other does not exist!",
            ),
            ("SHOW TABLES FROM empty.main", hidden.format("empty.main")),
            *(
                (
                    sql,
                    "Parser Error: SHOW takes no TERSE, FULL, EXTENDED, EXTERNAL or HISTORY",
                )
                for sql in [
                    "SHOW FULL TABLES",
                    "SHOW TERSE TABLES",
                    "SHOW EXTENDED TABLES FROM lakehouse",
                    "SHOW TABLES HISTORY",
                    "SHOW TERSE SCHEMAS",
                    "SHOW TERSE DATABASES",
                ]
            ),
            (
                "SHOW TABLES LIKE 't%'",
                (
                    "Not implemented Error: SHOW TABLES takes no filter or limit; "
                    "select from information_schema instead"
                ),
            ),
        ]:
            with pytest.raises(SqlError) as e:
                bob.query(sql)
            assert e.value.message == message, sql


def test_lateral_alias_chains_are_refused_past_their_bound(client):
    """Each use of a lateral alias copies its expression, so a chain of aliases each used
    twice doubles with every link: past 100000 expression nodes the statement is refused
    before planning (forty links would be a trillion nodes), and the server answers the
    next statement."""
    chain = ["1 AS a0"] + [f"a{i} + a{i} AS a{i + 1}" for i in range(40)]
    with pytest.raises(SqlError) as e:
        client.query("SELECT " + ", ".join(chain))
    assert e.value.message == (
        "Binder Error: lateral column aliases expand past 100000 expression nodes; "
        "name the expression in a subquery instead"
    )
    # As every SQL error: the response's error line, after a 200.
    assert e.value.status == 200
    short = ", ".join(chain[:5])
    assert client.query(f"SELECT {short}") == (
        ["a0", "a1", "a2", "a3", "a4"],
        [[1, 2, 4, 8, 16]],
    )


def test_quantile_disc_takes_a_constant_fraction(client, schema):
    """`quantile_disc(x, q)` needs `q` constant and between 0 and 1, as DuckDB does (which
    also takes -1 to 0, for the order reversed; we do not): exact messages, and the
    server answers the next statement."""
    client.query(
        f"CREATE TABLE {schema}.q AS SELECT * FROM (VALUES (1), (2), (3)) v(x)"
    )
    for sql, message in [
        (
            f"SELECT quantile_disc(x, x) FROM {schema}.q",
            (
                'Binder Error: The "quantile" argument in function "quantile_disc" must '
                "be a constant expression"
            ),
        ),
        (
            f"SELECT quantile(x, 1.5) FROM {schema}.q",
            "Binder Error: QUANTILE can only take parameters in the range [0, 1], got 1.5",
        ),
    ]:
        with pytest.raises(SqlError) as e:
            client.query(sql)
        assert e.value.message == message
        assert e.value.status == 200
    assert client.query(f"SELECT quantile_disc(x, 0.5) FROM {schema}.q") == (
        ["quantile_disc(x, 0.5)"],
        [[2]],
    )


def test_star_columns_refusals_and_repeated_names(client, schema):
    """`COLUMNS('regex')` that matches nothing, or does not compile, and `* EXCLUDE`
    of a column the table lacks beside `RENAME`, are refused with DuckDB's message; two items that both name a column (DuckDB repeats the name) get
    `_1`; over a join it selects among the join's columns."""
    client.query(f"CREATE TABLE {schema}.w AS SELECT 1 AS k, 2.5 AS v")
    assert_refused(
        client,
        [
            (
                f"SELECT COLUMNS('zz') FROM {schema}.w",
                'Binder Error: No matching columns found that match regex "zz"',
            ),
            (
                f"SELECT COLUMNS('[') FROM {schema}.w",
                'Binder Error: Failed to compile regex "[": unclosed character class',
            ),
            # `* RENAME` is written out the same way; DuckDB's first line.
            (
                f"SELECT * EXCLUDE (nope) RENAME (k AS j) FROM {schema}.w",
                'Binder Error: Column "nope" in EXCLUDE list not found in FROM clause',
            ),
        ],
    )
    assert client.query(
        f"SELECT min(COLUMNS(*)), max(COLUMNS('k')) FROM {schema}.w"
    ) == (["k", "v", "k_1"], [[1, 2.5, 1]])
    # Over a join its columns are those of `SELECT *` (the USING key once).
    assert client.query(
        f"SELECT COLUMNS('k') FROM {schema}.w a JOIN {schema}.w b USING (k)"
    ) == (["k"], [[1]])
    # A FROM that does not plan alone (here: a table that does not exist) is left as
    # written, and the statement answers DataFusion's planning error for it.
    with pytest.raises(SqlError) as e:
        client.query(
            f"SELECT COLUMNS('k') FROM {schema}.w a JOIN {schema}.nope b USING (k)"
        )
    assert e.value.message.startswith(
        "Catalog Error: Table with name nope does not exist"
    )


def test_pivot_values_read_from_the_table(client, schema):
    """`FOR k IN (ANY [ORDER BY …])` and `FOR k IN (subquery)` (Snowflake's forms, which
    DuckDB does not take) list their values by a query of their own: distinct, without
    NULL, in ascending order unless told; dates named by their text. A pivot over more
    than 10000 values is refused, and so is a tuple that does not match the columns;
    `CREATE TABLE … AS PIVOT …` keeps the value columns."""
    s = schema
    client.query(f"CREATE TABLE {s}.p (k INTEGER, v INTEGER, d DATE)")
    client.query(
        f"INSERT INTO {s}.p VALUES (1, 10, DATE '2024-01-02'), (2, 20, DATE '2024-01-01'), "
        "(1, 5, NULL), (NULL, 7, DATE '2024-01-01')"
    )
    assert client.query(
        f"SELECT * FROM {s}.p PIVOT (sum(v) FOR d IN (ANY)) ORDER BY k"
    ) == (
        ["k", "2024-01-01", "2024-01-02"],
        [[1, None, 10], [2, 20, None], [None, 7, None]],
    )
    assert client.query(
        f"SELECT * FROM {s}.p PIVOT (sum(v) FOR k IN (ANY ORDER BY k DESC)) ORDER BY d"
    ) == (
        ["d", "2", "1"],
        [["2024-01-01", 20, None], ["2024-01-02", None, 10], [None, None, 5]],
    )
    assert client.query(
        f"SELECT * FROM (SELECT k, v FROM {s}.p) "
        f"PIVOT (count(v) FOR k IN (SELECT k FROM {s}.p WHERE k IS NOT NULL ORDER BY v DESC))"
    ) == (["2", "1"], [[1, 2]])
    client.query(f"CREATE TABLE {s}.q AS PIVOT {s}.p ON k USING max(v) GROUP BY d")
    assert client.query(f"SELECT * FROM {s}.q ORDER BY d") == (
        ["d", "1", "2"],
        [["2024-01-01", None, 20], ["2024-01-02", 10, None], [None, 5, None]],
    )
    assert_refused(
        client,
        [
            (
                "PIVOT range(10001) ON range",
                (
                    "Binder Error: Pivot column limit of 10000 exceeded: list the values, "
                    "as in FOR k IN (1, 2)"
                ),
            ),
            (
                f"SELECT * FROM {s}.p PIVOT (sum(v) FOR (k, d) IN (1, 2))",
                "Binder Error: PIVOT value 1 must be a tuple of 2 values, one per pivoted column",
            ),
            (
                f"SELECT * FROM {s}.p UNPIVOT ((a, b) FOR n IN (k, v))",
                "Binder Error: UNPIVOT column k must be a tuple of 2 columns, one per value column",
            ),
        ],
    )
    # The state after the refusals: the next statement answers.
    assert client.query(f"PIVOT {s}.p ON k IN (2) USING sum(v) ORDER BY d") == (
        ["d", "2"],
        [["2024-01-01", 20], ["2024-01-02", None], [None, None]],
    )


def test_samples_take_the_rows_they_name(client, schema):
    """`TABLESAMPLE` was parsed and ignored: every row came back. DuckDB's `USING SAMPLE`
    was refused. A number alone counts rows (distinct rows of the table, all of them
    when there are fewer); a percentage keeps each row with that chance; the sample is
    taken before the WHERE, as in DuckDB. A seed is refused, since it would not repeat
    here; a sample over a join is left to the parser's error."""
    s = schema
    client.query(f"CREATE TABLE {s}.n AS SELECT range AS k FROM range(10000)")
    for sql, expected in [
        (f"SELECT count(*), count(DISTINCT k) FROM {s}.n USING SAMPLE 10", [[10, 10]]),
        (f"SELECT count(*) FROM {s}.n AS x TABLESAMPLE 7 ROWS WHERE x.k >= 0", [[7]]),
        (f"SELECT count(*) FROM {s}.n USING SAMPLE reservoir(2.9 ROWS)", [[2]]),
        (f"SELECT count(*) FROM {s}.n WHERE k < 50 USING SAMPLE 20000", [[50]]),
        (f"SELECT count(*) FROM (FROM {s}.n USING SAMPLE 100%)", [[10000]]),
        (f"SELECT count(*) FROM {s}.n TABLESAMPLE BERNOULLI (0 PERCENT)", [[0]]),
        # 50% of 10000: a count outside 4500-5500 is ten standard deviations out.
        (
            f"SELECT count(*) BETWEEN 4500 AND 5500 FROM {s}.n USING SAMPLE 50%",
            [[True]],
        ),
        (f"SELECT count(*) BETWEEN 4500 AND 5500 FROM {s}.n TABLESAMPLE 50%", [[True]]),
    ]:
        assert client.query(sql)[1] == expected, sql
    assert_refused(
        client,
        [
            (
                f"SELECT * FROM {s}.n USING SAMPLE 10% (bernoulli, 42)",
                (
                    "Not implemented Error: a sample with a seed (TABLESAMPLE BERNOULLI "
                    "(10 PERCENT) REPEATABLE (42)): samples here are not repeatable; leave "
                    "the seed out"
                ),
            ),
            (
                f"SELECT count(*) FROM {s}.n a JOIN {s}.n b USING (k) USING SAMPLE 7",
                (
                    'Parser Error: syntax error at or near "USING" (Expected: end of '
                    f"statement, found: USING at Line: 1, Column: {47 + 2 * len(s)})"
                ),
            ),
        ],
    )


def test_columns_are_named_without_regard_to_case(client, schema):
    """A column with capitals (an uploaded file's header, a quoted name) is read, filtered,
    updated and merged by any spelling, as in DuckDB, and the result keeps the table's
    spelling; an alias keeps its capitals too (`AS MyName`, also in CREATE TABLE … AS);
    a name the statement defines in another spelling is that name, and two tables' `ID`
    and `id` are told apart by their qualifiers. A quoted name in another case
    (`"customerid"`, `"X"` for `x`) and a `USING` list are matched the same way."""
    s = schema
    setup = [
        f'CREATE TABLE {s}.c ("CustomerID" INTEGER, "Name" VARCHAR, id INTEGER)',
        f"INSERT INTO {s}.c VALUES (1, 'a', 10), (2, 'b', 20)",
        f'CREATE TABLE {s}.u ("ID" INTEGER, x INTEGER)',
        f"INSERT INTO {s}.u VALUES (10, 5), (30, 6)",
    ]
    duck = duckdb.connect()
    duck.execute(f"ATTACH ':memory:' AS lakehouse; CREATE SCHEMA {s}")
    for statement in setup:
        duck.execute(statement)
    client.query("; ".join(setup))

    def same(sql: str):
        cursor = duck.execute(sql)
        expected = (
            [d[0] for d in cursor.description],
            [list(r) for r in cursor.fetchall()],
        )
        assert client.query(sql) == expected, sql

    for sql in [
        f"SELECT CustomerID, name, NAME AS n2 FROM {s}.c ORDER BY customerid",
        f"SELECT c.customerid, count(*) AS n FROM {s}.c c GROUP BY c.CUSTOMERID ORDER BY 1",
        f"SELECT * FROM {s}.c WHERE Name = 'b'",
        f"SELECT * EXCLUDE (customerid) FROM {s}.c ORDER BY id",
        f"SELECT q.* EXCLUDE name FROM {s}.c AS q ORDER BY id",
        f"SELECT u.id AS a, c.id AS b FROM {s}.c JOIN {s}.u ON c.id = u.id",
        f"SELECT {s}.u.id FROM {s}.u ORDER BY 1",
        f'SELECT id FROM (SELECT "ID" AS id FROM {s}.u) ORDER BY id',
        f"SELECT x AS id FROM {s}.u ORDER BY id DESC",
        f"WITH w AS (SELECT customerid AS k FROM {s}.c) SELECT k FROM w ORDER BY k",
        # Names the statement defines keep their case, and are theirs by any spelling.
        "SELECT 1 AS MyName",
        f"SELECT x AS Total FROM {s}.u ORDER BY total DESC",
        f"SELECT total FROM (SELECT x AS Total FROM {s}.u) q ORDER BY 1",
        "WITH w(A, b) AS (SELECT 1, 2) SELECT a, B FROM w",
        "SELECT k FROM (SELECT 1) q(K)",
        # Quoted names in another case, and USING lists.
        f'SELECT "customerid", c."NAME" FROM {s}.c ORDER BY "CUSTOMERID"',
        f'SELECT "X" FROM {s}.u ORDER BY 1',
        f'SELECT "total" FROM (SELECT x AS Total FROM {s}.u) ORDER BY 1',
        f"SELECT * FROM {s}.c JOIN (SELECT 1 AS CustomerID) k USING (CUSTOMERID)",
        f'SELECT name FROM {s}.c JOIN (SELECT 2 AS "CustomerID") k USING ("customerid")',
    ]:
        same(sql)
    ctas = f"CREATE TABLE {s}.m AS SELECT 1 AS MyCol, 'x' AS lower_col"
    duck.execute(ctas)
    client.query(ctas)
    same(f"SELECT * FROM {s}.m")
    same(f"SELECT mycol AS v FROM {s}.m")
    for sql in [
        f"UPDATE {s}.c SET name = name || 'z' WHERE customerid = 1",
        f"DELETE FROM {s}.c WHERE CUSTOMERID = 2",
        f"INSERT INTO {s}.c (customerid, name) VALUES (7, 'q')",
        (
            f"MERGE INTO {s}.c AS t USING (SELECT 7 AS customerid, 'm' AS name) src "
            "ON t.customerid = src.customerid WHEN MATCHED THEN UPDATE SET name = src.name"
        ),
        (
            f"MERGE INTO {s}.c AS t USING (SELECT 8 AS CustomerID, 'n' AS Name) src "
            "ON t.customerid = src.customerid WHEN NOT MATCHED THEN INSERT BY NAME"
        ),
    ]:
        duck.execute(sql)
        client.query(sql)
    same(f"SELECT * FROM {s}.c ORDER BY 1")
    with pytest.raises(SqlError) as e:
        client.query(f"UPDATE {s}.c SET nope = 1")
    # DuckDB's first line; its second suggests a column ("Did you mean").
    assert (
        e.value.message
        == "Binder Error: Referenced update column nope not found in table!"
    )


@pytest.mark.parametrize(
    "expression",
    [
        "[1, NULL, 3]",
        "[]::INTEGER[]",
        "[[1, 2], NULL, []]",
        "['a', 'b\"c', NULL]",
        "{'a': 1, 'b': 'x', 'c': NULL}",
        "{'a': [1, 2], 'b': {'c': 2.5}}",
        "[{'a': 1}, NULL]",
        "map([1, 2], ['a', 'b'])",
        "map(['k'], [[1]])",
        "string_split('a,b', ',')",
        "[1.5::DECIMAL(4,2), NULL]",
        "[DATE '2024-01-02']",
        "INTERVAL '1 year 2 months 3 days 04:05:06.789'",
        "INTERVAL '36 hours'",
        "INTERVAL '1.5 seconds'",
        "INTERVAL '-1 day -2 hours'",
        "INTERVAL '0 seconds'",
        "TIMESTAMP '2024-01-02 03:00:00' - TIMESTAMP '2023-12-31 00:00:00'",
        "TIMESTAMP '2024-01-01 00:00:00' - TIMESTAMP '2024-01-01 00:00:01.25'",
        "[INTERVAL '1 day']",
    ],
)
def test_nested_values_and_intervals_are_json_as_duckdb_writes_them(client, expression):
    """A list, struct or map in a JSON result is a JSON array or object (was its Arrow
    display text, `"[1, , 3]"`), each value as DuckDB's `to_json` writes it; an interval
    is DuckDB's text (a duration was `"PT86400S"`). Through both JSON formats."""
    duck = duckdb.connect()
    expected = json.loads(duck.execute(f"SELECT to_json({expression})").fetchone()[0])
    columns, rows = client.query(f"SELECT {expression} AS x")
    assert (columns, rows) == (["x"], [[expected]])
    lines = client.query_text(f"SELECT {expression} AS x", format="jsonl").splitlines()
    assert [json.loads(line) for line in lines] == [{"x": expected}]


def test_nested_values_of_a_table_are_json(client, schema):
    """Lists and structs read from a table and built by aggregates, over several rows."""
    client.query(
        f"CREATE TABLE {schema}.n AS SELECT * FROM (VALUES (1, 'a'), (1, NULL), (2, 'c')) "
        "AS v(k, s)"
    )
    assert client.query(
        f"SELECT k, array_agg(s ORDER BY s NULLS FIRST) AS l, {{'k': k, 'n': count(*)}} AS st "
        f"FROM {schema}.n GROUP BY k ORDER BY k"
    ) == (
        ["k", "l", "st"],
        [[1, [None, "a"], {"k": 1, "n": 2}], [2, ["c"], {"k": 2, "n": 1}]],
    )
    client.query(
        f"CREATE TABLE {schema}.m AS SELECT k, array_agg(s) AS l FROM {schema}.n "
        "WHERE s IS NOT NULL GROUP BY k"
    )
    assert client.query(f"SELECT l FROM {schema}.m ORDER BY k") == (
        ["l"],
        [[["a"]], [["c"]]],
    )
    # CSV writes them as DuckDB's text (Arrow's CSV writer refused them: the body was cut).
    assert client.query_text(
        f"SELECT k, array_agg(s ORDER BY s) AS l, {{'s': min(s)}} AS st, "
        f"k * INTERVAL '36 hours' AS i FROM {schema}.n GROUP BY k ORDER BY k",
        format="csv",
    ) == ("k,l,st,i\n1,\"[a, NULL]\",{'s': a},36:00:00\n2,[c],{'s': c},72:00:00\n")


def test_strptime_reads_columns_and_names_the_text_it_cannot_parse(client, schema):
    """`strptime` over a column failed with DataFusion's internal error (its
    `to_timestamp_micros` promised a zone it did not give); text no format parses fails
    the statement with DuckDB's message and leaves the target unchanged."""
    client.query(
        f"CREATE TABLE {schema}.raw AS SELECT * FROM (VALUES (1, '2024-01-05'), "
        "(2, '2024-02-01 10:20')) AS v(id, s)"
    )
    assert client.query(
        f"SELECT id, strptime(s, ['%Y-%m-%d %H:%M', '%Y-%m-%d']) AS t FROM {schema}.raw "
        "ORDER BY id"
    ) == (["id", "t"], [[1, "2024-01-05T00:00:00"], [2, "2024-02-01T10:20:00"]])
    client.query(f"CREATE TABLE {schema}.parsed (id INTEGER, t TIMESTAMP)")
    with pytest.raises(SqlError) as refused:
        client.query(
            f"INSERT INTO {schema}.parsed SELECT id, strptime(s, '%Y-%m-%d') FROM {schema}.raw"
        )
    assert refused.value.message == (
        'Invalid Input Error: Could not parse string "2024-02-01 10:20" according to '
        'format specifier "%Y-%m-%d"'
    )
    assert client.query(f"SELECT count(*) AS n FROM {schema}.parsed") == (["n"], [[0]])
    assert client.query(
        f"SELECT try_strptime(s, '%Y-%m-%d') AS t FROM {schema}.raw ORDER BY id"
    ) == (["t"], [["2024-01-05T00:00:00"], [None]])


def test_a_date_against_a_timestamp_bound_is_exact_and_prunes(client, schema):
    """A date plus an interval is a TIMESTAMP, as in DuckDB: it was a DATE, the interval's
    time dropped, so `day < DATE '2024-01-02' + INTERVAL 1 HOUR` left out 2024-01-02. A
    DATE column compared with a TIMESTAMP constant reads only the partitions the bound
    leaves: DataFusion's comparison of the column cast to a TIMESTAMP read them all."""
    client.query(
        f"CREATE TABLE {schema}.days (id INTEGER, day DATE) PARTITIONED BY (day)"
    )
    client.query(
        f"INSERT INTO {schema}.days VALUES (1, DATE '2024-01-01'), (2, DATE '2024-01-02'), "
        "(3, DATE '2024-01-03')"
    )
    assert client.query(
        "SELECT DATE '2024-01-01' + INTERVAL 90 MINUTE AS t, "
        "typeof(DATE '2024-01-01' - INTERVAL 1 DAY) AS y"
    ) == (["t", "y"], [["2024-01-01T01:30:00", "TIMESTAMP"]])
    for where, ids in [
        ("day >= DATE '2024-01-03' - INTERVAL 1 DAY", [2, 3]),
        ("day < DATE '2024-01-02' + INTERVAL 1 HOUR", [1, 2]),
        ("day > TIMESTAMP '2024-01-02 10:00:00'", [3]),
        ("TIMESTAMP '2024-01-02 00:00:00' >= day", [1, 2]),
        ("day = DATE '2024-01-02' + INTERVAL 0 DAY", [2]),
    ]:
        statement = f"SELECT id FROM {schema}.days WHERE {where}"
        assert sorted(r[0] for r in client.rows(statement)) == ids, where
        (scan,) = client.scans(statement)
        read = sorted(re.findall(r"day=(\d{4}-\d\d-\d\d)/", scan))
        assert read == [f"2024-01-0{i}" for i in ids], (where, scan)
    # No day equals an instant that is not a midnight: nothing, whatever is read.
    assert (
        client.rows(
            f"SELECT id FROM {schema}.days WHERE day = TIMESTAMP '2024-01-02 10:00:00'"
        )
        == []
    )


def test_timestamp_text_without_seconds_is_read_as_duckdb_reads_it(client, schema):
    """`'2024-01-01 10:00'` and a one-digit hour are TIMESTAMPs to DuckDB; Arrow's parser
    refused them ('error parsing time') in a literal, a cast of a column, a comparison,
    and the values an INSERT, UPDATE or MERGE writes."""
    t = f"{schema}.times"
    client.query(f"CREATE TABLE {t} (id INTEGER, ts TIMESTAMP, tz TIMESTAMPTZ)")
    client.query(
        f"INSERT INTO {t} VALUES (1, '2024-01-01 10:00', '2024-01-01 10:00+02')"
    )
    client.query(
        f"INSERT INTO {t} SELECT 2, s, s FROM (VALUES ('2024-01-02 1:02:03')) AS v(s)"
    )
    client.query(f"UPDATE {t} SET ts = '2024-01-03 10:30' WHERE id = 2")
    client.query(
        f"MERGE INTO {t} USING (SELECT 3 AS id, '2024-01-05 10:00' AS s) AS src "
        f"ON {t}.id = src.id WHEN NOT MATCHED THEN INSERT VALUES (src.id, src.s, src.s)"
    )
    assert client.query(f"SELECT * FROM {t} ORDER BY id") == (
        ["id", "ts", "tz"],
        [
            [1, "2024-01-01T10:00:00", "2024-01-01T08:00:00+00:00"],
            [2, "2024-01-03T10:30:00", "2024-01-02T01:02:03+00:00"],
            [3, "2024-01-05T10:00:00", "2024-01-05T10:00:00+00:00"],
        ],
    )
    assert client.query(
        f"SELECT id, TIMESTAMP '2024-01-31 10:00' + INTERVAL 1 MONTH AS m, "
        f"CAST(s AS TIMESTAMP) FROM {t}, (VALUES ('2024-01-01T09:15Z')) AS v(s) "
        "WHERE ts > '2024-01-01 10:00' ORDER BY id"
    ) == (
        ["id", "m", "CAST(s AS TIMESTAMP)"],
        [[2, "2024-02-29T10:00:00", "2024-01-01T09:15:00"]]
        + [[3, "2024-02-29T10:00:00", "2024-01-01T09:15:00"]],
    )
    # Text that is no timestamp still fails with Arrow's message, and writes nothing.
    with pytest.raises(SqlError) as refused:
        client.query(f"INSERT INTO {t} VALUES (4, '2024-01-01 10', NULL)")
    assert refused.value.message == (
        "Conversion Error: Parser error: Error parsing timestamp from '2024-01-01 10': "
        "error parsing time"
    )
    assert client.count(f"SELECT count(*) FROM {t}") == 3


@pytest.mark.parametrize(
    ("statement", "clause"),
    [
        ("DELETE FROM {t} WHERE a > 0 ORDER BY a LIMIT 1", "DELETE … ORDER BY"),
        ("DELETE FROM {t} WHERE a > 0 LIMIT 1", "DELETE … LIMIT"),
        ("UPDATE {t} SET a = a + 10 WHERE a > 0 LIMIT 1", "UPDATE … LIMIT"),
        ("UPDATE {t} SET a = 0 ORDER BY a", "UPDATE … ORDER BY"),
        (
            "INSERT INTO {t} VALUES (4) RETURNING *",
            "INSERT … RETURNING (read the rows with a SELECT)",
        ),
        (
            "DELETE FROM {t} WHERE a = 1 RETURNING a",
            "DELETE … RETURNING (read the rows with a SELECT)",
        ),
        (
            "UPDATE {t} SET a = 5 WHERE a = 2 RETURNING *",
            "UPDATE … RETURNING (read the rows with a SELECT)",
        ),
        (
            "INSERT OVERWRITE {t} SELECT 5",
            "INSERT OVERWRITE (use CREATE OR REPLACE TABLE … AS, or TRUNCATE then INSERT)",
        ),
        # In a script, the statements before it do not run either.
        ("INSERT INTO {t} VALUES (9); DELETE FROM {t} LIMIT 1", "DELETE … LIMIT"),
    ],
)
def test_write_clauses_that_would_be_ignored_are_refused(
    client, schema, statement, clause
):
    """`DELETE … LIMIT 1` deleted every matching row, `UPDATE … LIMIT` updated them all,
    `INSERT OVERWRITE` appended and `RETURNING` answered a count: each clause was parsed
    and then ignored. Now each is refused before anything runs."""
    t = f"{schema}.w"
    client.query(f"CREATE TABLE {t} (a INTEGER); INSERT INTO {t} VALUES (1), (2), (3)")
    with pytest.raises(SqlError) as refused:
        client.query(statement.format(t=t))
    assert refused.value.message == (
        f"Not implemented Error: {clause} is not supported here; nothing was changed"
    )
    assert client.query(f"SELECT a FROM {t} ORDER BY a") == (["a"], [[1], [2], [3]])


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            "a INTEGER CHECK (a > 0)",
            "CHECK constraints are not supported (column a): they would not be enforced",
        ),
        (
            "a INTEGER, CONSTRAINT positive CHECK (a > 0)",
            "CHECK constraints are not supported (table {t}): they would not be enforced",
        ),
        (
            "a INTEGER REFERENCES other (id)",
            "foreign keys are not supported (column a): they would not be enforced",
        ),
        (
            "a INTEGER, b INTEGER GENERATED ALWAYS AS (a + 1)",
            "generated columns are not supported (column b): they would not be enforced",
        ),
        (
            "s VARCHAR COLLATE nocase",
            "collations are not supported (column s): they would not be enforced",
        ),
    ],
)
def test_constraints_that_would_not_be_enforced_are_refused(
    client, schema, columns, message
):
    """A `CHECK (a > 0)` column took -1: the constraint was parsed and dropped. Each
    option the tables could not carry out is refused; no table is made. `PRIMARY KEY`
    and `UNIQUE` stay accepted (informational, as Delta's are)."""
    t = f"{schema}.c"
    with pytest.raises(SqlError) as refused:
        client.query(f"CREATE TABLE {t} ({columns})")
    assert refused.value.message == "Not implemented Error: " + message.format(t=t)
    with pytest.raises(SqlError) as missing:
        client.query(f"SELECT * FROM {t}")
    assert missing.value.message.startswith(
        "Catalog Error: Table with name c does not exist"
    )
    client.query(f"CREATE TABLE {t} (a INTEGER PRIMARY KEY, u INTEGER UNIQUE)")
    with pytest.raises(SqlError) as refused:
        client.query(f"ALTER TABLE {t} ADD COLUMN b INTEGER CHECK (b > 0)")
    assert refused.value.message == (
        "Not implemented Error: CHECK constraints are not supported (column b): they "
        "would not be enforced"
    )
    assert client.query(f"SELECT * FROM {t}") == (["a", "u"], [])


def test_summarize_answers_duckdbs_columns(client, schema):
    """`SUMMARIZE t` and `SUMMARIZE <query>` were a parser error. Each column's row has
    DuckDB's columns; everything but the quartiles (an approximation, as DuckDB's are) is
    compared with DuckDB's own answer."""
    t = f"{schema}.m"
    rows = "(1, 'a', DATE '2024-01-01', 1.5), (2, NULL, DATE '2024-01-02', NULL), (3, 'b', NULL, 2.5)"
    client.query(f"CREATE TABLE {t} (id INTEGER, s VARCHAR, d DATE, x DOUBLE)")
    client.query(f"INSERT INTO {t} VALUES {rows}")
    duck = duckdb.connect()
    duck.execute(
        f"CREATE TABLE m (id INTEGER, s VARCHAR, d DATE, x DOUBLE); INSERT INTO m VALUES {rows}"
    )
    # DuckDB averages dates and gives their quartiles; here only numbers have them.
    numbers_only = {"avg": 5, "q25": 7, "q50": 8, "q75": 9}
    for ours_sql, duck_sql in [
        (f"SUMMARIZE {t}", "SUMMARIZE m"),
        (
            f"SUMMARIZE SELECT id, s FROM {t} WHERE id > 1",
            "SUMMARIZE SELECT id, s FROM m WHERE id > 1",
        ),
        (
            f"SUMMARIZE FROM {t} WHERE x IS NOT NULL",
            "SUMMARIZE FROM m WHERE x IS NOT NULL",
        ),
    ]:
        columns, ours = client.query(ours_sql)
        cursor = duck.execute(duck_sql)
        assert columns == [c[0] for c in cursor.description]
        expected = cursor.fetchall()
        assert len(ours) == len(expected)
        for mine, theirs in zip(ours, expected):
            theirs = list(theirs)
            theirs[11] = float(theirs[11])
            if theirs[1] == "DATE":
                for i in numbers_only.values():
                    theirs[i] = None
            for i in (7, 8, 9):
                if mine[i] is not None:
                    assert (
                        float(theirs[i]) - 1 <= float(mine[i]) <= float(theirs[i]) + 1
                    )
                    mine[i] = theirs[i]
            assert mine == theirs, ours_sql
    with pytest.raises(SqlError) as missing:
        client.query(f"SUMMARIZE {schema}.nope")
    assert missing.value.message.startswith(
        "Catalog Error: Table with name nope does not exist"
    )
