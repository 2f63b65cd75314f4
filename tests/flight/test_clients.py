"""The real Flight SQL clients, unchanged, against a real `deltalite serve`:
adbc-driver-flightsql (DB-API) and altertable-flightsql (its public API). Each test
asserts what the server holds afterwards, not only that the call returned.

Run by scripts/test-flight.sh (server started on the host, these tests in the CPython
3.13 root). Table names are unique per test: the server is shared by the session.
"""

from __future__ import annotations

import json
import os
import uuid
import warnings
from datetime import datetime
from pathlib import Path

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest
from altertable_flightsql import Client
from altertable_flightsql.client import IngestIncrementalOptions, IngestTableMode


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def adbc_conn(altertable_service):
    uri = f"grpc://{altertable_service['host']}:{altertable_service['port']}"
    with warnings.catch_warnings():
        # The server supports transactions: the driver turns autocommit off (DB-API)
        # without a warning.
        warnings.simplefilter("error")
        conn = adbc.connect(
            uri,
            db_kwargs={
                "username": altertable_service["username"],
                "password": altertable_service["password"],
            },
        )
    yield conn
    conn.close()


@pytest.fixture
def client(altertable_client) -> Client:
    return altertable_client


def rows(client: Client, sql: str) -> list[dict]:
    return client.query(sql).read_all().to_pylist()


# -- adbc-driver-flightsql -------------------------------------------------------------


def test_adbc_connects_with_unpadded_basic_and_queries(adbc_conn, altertable_service):
    # "altertable-test:lk_test" is 23 bytes: the Go driver sends its base64 without the
    # padding pyarrow adds, and the server accepts both.
    assert len(f"{altertable_service['username']}:{altertable_service['password']}") % 3
    cur = adbc_conn.cursor()
    cur.execute("SELECT 1 AS x, 'a' AS s")
    assert cur.fetchall() == [(1, "a")]
    assert [d[0] for d in cur.description] == ["x", "s"]
    cur.close()


def test_adbc_ddl_dml_and_parameters(adbc_conn, client):
    table = unique("adbc_t")
    cur = adbc_conn.cursor()
    # DDL: executed at GetFlightInfo (the driver never fetches its result).
    cur.execute(f"CREATE TABLE {table} (id INT, name VARCHAR)")
    cur.execute(f"INSERT INTO {table} VALUES (?, ?)", (1, "a"))
    cur.executemany(f"INSERT INTO {table} VALUES (?, ?)", [(2, "b"), (3, "it's")])
    cur.execute(f"SELECT name FROM {table} WHERE id >= ? ORDER BY id", (2,))
    assert cur.fetchall() == [("b",), ("it's",)]
    # A bound NULL, and a parameter the statement uses twice.
    cur.execute(f"INSERT INTO {table} VALUES ($1, $2)", (4, None))
    cur.execute(f"SELECT id FROM {table} WHERE id = $1 OR id = $1 + 3", (1,))
    assert sorted(cur.fetchall()) == [(1,), (4,)]
    cur.close()
    adbc_conn.commit()
    assert rows(client, f"SELECT id, name FROM {table} ORDER BY id") == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": "it's"},
        {"id": 4, "name": None},
    ]


def test_adbc_runs_duckdb_lambdas_comprehensions_glob_and_collations(adbc_conn):
    """DuckDB's lambdas (a bound parameter in a lambda's body too), list comprehensions,
    GLOB and COLLATE NOCASE through the Go Flight SQL driver, prepared and plain."""
    cur = adbc_conn.cursor()
    cur.execute(
        "SELECT list_transform([1, 2], lambda x: x * ?) AS a, "
        "[y FOR y IN [1, 2, 3] IF y > ?] AS b, "
        "list_reduce([1, 2, 3], lambda s, x: s + x) AS c",
        (10, 1),
    )
    assert cur.fetchall() == [([10, 20], [2, 3], 6)]
    cur.execute(
        "SELECT 'abc' GLOB 'a*' AS g, 'abc' NOT GLOB '?' AS h, "
        "'A' = 'a' COLLATE NOCASE AS n, list_filter(['a', 'B'], x -> x > 'A') AS f"
    )
    assert cur.fetchall() == [(True, True, True, ["a", "B"])]
    cur.close()


