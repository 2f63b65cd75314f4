"""The DuckDB statement forms Altertable's clients send, one by one against a real server,
with the exact answer and the state left behind (the random differential coverage is in
`test_sql_oracle.py`)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import duckdb
import pytest
from conftest import SqlError
from deltalake import DeltaTable

_names = itertools.count()


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
    DuckDB names each after its text, and so do we (an alias still wins)."""
    client.query(
        f"CREATE TABLE {schema}.t AS SELECT * FROM (VALUES (1), (2), (3)) AS v(id)"
    )
    columns, rows = client.query(
        f"SELECT (SELECT count(*) FROM {schema}.t), (SELECT max(id) FROM {schema}.t), "
        f"EXISTS (SELECT 1 FROM {schema}.t WHERE id = 9), "
        f"(SELECT min(id) FROM {schema}.t) AS low"
    )
    assert columns == [
        f"(SELECT count(*) FROM {schema}.t)",
        f"(SELECT max(id) FROM {schema}.t)",
        f"EXISTS (SELECT 1 FROM {schema}.t WHERE id = 9)",
        "low",
    ]
    assert rows == [[3, 3, False, 1]]
    # DuckDB answers the same values.
    duck = duckdb.connect()
    duck.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1), (2), (3)) AS v(id)")
    assert duck.execute(
        "SELECT (SELECT count(*) FROM t), (SELECT max(id) FROM t), "
        "EXISTS (SELECT 1 FROM t WHERE id = 9), (SELECT min(id) FROM t) AS low"
    ).fetchall() == [(3, 3, False, 1)]