def test_adbc_show_tables_lists_what_duckdb_lists(adbc_conn, client):
    """`SHOW TABLES` and `SHOW ALL TABLES` over Flight: their result is known only by
    running them, so GetFlightInfo runs them; ALL's column lists arrive as lists."""
    table = unique("adbc_show")
    cur = adbc_conn.cursor()
    cur.execute(f"CREATE TABLE {table} (id INT, name VARCHAR)")
    adbc_conn.commit()
    cur.execute("SHOW TABLES")
    assert [d[0] for d in cur.description] == ["name"]
    assert (table,) in cur.fetchall()
    cur.execute("SHOW ALL TABLES")
    shown = {r[2]: r[3:5] for r in cur.fetchall()}
    assert shown[table] == (["id", "name"], ["INTEGER", "VARCHAR"])
    cur.close()


def test_adbc_commit_and_rollback(adbc_conn, client):
    table = unique("adbc_tx")
    made = unique("adbc_tx_new")
    cur = adbc_conn.cursor()
    cur.execute(f"CREATE TABLE {table} (id INT)")
    cur.execute(f"INSERT INTO {table} VALUES (1)")
    adbc_conn.commit()
    cur.execute(f"INSERT INTO {table} VALUES (2)")
    cur.execute(f"CREATE TABLE {made} (a INT)")
    cur.execute(f"SELECT count(*) FROM {table}")
    assert cur.fetchall() == [(2,)]
    adbc_conn.rollback()
    assert rows(client, f"SELECT id FROM {table}") == [{"id": 1}]
    assert client.get_tables(table_pattern=made).read_all().num_rows == 0
    # Closing with a transaction open rolls it back too.
    cur.execute(f"INSERT INTO {table} VALUES (3)")
    cur.close()
    adbc_conn.close()
    assert rows(client, f"SELECT id FROM {table}") == [{"id": 1}]


def test_adbc_cursor_runs_the_same_sql_again_after_commit_and_rollback(
    adbc_conn, client
):
    """The DB-API loop: execute, commit, the same SQL again. The cursor keeps the
    prepared handle of its last SQL (made in the transaction then open) and runs it again
    in the transaction the driver began after the commit."""
    table = unique("adbc_loop")
    cur = adbc_conn.cursor()
    cur.execute(f"CREATE TABLE {table} (id INT)")
    adbc_conn.commit()
    insert = f"INSERT INTO {table} VALUES (?)"
    count = f"SELECT count(*) FROM {table}"
    for i in range(3):
        cur.execute(insert, (i,))
        adbc_conn.commit()
        cur.execute(count)
        assert cur.fetchall() == [(i + 1,)]
        adbc_conn.commit()
    # After a rollback: the rolled-back row is gone, the next one is staged again and
    # committed (seen by another client only then).
    cur.execute(insert, (10,))
    adbc_conn.rollback()
    cur.execute(insert, (11,))
    cur.execute(count)
    assert cur.fetchall() == [(4,)]
    assert rows(client, f"SELECT id FROM {table} ORDER BY id") == [
        {"id": i} for i in range(3)
    ]
    adbc_conn.commit()
    assert rows(client, f"SELECT id FROM {table} ORDER BY id") == [
        {"id": i} for i in (0, 1, 2, 11)
    ]
    cur.close()


def test_adbc_binds_timestamps_beyond_nanoseconds_range(adbc_conn, client):
    """TIMESTAMP is microseconds, as in DuckDB and Delta: the usual "no end" value and
    old dates bind and compare (DataFusion's nanoseconds end in 2262)."""
    table = unique("adbc_ts")
    cur = adbc_conn.cursor()
    cur.execute(f"CREATE TABLE {table} (id INT, ts TIMESTAMP)")
    end, old = datetime(9999, 12, 31, 23, 59, 59), datetime(1500, 1, 1)
    cur.execute(f"INSERT INTO {table} VALUES (?, ?), (?, ?)", (1, end, 2, old))
    cur.execute(f"SELECT id FROM {table} WHERE ts > ?", (datetime(9000, 1, 1),))
    assert cur.fetchall() == [(1,)]
    cur.execute(f"SELECT id, ts FROM {table} WHERE ts < TIMESTAMP '1600-01-01'")
    assert cur.fetchall() == [(2, old)]
    adbc_conn.commit()
    cur.close()


def test_adbc_executemany_inserts_a_chunk_of_rows_per_statement(adbc_conn, client):
    """DB-API's `executemany` of a one-row `INSERT … VALUES (?, …)`: the bound rows go in
    as one multi-row INSERT per 1000 rows (one data file each), not one statement, commit
    and file per row (81 ms a row before)."""
    table = unique("adbc_many")
    cur = adbc_conn.cursor()
    cur.execute(f"CREATE TABLE {table} (id INT, s VARCHAR, ts TIMESTAMP)")
    adbc_conn.commit()
    rows = [
        (i, None if i % 7 == 0 else f"it's {i}", datetime(2024, 1, 1, i % 24))
        for i in range(2500)
    ]
    cur.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", rows)
    adbc_conn.commit()
    got = client.query(f"SELECT id, s, ts FROM {table} ORDER BY id").read_all()
    assert got.column("id").to_pylist() == [r[0] for r in rows]
    assert got.column("s").to_pylist() == [r[1] for r in rows]
    assert [t.replace(tzinfo=None) for t in got.column("ts").to_pylist()] == [
        r[2] for r in rows
    ]
    data = [f for f in files_in(table) if f.endswith(".parquet")]
    assert len(data) == 3, data
    cur.close()


def test_adbc_errors_are_the_servers_messages(adbc_conn):
    cur = adbc_conn.cursor()
    with pytest.raises(Exception, match="Permission Error: COPY is not allowed"):
        cur.execute("COPY (SELECT 1) TO '/tmp/adbc-copy.csv'")
    assert not os.path.exists("/tmp/adbc-copy.csv")
    with pytest.raises(
        Exception, match="Catalog Error: Table with name nope_missing does not exist!"
    ):
        cur.execute("SELECT * FROM nope_missing")
    cur.close()


def test_adbc_get_objects_and_info(adbc_conn, client):
    table = unique("adbc_obj")
    client.execute(f"CREATE TABLE {table} (id BIGINT, note VARCHAR)")
    objects = adbc_conn.adbc_get_objects(depth="all").read_all().to_pylist()
    catalogs = {c["catalog_name"]: c for c in objects}
    assert "lakehouse" in catalogs
    schemas = {
        s["db_schema_name"]: s for s in catalogs["lakehouse"]["catalog_db_schemas"]
    }
    tables = {t["table_name"]: t for t in schemas["main"]["db_schema_tables"]}
    assert tables[table]["table_type"] == "TABLE"
    assert [c["column_name"] for c in tables[table]["table_columns"]] == ["id", "note"]
    info = adbc_conn.adbc_get_info()
    assert info["vendor_name"] == "deltalite"


def test_adbc_ingest_every_mode(adbc_conn, client):
    table = unique("adbc_ing")
    cur = adbc_conn.cursor()
    data = pa.table({"a": [1, 2], "b": ["x", "y"]})
    assert cur.adbc_ingest(table, data, mode="create") == 2
    with pytest.raises(Exception, match="already exists"):
        cur.adbc_ingest(table, data, mode="create")
    cur.adbc_ingest(table, pa.table({"a": [3], "b": ["z"]}), mode="append")
    cur.adbc_ingest(table, pa.table({"a": [4], "b": ["w"]}), mode="create_append")
    assert rows(client, f"SELECT a FROM {table} ORDER BY a") == [
        {"a": 1},
        {"a": 2},
        {"a": 3},
        {"a": 4},
    ]
    cur.adbc_ingest(table, pa.table({"a": [9], "b": ["r"]}), mode="replace")
    assert rows(client, f"SELECT a, b FROM {table}") == [{"a": 9, "b": "r"}]
    with pytest.raises(Exception, match="does not exist"):
        cur.adbc_ingest(unique("adbc_none"), data, mode="append")
    cur.close()


def test_adbc_ingest_of_zero_rows_is_refused_with_a_reason(adbc_conn, client):
    """The Go driver sends no message at all for an empty table (not even the one that
    names the command), so the server cannot know the table: it says so, as an invalid
    argument, and nothing is created."""
    table = unique("adbc_zero")
    cur = adbc_conn.cursor()
    empty = pa.table({"a": pa.array([], pa.int64())})
    with pytest.raises(adbc.ProgrammingError) as e:
        cur.adbc_ingest(table, empty, mode="create")
    assert str(e.value) == (
        "INVALID_ARGUMENT: [FlightSQL] Invalid Input Error: the DoPut stream holds no "
        "message, so no command: nothing was written (an ADBC ingest of zero rows sends "
        "none) (InvalidArgument; FlightSQL.BulkIngest.Execute)"
    )
    cur.close()
    assert rows(
        client,
        f"SELECT count(*) AS n FROM information_schema.tables WHERE table_name = '{table}'",
    ) == [{"n": 0}]


# -- altertable-flightsql --------------------------------------------------------------


def test_query_execute_and_counts(client):
    table = unique("at_t")
    assert (
        client.execute(f"CREATE TABLE {table} (id INT, name VARCHAR, value INT)") == 0
    )
    assert (
        client.execute(
            f"INSERT INTO {table} VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)"
        )
        == 3
    )
    assert client.execute(f"UPDATE {table} SET value = 0 WHERE id > 1") == 2
    assert client.execute(f"DELETE FROM {table} WHERE id = 1") == 1
    reader = client.query(f"SELECT id, value FROM {table} ORDER BY id")
    assert reader.read_all().to_pylist() == [
        {"id": 2, "value": 0},
        {"id": 3, "value": 0},
    ]


def test_prepared_statements_both_styles(client):
    table = unique("at_p")
    client.execute(f"CREATE TABLE {table} (id INT, value INT)")
    client.execute(f"INSERT INTO {table} VALUES (1, 100), (2, 200), (3, 300)")
    with client.prepare(
        f"SELECT id FROM {table} WHERE id = $id AND value >= $v"
    ) as stmt:
        assert stmt.query(parameters={"id": 2, "v": 150}).read_all().to_pylist() == [
            {"id": 2}
        ]
        # The same statement again, with other values.
        assert stmt.query(parameters={"id": 1, "v": 150}).read_all().num_rows == 0
    with client.prepare(f"SELECT id FROM {table} WHERE value >= ? ORDER BY id") as stmt:
        assert stmt.query(parameters=[200]).read_all().to_pylist() == [
            {"id": 2},
            {"id": 3},
        ]
        with pytest.raises(ValueError, match="Expected 1 parameters, but got 2"):
            stmt.query(parameters=[1, 2])
    # Each run takes the values bound for it: the client binds after asking for the
    # FlightInfo, so nothing may run before the DoGet.
    with client.prepare(f"INSERT INTO {table} VALUES (?, ?)") as stmt:
        stmt.query(parameters=[4, None]).read_all()
        stmt.query(parameters=[5, 500]).read_all()
    assert rows(client, f"SELECT id, value FROM {table} WHERE id >= 4 ORDER BY id") == [
        {"id": 4, "value": None},
        {"id": 5, "value": 500},
    ]


def test_ingest_modes_and_upsert(client):
    table = unique("at_ing")
    schema = pa.schema([("id", pa.int64()), ("email", pa.string()), ("ts", pa.int64())])

    def ingest(batch, **kw):
        with client.ingest(table_name=table, schema=schema, **kw) as writer:
            writer.write(batch)

    first = pa.record_batch([[1, 2], ["a@x", "b@x"], [1, 1]], schema=schema)
    ingest(first, mode=IngestTableMode.CREATE)
    with pytest.raises(
        pa.ArrowInvalid,
        match=f"Failed to execute ingest: Table with name {table} already exists!",
    ):
        ingest(first, mode=IngestTableMode.CREATE)
    ingest(
        pa.record_batch([[3], ["c@x"], [1]], schema=schema), mode=IngestTableMode.APPEND
    )
    assert rows(client, f"SELECT count(*) AS n FROM {table}") == [{"n": 3}]
    opts = IngestIncrementalOptions(primary_key=["id"], cursor_field=["ts"])
    ingest(
        pa.record_batch(
            [[1, 4, 1], ["a2@x", "d@x", "old@x"], [5, 1, 0]], schema=schema
        ),
        incremental_options=opts,
    )
    assert rows(client, f"SELECT id, email FROM {table} ORDER BY id") == [
        {"id": 1, "email": "a2@x"},
        {"id": 2, "email": "b@x"},
        {"id": 3, "email": "c@x"},
        {"id": 4, "email": "d@x"},
    ]
    ingest(
        pa.record_batch([[7], ["z@x"], [0]], schema=schema),
        mode=IngestTableMode.REPLACE,
    )
    assert rows(client, f"SELECT id FROM {table}") == [{"id": 7}]


def test_metadata_and_session_options(client, altertable_service):
    schema = unique("at_s")
    client.execute(f"CREATE SCHEMA {schema}")
    client.execute(f"CREATE TABLE {schema}.t (a INT)")
    # More tables than the server opens at once, each with columns of its own.
    for i in range(10):
        client.execute(f"CREATE TABLE {schema}.u{i} (c{i} INT, d{i} VARCHAR)")
    catalogs = client.get_catalogs().read_all().column("catalog_name").to_pylist()
    assert "lakehouse" in catalogs
    schemas = client.get_schemas(catalog="lakehouse", schema_pattern=f"{schema}%")
    assert schemas.read_all().column("db_schema_name").to_pylist() == [schema]
    tables = client.get_tables(
        catalog="lakehouse", schema_pattern=schema, include_schema=True
    )
    got = tables.read_all()
    names = got.column("table_name").to_pylist()
    assert names == ["t"] + [f"u{i}" for i in range(10)]
    columns = [
        pa.ipc.read_schema(pa.py_buffer(b.as_py())).names
        for b in got.column("table_schema")
    ]
    assert columns == [["a"]] + [[f"c{i}", f"d{i}"] for i in range(10)]
    client.set_schema(schema)
    assert rows(client, "SELECT current_schema() AS s") == [{"s": schema}]
    assert rows(client, "SELECT count(*) AS n FROM t") == [{"n": 0}]
    client.set_compute_size("2XL")
    with pytest.raises(ValueError, match="compute_size: INVALID_VALUE"):
        client.set_compute_size("huge")
    with pytest.raises(ValueError, match="catalog: INVALID_VALUE"):
        client.set_catalog("no_such_catalog")


def test_transactions_commit_and_roll_back(client):
    table = unique("at_tx")
    made = unique("at_tx_new")
    client.execute(f"CREATE TABLE {table} (id INT, v INT)")
    client.execute(f"INSERT INTO {table} VALUES (1, 10)")
    with client.begin_transaction() as txn:
        assert client.execute(f"INSERT INTO {table} VALUES (2, 20)") == 1
        assert client.execute(f"UPDATE {table} SET v = 0 WHERE id = 1") == 1
        client.execute(f"CREATE TABLE {made} AS SELECT 1 AS a")
        # The transaction reads its own writes.
        assert rows(client, f"SELECT id, v FROM {table} ORDER BY id") == [
            {"id": 1, "v": 0},
            {"id": 2, "v": 20},
        ]
        txn.rollback()
    # Everything it wrote is as it was: the row, the update, the new table.
    assert rows(client, f"SELECT id, v FROM {table} ORDER BY id") == [
        {"id": 1, "v": 10}
    ]
    assert client.get_tables(table_pattern=made).read_all().num_rows == 0
    with client.begin_transaction():
        client.execute(f"INSERT INTO {table} VALUES (3, 30)")
    assert rows(client, f"SELECT id FROM {table} ORDER BY id") == [
        {"id": 1},
        {"id": 3},
    ]
    # A drop inside a transaction is taken back by a rollback: the table, with its rows.
    with client.begin_transaction() as txn:
        client.execute(f"DROP TABLE {table}")
        assert client.get_tables(table_pattern=table).read_all().num_rows == 0
        txn.rollback()
    assert rows(client, f"SELECT count(*) AS n FROM {table}") == [{"n": 2}]


def table_folder(table: str) -> Path:
    return Path(os.environ["DELTALITE_DATA_ROOT"]) / "lakehouse" / "main" / table


def files_in(table: str) -> set[str]:
    """Every file under a table's folder (data, vectors, log), relative to it."""
    root = table_folder(table)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def named_by_log(table: str) -> set[str]:
    """Every data file some commit of the table's log adds."""
    named = set()
    for commit in sorted((table_folder(table) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                named.add(action["add"]["path"])
    return named


def private_logs() -> list[str]:
    """Files of open transactions' private logs."""
    root = Path(os.environ["DELTALITE_DATA_ROOT"]) / ".deltalite_txn"
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def commits(table: str) -> int:
    return len(list((table_folder(table) / "_delta_log").glob("*.json")))


def test_transaction_writes_are_invisible_to_others_until_commit(
    client, altertable_service
):
    table = unique("iso")
    made = unique("iso_new")
    client.execute(f"CREATE TABLE {table} (id INT, v INT)")
    client.execute(f"INSERT INTO {table} VALUES (1, 10), (2, 20)")
    before = commits(table)
    with Client(**altertable_service) as other:
        with client.begin_transaction():
            client.execute(f"INSERT INTO {table} VALUES (3, 30)")
            client.execute(f"UPDATE {table} SET v = 0 WHERE id = 1")
            client.execute(f"DELETE FROM {table} WHERE id = 2")
            client.execute(f"CREATE TABLE {made} AS SELECT 1 AS a")
            assert rows(client, f"SELECT id, v FROM {table} ORDER BY id") == [
                {"id": 1, "v": 0},
                {"id": 3, "v": 30},
            ]
            assert rows(client, f"SELECT a FROM {made}") == [{"a": 1}]
            # Another session sees the table as it was, and no new table.
            assert rows(other, f"SELECT id, v FROM {table} ORDER BY id") == [
                {"id": 1, "v": 10},
                {"id": 2, "v": 20},
            ]
            with pytest.raises(
                pa.ArrowInvalid,
                match=f"Catalog Error: Table with name {made} does not exist!",
            ):
                rows(other, f"SELECT a FROM {made}")
            assert other.get_tables(table_pattern=made).read_all().num_rows == 0
            # The staged commits are in the transaction's private log, not the table's.
            assert commits(table) == before
            assert private_logs()
        # COMMIT: all of it at once, one commit per table.
        assert rows(other, f"SELECT id, v FROM {table} ORDER BY id") == [
            {"id": 1, "v": 0},
            {"id": 3, "v": 30},
        ]
        assert rows(other, f"SELECT a FROM {made}") == [{"a": 1}]
    assert commits(table) == before + 1
    assert commits(made) == 1
    assert private_logs() == []


def test_rollback_leaves_no_file_behind(client):
    table = unique("rb")
    made = unique("rb_new")
    client.execute(f"CREATE TABLE {table} (id INT, v VARCHAR)")
    client.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    before = files_in(table)
    with client.begin_transaction() as txn:
        client.execute(f"INSERT INTO {table} VALUES (3, 'c')")
        client.execute(f"UPDATE {table} SET v = 'z' WHERE id = 1")
        client.execute(f"DELETE FROM {table} WHERE id = 2")
        client.execute(f"CREATE TABLE {made} AS SELECT 1 AS a")
        client.execute(f"ALTER TABLE {made} RENAME TO {made}_2")
        assert files_in(table) != before
        txn.rollback()
    assert files_in(table) == before
    assert rows(client, f"SELECT id, v FROM {table} ORDER BY id") == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b"},
    ]
    assert not table_folder(made).exists()
    assert not table_folder(f"{made}_2").exists()
    assert private_logs() == []


def test_conflicting_commits_abort_and_appends_rebase(client, altertable_service):
    table = unique("cf")
    client.execute(f"CREATE TABLE {table} (id INT, v INT)")
    client.execute(f"INSERT INTO {table} VALUES (1, 10), (2, 20)")
    with Client(**altertable_service) as other:
        txn = client.begin_transaction()
        client.execute(f"UPDATE {table} SET v = 5 WHERE id = 1", transaction=txn)
        other.execute(f"UPDATE {table} SET v = 7 WHERE id = 2")
        with pytest.raises(
            pa.ArrowException,
            match=(
                f"TransactionContext Error: Conflict on lakehouse\\.main\\.{table}: "
                "another session changed the table since this transaction first wrote it; "
                "nothing of the transaction was committed"
            ),
        ):
            txn.commit()
        # The other session's update stands, nothing of the transaction does, and no
        # file it wrote is left behind.
        assert rows(client, f"SELECT id, v FROM {table} ORDER BY id") == [
            {"id": 1, "v": 10},
            {"id": 2, "v": 7},
        ]
        data = {f for f in files_in(table) if not f.startswith("_delta_log")}
        assert data == named_by_log(table)
        assert private_logs() == []
        # A transaction that only appends commits on top of what others did meanwhile.
        with client.begin_transaction():
            client.execute(f"INSERT INTO {table} VALUES (3, 30)")
            other.execute(f"INSERT INTO {table} VALUES (4, 40)")
        assert rows(other, f"SELECT id FROM {table} ORDER BY id") == [
            {"id": 1},
            {"id": 2},
            {"id": 3},
            {"id": 4},
        ]


def test_close_is_idempotent_and_ends_the_session(altertable_service):
    c = Client(**altertable_service)
    assert rows(c, "SELECT 1 AS one") == [{"one": 1}]
    c.close()
    c.close()
