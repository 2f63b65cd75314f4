"""The real PyPI client `altertable-lakehouse==0.5.1` (and its ibis backend), used as a user
would, against a real `deltalite serve`: every public `Client` method, its error classes, and
the `ibis.altertable` backend. Values and types are asserted exactly.

Runs inside the CPython 3.13 root (the client needs CPython >= 3.12) with the URL of a
server started on the host in `DELTALITE_URL` (user alice:secret, catalog lakehouse):
`scripts/test-clients.sh`, which uses tests/clients/serve_and_run.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import os
import re
import threading
import time
import uuid
from decimal import Decimal

import ibis
import ibis.expr.datatypes as idt
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from altertable_lakehouse import Client
from altertable_lakehouse.errors import (
    ApiError,
    AuthError,
    BadRequestError,
    ConfigurationError,
    QueryError,
)
from altertable_lakehouse.models import (
    AppendResponse,
    AutocompleteRequest,
    AutocompleteResponse,
    CancelQueryResponse,
    QueryLogResponse,
    QueryMetadata,
    QueryRequest,
    QueryResult,
    SessionKind,
    TaskResponse,
    TaskStatus,
    UploadMode,
    ValidateRequest,
    ValidateResponse,
)

USER = "alice"
PASSWORD = "secret"
CATALOG = "lakehouse"
USER_AGENT = "altertable-lakehouse-python/0.1.0"

pytestmark = [
    # deprecations inside the pinned ibis 12.0.0 (with pandas 3, duckdb 2), not ours
    pytest.mark.filterwarnings(
        "ignore:The 'future.infer_string' option is deprecated:Warning"
    ),
    pytest.mark.filterwarnings(
        r"ignore:fetch_arrow_table\(\) is deprecated:DeprecationWarning"
    ),
]


@pytest.fixture(scope="session")
def url() -> str:
    """The server's base URL, from tests/clients/serve_and_run.py."""
    base = os.environ.get("DELTALITE_URL")
    if not base:
        raise RuntimeError(
            "DELTALITE_URL is not set: run these tests with scripts/test-clients.sh"
        )
    return base


@pytest.fixture(scope="session")
def client(url: str) -> Client:
    return Client(base_url=url, username=USER, password=PASSWORD)


@pytest.fixture(scope="session")
def schema() -> str:
    """A schema of its own per run, so that a rerun against one server starts clean."""
    return f"sdk_{uuid.uuid4().hex[:8]}"


# -- helpers --------------------------------------------------------------------------------


def fq(schema: str, table: str) -> str:
    return f'"{CATALOG}"."{schema}"."{table}"'


def run(client: Client, statement: str, schema: str | None = None) -> QueryResult:
    return client.query_all(
        QueryRequest(statement=statement, catalog=CATALOG, schema=schema)
    )


def rows(client: Client, statement: str, schema: str | None = None) -> list:
    return run(client, statement, schema).rows


def column_types(client: Client, schema: str, table: str) -> dict[str, str]:
    """DESCRIBE: column name → DuckDB type name."""
    return {r[0]: r[1] for r in rows(client, f"DESCRIBE {fq(schema, table)}")}


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def chunks(data: bytes, size: int):
    """A generator body: httpx streams it chunked, with no Content-Length."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def error_body(error: ApiError) -> str:
    """The response text an `ApiError` carries (its str is "<status>: <text>")."""
    return str(error).removeprefix(f"{error.status_code}: ")


def wait_task(client: Client, task_id: str, timeout: float = 30.0) -> TaskResponse:
    deadline = time.monotonic() + timeout
    while True:
        task = client.get_task(task_id)
        assert isinstance(task, TaskResponse)
        assert task.task_id == task_id
        if task.status is TaskStatus.COMPLETED or time.monotonic() > deadline:
            return task
        assert task.status is TaskStatus.PENDING
        time.sleep(0.05)


# -- append / get_task ----------------------------------------------------------------------


def test_append_single_object_sync(client, schema):
    res = client.append(
        CATALOG,
        schema,
        "append_single",
        {"id": 1, "name": "alpha", "score": 1.5, "active": True},
        sync=True,
    )
    assert isinstance(res, AppendResponse)
    assert (res.ok, res.error_code, res.error_message) == (True, None, None)
    assert column_types(client, schema, "append_single") == {
        "id": "BIGINT",
        "name": "VARCHAR",
        "score": "DOUBLE",
        "active": "BOOLEAN",
    }
    assert rows(
        client, f"SELECT id, name, score, active FROM {fq(schema, 'append_single')}"
    ) == [[1, "alpha", 1.5, True]]


def test_append_list_async_then_task(client, schema):
    table = "append_batch"
    res = client.append(
        CATALOG,
        schema,
        table,
        [{"id": 1, "tag": "a"}, {"id": 2, "tag": "b", "extra": 2.5}],
        sync=False,
    )
    assert (res.ok, res.error_code, res.error_message) == (True, None, None)
    assert res.task_id, "an async append answers the id of the task to poll"
    task = wait_task(client, res.task_id)
    assert task.status is TaskStatus.COMPLETED

    # `sync` omitted; a column the table lacks is added in the same commit
    res = client.append(CATALOG, schema, table, {"id": 3, "tag": "c", "note": "new"})
    assert (res.ok, res.error_code) == (True, None)
    if res.task_id is not None:
        assert wait_task(client, res.task_id).status is TaskStatus.COMPLETED

    assert column_types(client, schema, table) == {
        "id": "BIGINT",
        "tag": "VARCHAR",
        "extra": "DOUBLE",
        "note": "VARCHAR",
    }
    assert rows(
        client, f"SELECT id, tag, extra, note FROM {fq(schema, table)} ORDER BY id"
    ) == [[1, "a", None, None], [2, "b", 2.5, None], [3, "c", None, "new"]]


def test_append_creates_columns_in_key_order(client, schema):
    """The columns of a table made by /append come in the order of the objects' keys
    (first appearance), as DuckDB's JSON reader makes them; new keys come last."""
    table = "append_key_order"
    client.append(
        CATALOG, schema, table, {"zeta": 1, "alpha": "a", "mid": 2.5}, sync=True
    )
    client.append(CATALOG, schema, table, {"mid": 3.5, "beta": True}, sync=True)
    described = rows(client, f"DESCRIBE {fq(schema, table)}")
    assert [r[0] for r in described] == ["zeta", "alpha", "mid", "beta"]
    result = run(client, f"SELECT * FROM {fq(schema, table)} ORDER BY mid")
    assert [c["name"] for c in result.columns] == ["zeta", "alpha", "mid", "beta"]
    assert result.rows == [[1, "a", 2.5, None], [None, None, 3.5, True]]


def test_get_task_unknown_is_404(client):
    with pytest.raises(ApiError) as err:
        client.get_task(str(uuid.uuid4()))
    assert err.value.status_code == 404
    assert not isinstance(err.value, (AuthError, BadRequestError))


def test_append_rejected_rows_leave_the_table_unchanged(client, schema):
    table = "append_typed"
    assert client.append(CATALOG, schema, table, {"id": 1}, sync=True).ok

    # This server answers a rejected append with 400 and the AppendResponse shape as
    # its body; the SDK raises BadRequestError carrying that text.
    with pytest.raises(BadRequestError) as err:
        client.append(CATALOG, schema, table, {"id": "not a number"}, sync=True)
    body = AppendResponse.model_validate_json(error_body(err.value))
    assert (body.ok, body.error_code) == (False, "incompatible-schema")
    assert '"id"' in body.error_message

    with pytest.raises(BadRequestError) as err:
        client.append(CATALOG, schema, table, [1, 2], sync=True)
    body = AppendResponse.model_validate_json(error_body(err.value))
    assert (body.ok, body.error_code) == (False, "invalid-data")

    assert rows(client, f"SELECT id FROM {fq(schema, table)}") == [[1]]


# -- upload ---------------------------------------------------------------------------------

UPLOAD_ARROW = pa.table(
    {
        "id": pa.array([1, 2], pa.int64()),
        "name": pa.array(["a", "b"], pa.string()),
        "score": pa.array([0.5, 1.5], pa.float64()),
    }
)


def test_upload_every_mode_and_body_kind(client, schema, tmp_path):
    table = "uploads"
    select = f"SELECT id, name, score FROM {fq(schema, table)} ORDER BY id"

    # create: Parquet bytes with an explicit Content-Type
    client.upload(
        CATALOG,
        schema,
        table,
        UploadMode.CREATE,
        parquet_bytes(UPLOAD_ARROW),
        content_type="application/parquet",
    )
    assert column_types(client, schema, table) == {
        "id": "BIGINT",
        "name": "VARCHAR",
        "score": "DOUBLE",
    }
    assert rows(client, select) == [[1, "a", 0.5], [2, "b", 1.5]]

    # create on an existing table is refused, and changes nothing
    with pytest.raises(BadRequestError) as err:
        client.upload(
            CATALOG, schema, table, UploadMode.CREATE, parquet_bytes(UPLOAD_ARROW)
        )
    assert err.value.status_code == 400

    # append: a Parquet file object, no Content-Type (sniffed)
    path = tmp_path / "three.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array([3], pa.int64()),
                "name": ["c"],
                "score": pa.array([2.5]),
            }
        ),
        path,
    )
    with path.open("rb") as f:
        client.upload(CATALOG, schema, table, UploadMode.APPEND, f)

    # append: CSV as an iterator of chunks split mid-row, with a Content-Type
    csv = b"id,name,score\n4,d,3.5\n5,e,4.5\n"
    client.upload(
        CATALOG,
        schema,
        table,
        UploadMode.APPEND,
        chunks(csv, 7),
        content_type="text/csv",
    )

    # append: CSV bytes, no Content-Type (sniffed), columns in another order
    client.upload(
        CATALOG, schema, table, UploadMode.APPEND, b"score,id,name\n5.5,6,f\n"
    )
    assert rows(client, select) == [
        [1, "a", 0.5],
        [2, "b", 1.5],
        [3, "c", 2.5],
        [4, "d", 3.5],
        [5, "e", 4.5],
        [6, "f", 5.5],
    ]

    # overwrite: a CSV file object replaces the rows
    client.upload(
        CATALOG,
        schema,
        table,
        UploadMode.OVERWRITE,
        io.BytesIO(b"id,name,score\n10,x,0.25\n11,y,0.75\n"),
        content_type="text/csv; charset=utf-8",
    )
    assert rows(client, select) == [[10, "x", 0.25], [11, "y", 0.75]]

    # overwrite: a Parquet iterator with another schema replaces the schema too
    other = pa.table(
        {"key": pa.array(["k"], pa.string()), "flag": pa.array([True], pa.bool_())}
    )
    client.upload(
        CATALOG,
        schema,
        table,
        UploadMode.OVERWRITE,
        chunks(parquet_bytes(other), 100),
    )
    assert column_types(client, schema, table) == {"key": "VARCHAR", "flag": "BOOLEAN"}
    assert rows(client, f"SELECT key, flag FROM {fq(schema, table)}") == [["k", True]]


def test_upload_create_from_csv_file_object(client, schema):
    table = "uploads_csv"
    client.upload(
        CATALOG,
        schema,
        table,
        UploadMode.CREATE,
        io.BytesIO(b"id,label,amount,ok\n1,one,1.25,true\n2,two,2.5,false\n"),
    )
    assert column_types(client, schema, table) == {
        "id": "BIGINT",
        "label": "VARCHAR",
        "amount": "DOUBLE",
        "ok": "BOOLEAN",
    }
    assert rows(client, f"SELECT * FROM {fq(schema, table)} ORDER BY id") == [
        [1, "one", 1.25, True],
        [2, "two", 2.5, False],
    ]


def test_upload_overwrite_creates_a_missing_table(client, schema):
    table = "uploads_overwrite_new"
    client.upload(
        CATALOG, schema, table, UploadMode.OVERWRITE, parquet_bytes(UPLOAD_ARROW)
    )
    assert rows(client, f"SELECT id FROM {fq(schema, table)} ORDER BY id") == [
        [1],
        [2],
    ]


def test_upload_errors(client, schema):
    # append to a table that does not exist
    with pytest.raises(BadRequestError):
        client.upload(
            CATALOG,
            schema,
            "uploads_missing",
            UploadMode.APPEND,
            parquet_bytes(UPLOAD_ARROW),
        )
    # a catalog the server does not have
    with pytest.raises(ApiError) as err:
        client.upload(
            "no_such_catalog",
            schema,
            "t",
            UploadMode.CREATE,
            parquet_bytes(UPLOAD_ARROW),
        )
    assert err.value.status_code == 404


# -- upsert ---------------------------------------------------------------------------------


def test_upsert_parquet_and_csv_without_content_type(client, schema):
    table = "upserts"
    select = f"SELECT id, name, qty FROM {fq(schema, table)} ORDER BY id"
    seed = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", "b", "c"],
            "qty": pa.array([10, 20, 30], pa.int64()),
        }
    )
    client.upload(CATALOG, schema, table, UploadMode.CREATE, parquet_bytes(seed))

    # Parquet: update id 2, insert id 4 (the SDK sends no Content-Type: sniffed)
    change = pa.table(
        {
            "id": pa.array([2, 4], pa.int64()),
            "name": ["B", "d"],
            "qty": pa.array([21, 40], pa.int64()),
        }
    )
    assert client.upsert(CATALOG, schema, table, parquet_bytes(change), "id") is None
    assert rows(client, select) == [
        [1, "a", 10],
        [2, "B", 21],
        [3, "c", 30],
        [4, "d", 40],
    ]

    # CSV bytes: update id 1; a column left out keeps its value
    client.upsert(CATALOG, schema, table, b"id,name\n1,A\n", "id")
    assert rows(client, select) == [
        [1, "A", 10],
        [2, "B", 21],
        [3, "c", 30],
        [4, "d", 40],
    ]


def test_upsert_composite_key_creates_missing_table(client, schema):
    table = "upserts_composite"
    select = f"SELECT region, id, v FROM {fq(schema, table)} ORDER BY region, id"
    client.upsert(
        CATALOG,
        schema,
        table,
        b"region,id,v\neu,1,x\nus,1,y\n",
        "region, id",
    )
    assert rows(client, select) == [["eu", 1, "x"], ["us", 1, "y"]]
    client.upsert(CATALOG, schema, table, b"region,id,v\nus,1,Y\nus,2,z\n", "region,id")
    assert rows(client, select) == [["eu", 1, "x"], ["us", 1, "Y"], ["us", 2, "z"]]


def test_upsert_key_missing_from_file_is_400(client, schema):
    with pytest.raises(BadRequestError) as err:
        client.upsert(CATALOG, schema, "upserts_bad", b"a,b\n1,2\n", "id")
    assert err.value.status_code == 400


# -- query / query_all / query_parquet ------------------------------------------------------


@pytest.fixture(scope="module")
def people(client, schema) -> str:
    """A small table for the read tests; returns its name (unqualified)."""
    table = "people"
    data = pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "name": ["ann", "bob", "cid", "dee", None],
            "age": pa.array([31, 42, 27, 35, None], pa.int32()),
            "score": pa.array([1.5, 2.5, 3.5, 4.5, None], pa.float64()),
        }
    )
    client.upload(CATALOG, schema, table, UploadMode.CREATE, parquet_bytes(data))
    return table


def test_query_streams_metadata_columns_rows(client, schema, people):
    query_id = str(uuid.uuid4())
    statement = f"SELECT id, name, age, score FROM {people} WHERE id <= 3 ORDER BY id"
    metadata, columns, row_iter = client.query(
        QueryRequest(
            statement=statement,
            catalog=CATALOG,
            schema=schema,
            query_id=query_id,
        )
    )
    assert isinstance(metadata, QueryMetadata)
    assert metadata.values["query_id"] == query_id
    assert metadata.values["statement"] == statement
    assert columns == [
        {"name": "id", "type": "BIGINT"},
        {"name": "name", "type": "VARCHAR"},
        {"name": "age", "type": "INTEGER"},
        {"name": "score", "type": "DOUBLE"},
    ]
    assert next(row_iter) == [1, "ann", 31, 1.5]
    assert list(row_iter) == [[2, "bob", 42, 2.5], [3, "cid", 27, 3.5]]


def test_query_all_with_every_request_field(client, schema, people):
    result = client.query_all(
        QueryRequest(
            statement=f"SELECT id, name FROM {people} ORDER BY id",
            catalog=CATALOG,
            schema=schema,
            session_id=str(uuid.uuid4()),
            compute_size="S",
            sanitize=True,
            limit=2,
            offset=1,
            timezone="UTC",
            ephemeral=True,
            visible=True,
            requested_by="sdk-e2e",
            query_id=str(uuid.uuid4()),
            cache=False,
        )
    )
    assert isinstance(result, QueryResult)
    assert result.columns == [
        {"name": "id", "type": "BIGINT"},
        {"name": "name", "type": "VARCHAR"},
    ]
    assert result.rows == [[2, "bob"], [3, "cid"]]


def test_query_value_encodings(client, schema):
    table = "typed_values"
    run(
        client,
        f"CREATE TABLE {fq(schema, table)} (i INTEGER, b BIGINT, d DOUBLE, v VARCHAR, "
        "f BOOLEAN, dt DATE, ts TIMESTAMP, dec DECIMAL(10,2))",
    )
    run(
        client,
        f"INSERT INTO {fq(schema, table)} VALUES (7, 9000000000, 0.25, 'é\"x', true, "
        "DATE '2024-02-29', TIMESTAMP '2024-02-29 12:34:56.789', 12.34), "
        "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    result = run(client, f"SELECT * FROM {fq(schema, table)} ORDER BY i NULLS LAST")
    assert [c["type"] for c in result.columns] == [
        "INTEGER",
        "BIGINT",
        "DOUBLE",
        "VARCHAR",
        "BOOLEAN",
        "DATE",
        "TIMESTAMP",
        "DECIMAL(10,2)",
    ]
    first, second = result.rows
    assert first[:5] == [7, 9000000000, 0.25, 'é"x', True]
    assert dt.date.fromisoformat(first[5]) == dt.date(2024, 2, 29)
    assert dt.datetime.fromisoformat(first[6]) == dt.datetime(
        2024, 2, 29, 12, 34, 56, 789000
    )
    assert Decimal(str(first[7])) == Decimal("12.34")
    assert second == [None] * 8


def test_query_sql_error_raises_query_error(
    client, schema, people
):  # people: the schema exists
    with pytest.raises(QueryError) as err:
        client.query_all(
            QueryRequest(
                statement="SELECT * FROM nosuch", catalog=CATALOG, schema=schema
            )
        )
    assert err.value.line_index == 2
    assert str(err.value) == (
        "Catalog Error: Table with name nosuch does not exist! at line 2"
    )


def test_query_error_after_rows_raises_query_error(client):
    statement = (
        "SELECT CASE WHEN v < 150000 THEN v ELSE error('boom') END AS x "
        "FROM range(200000) r(v)"
    )
    seen: list = []
    with pytest.raises(QueryError) as err:
        _, columns, row_iter = client.query(QueryRequest(statement=statement))
        assert columns == [{"name": "x", "type": "BIGINT"}]
        seen.extend(row_iter)  # the rows read before the error stay in `seen`
    assert str(err.value).startswith("Invalid Input Error: boom at line ")
    # lines: metadata, columns, the rows, then the error (which may also come before
    # any row: right after the metadata, or after the columns)
    assert err.value.line_index in ((len(seen) + 3,) if seen else (2, 3))
    assert all(len(r) == 1 and 0 <= r[0] < 150000 for r in seen)


def test_query_parquet(client, schema, people):
    data = client.query_parquet(
        QueryRequest(
            statement=f"SELECT id, name, age, score FROM {people} ORDER BY id",
            catalog=CATALOG,
            schema=schema,
        )
    )
    assert isinstance(data, bytes)
    assert data[:4] == b"PAR1"
    table = pq.read_table(pa.BufferReader(data))
    assert table.schema.names == ["id", "name", "age", "score"]
    assert table.schema.types == [pa.int64(), pa.string(), pa.int32(), pa.float64()]
    assert table.to_pylist() == [
        {"id": 1, "name": "ann", "age": 31, "score": 1.5},
        {"id": 2, "name": "bob", "age": 42, "score": 2.5},
        {"id": 3, "name": "cid", "age": 27, "score": 3.5},
        {"id": 4, "name": "dee", "age": 35, "score": 4.5},
        {"id": 5, "name": None, "age": None, "score": None},
    ]

    empty = client.query_parquet(
        QueryRequest(
            statement=f"SELECT id, name FROM {people} WHERE id < 0",
            catalog=CATALOG,
            schema=schema,
        )
    )
    empty_table = pq.read_table(pa.BufferReader(empty))
    assert empty_table.num_rows == 0
    assert empty_table.schema.types == [pa.int64(), pa.string()]


def test_query_parquet_sql_error_is_400(
    client, schema, people
):  # people: the schema exists
    with pytest.raises(BadRequestError) as err:
        client.query_parquet(
            QueryRequest(
                statement="SELECT * FROM nosuch", catalog=CATALOG, schema=schema
            )
        )
    assert err.value.status_code == 400
    assert "Table with name nosuch does not exist" in str(err.value)


# -- validate / autocomplete ----------------------------------------------------------------


def test_validate(client, schema, people):
    statement = f"SELECT id FROM {people}"
    res = client.validate(
        ValidateRequest(statement=statement, catalog=CATALOG, schema=schema)
    )
    assert isinstance(res, ValidateResponse)
    assert (res.valid, res.statement, res.error) == (True, statement, None)
    assert res.connections_errors == {}

    res = client.validate(ValidateRequest(statement="SELEC 1"))
    assert (res.valid, res.statement) == (False, "SELEC 1")
    assert res.error.startswith("Parser Error")

    res = client.validate(
        ValidateRequest(
            statement="SELECT * FROM nosuch", catalog=CATALOG, schema=schema
        )
    )
    assert res.valid is False
    assert res.error == "Catalog Error: Table with name nosuch does not exist!"


def test_autocomplete_suggests_a_created_table(client, schema):
    table = "autocomplete_target"
    client.append(CATALOG, schema, table, {"id": 1}, sync=True)
    statement = "SELECT * FROM autocomplete_ta"
    res = client.autocomplete(
        AutocompleteRequest(
            statement=statement, catalog=CATALOG, schema=schema, max_suggestions=5
        )
    )
    assert isinstance(res, AutocompleteResponse)
    assert res.statement == statement
    assert res.connections_errors == {}
    assert 1 <= len(res.suggestions) <= 5
    best = res.suggestions[0]
    assert (best.suggestion, best.suggestion_type, best.suggestion_start) == (
        table,
        "table",
        len("SELECT * FROM "),
    )

    res = client.autocomplete(AutocompleteRequest(statement="SEL"))
    keywords = {(s.suggestion, s.suggestion_type) for s in res.suggestions}
    assert ("SELECT", "keyword") in keywords
    assert all(s.suggestion_start == 0 for s in res.suggestions)


# -- get_query / cancel_query ---------------------------------------------------------------


def test_get_query_log_entry(client, schema, people):
    query_id = str(uuid.uuid4())
    session_id = str(uuid.uuid4())
    statement = f"SELECT id FROM {people} ORDER BY id"
    result = client.query_all(
        QueryRequest(
            statement=statement,
            catalog=CATALOG,
            schema=schema,
            query_id=query_id,
            session_id=session_id,
            requested_by="sdk-e2e",
        )
    )
    assert len(result.rows) == 5

    log = client.get_query(query_id)
    assert isinstance(log, QueryLogResponse)
    assert log.uuid == query_id
    assert log.query == statement
    assert log.session_id == session_id
    assert log.client_interface == SessionKind.HTTP_QUERY
    assert log.error is None
    assert isinstance(log.stats, dict)
    assert log.stats.get("rows") == 5
    assert log.visible is True
    assert log.requested_by == "sdk-e2e"
    assert log.user_agent == USER_AGENT
    start = dt.datetime.fromisoformat(log.start_time)
    end = dt.datetime.fromisoformat(log.end_time)
    assert start <= end
    assert isinstance(log.duration_ms, int) and log.duration_ms >= 0

    # a failed, invisible query is logged with its error
    failed_id = str(uuid.uuid4())
    with pytest.raises(QueryError):
        client.query_all(
            QueryRequest(
                statement="SELECT * FROM nosuch", query_id=failed_id, visible=False
            )
        )
    log = client.get_query(failed_id)
    assert log.client_interface == SessionKind.HTTP_QUERY
    assert log.visible is False
    assert log.error == "Catalog Error: Table with name nosuch does not exist!"


def test_get_query_unknown_is_404(client):
    with pytest.raises(ApiError) as err:
        client.get_query(str(uuid.uuid4()))
    assert err.value.status_code == 404


def test_cancel_query(client):
    query_id = str(uuid.uuid4())
    session_id = str(uuid.uuid4())
    outcome: dict = {}

    def long_query() -> None:
        try:
            outcome["result"] = client.query_all(
                QueryRequest(
                    statement="SELECT count(*) AS n FROM range(100000000000) r(v)",
                    query_id=query_id,
                    session_id=session_id,
                )
            )
        except Exception as e:  # noqa: BLE001 (asserted below)
            outcome["error"] = e

    worker = threading.Thread(target=long_query)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while True:  # the query is logged as running once the server started it
            try:
                log = client.get_query(query_id)
                assert log.end_time is None
                break
            except ApiError as e:
                assert e.status_code == 404
                assert time.monotonic() < deadline, "the query never started"
                time.sleep(0.05)

        wrong = client.cancel_query(query_id, str(uuid.uuid4()))
        assert isinstance(wrong, CancelQueryResponse)
        assert wrong.cancelled is False

        res = client.cancel_query(query_id, session_id)
        assert isinstance(res, CancelQueryResponse)
        assert res.cancelled is True
        assert isinstance(res.message, str) and res.message
    finally:
        worker.join(60)
    assert not worker.is_alive()
    assert "result" not in outcome
    error = outcome["error"]
    assert isinstance(error, QueryError)
    assert "cancel" in str(error).lower()

    log = client.get_query(query_id)
    assert log.end_time is not None
    assert "cancel" in log.error.lower()

    gone = client.cancel_query(str(uuid.uuid4()), session_id)
    assert gone.cancelled is False


# -- credentials ----------------------------------------------------------------------------


def _every_call(c: Client, schema: str) -> list:
    """One call of each public method that talks to the server."""
    return [
        lambda: c.query_all(QueryRequest(statement="SELECT 1")),
        lambda: c.query_parquet(QueryRequest(statement="SELECT 1")),
        lambda: c.append(CATALOG, schema, "auth_t", {"id": 1}),
        lambda: c.upload(CATALOG, schema, "auth_t", UploadMode.CREATE, b"a\n1\n"),
        lambda: c.upsert(CATALOG, schema, "auth_t", b"a\n1\n", "a"),
        lambda: c.get_task(str(uuid.uuid4())),
        lambda: c.get_query(str(uuid.uuid4())),
        lambda: c.cancel_query(str(uuid.uuid4()), "s"),
        lambda: c.validate(ValidateRequest(statement="SELECT 1")),
        lambda: c.autocomplete(AutocompleteRequest(statement="SEL")),
    ]


def test_wrong_password_raises_auth_error(url, schema):
    # a fresh client (connection) per call: this checks the status mapping only; the
    # reuse of one connection after a 401 is test_early_error_keeps_connection_usable
    for index in range(10):
        bad = Client(base_url=url, username=USER, password="wrong")
        with pytest.raises(AuthError) as err:
            _every_call(bad, schema)[index]()
        assert err.value.status_code == 401
        assert str(err.value) == "401: Unauthorized"

    with pytest.raises(AuthError):
        Client(base_url=url, username="mallory", password=PASSWORD).query_all(
            QueryRequest(statement="SELECT 1")
        )
    with pytest.raises(AuthError):
        Client(base_url=url, token="bm90OmJhc2U2NA==").validate(
            ValidateRequest(statement="SELECT 1")
        )
    # nothing was written by the refused requests
    good = Client(base_url=url, username=USER, password=PASSWORD)
    assert rows(
        good,
        "SELECT count(*) FROM information_schema.tables "
        f"WHERE table_schema = '{schema}' AND table_name = 'auth_t'",
    ) == [[0]]


@pytest.mark.parametrize("password", ["wrong", PASSWORD])
def test_early_error_keeps_connection_usable(url, schema, password):
    """A request answered before its body is read (401 for bad credentials, 404 for an
    unknown catalog) must not leave the client's pooled keep-alive connection to die
    under its next request: one `Client` makes many calls, each must answer its status,
    never `NetworkError: Server disconnected without sending a response`."""
    c = Client(base_url=url, username=USER, password=password)
    expected = AuthError if password == "wrong" else ApiError
    failures: list[str] = []
    made = 0
    for round_ in range(60):
        calls = _every_call(c, schema) if password == "wrong" else []
        calls += [
            lambda: c.upload("no_such_catalog", "s", "t", UploadMode.CREATE, b"a\n1\n"),
            lambda: c.upsert("no_such_catalog", "s", "t", b"a\n1\n", "a"),
            lambda: c.append("no_such_catalog", "s", "t", {"a": 1}),
        ]
        for index, call in enumerate(calls):
            made += 1
            try:
                call()
                failures.append(f"round {round_} call {index}: no error")
            except expected:
                pass
            except Exception as e:  # noqa: BLE001 (collected, asserted below)
                failures.append(f"round {round_} call {index}: {type(e).__name__}: {e}")
    assert not failures, f"{len(failures)} of {made} calls failed: {failures[:3]}"


def test_every_credential_source(url, monkeypatch):
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    probe = QueryRequest(statement="SELECT 42 AS answer")
    assert Client(base_url=url, token=token).query_all(probe).rows == [[42]]

    for var in (
        "ALTERTABLE_BASIC_AUTH_TOKEN",
        "ALTERTABLE_USERNAME",
        "ALTERTABLE_PASSWORD",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigurationError):
        Client(base_url=url)

    monkeypatch.setenv("ALTERTABLE_USERNAME", USER)
    monkeypatch.setenv("ALTERTABLE_PASSWORD", PASSWORD)
    assert Client(base_url=url + "/").query_all(probe).rows == [[42]]

    monkeypatch.setenv("ALTERTABLE_BASIC_AUTH_TOKEN", token)
    assert Client(base_url=url).query_all(probe).rows == [[42]]


# -- ibis backend ---------------------------------------------------------------------------
#
# Every expression runs twice: through `ibis.altertable` against the server, and through
# ibis' own DuckDB backend (an in-memory DuckDB holding the same tables, made by the same
# SQL) as the oracle; the results must be equal, and equal to the values written here.

IBIS_TYPED_DDL = (
    "(i INTEGER NOT NULL, b BIGINT, d DOUBLE, v VARCHAR, f BOOLEAN, dt DATE, "
    "ts TIMESTAMP, dec DECIMAL(10,2))"
)
IBIS_TYPED_VALUES = (
    "(1, 10, 1.5, 'x', true, DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00', 1.25), "
    "(2, 20, 2.5, 'x', false, DATE '2024-01-02', TIMESTAMP '2024-01-02 11:00:00', 2.50), "
    "(3, 30, 3.5, 'y', true, DATE '2024-01-03', TIMESTAMP '2024-01-03 12:00:00', 3.75), "
    "(4, 40, 4.5, 'y', true, DATE '2024-01-04', TIMESTAMP '2024-01-04 13:30:00', 4.00), "
    "(5, NULL, NULL, 'z', false, NULL, NULL, NULL)"
)
IBIS_ORDERS = [{"order_id": 1, "customer": "ann"}, {"order_id": 2, "customer": "bob"}]


@pytest.fixture(scope="module")
def ibis_schema(client, schema) -> str:
    """A schema holding exactly the tables `typed` (made over SQL) and `orders` (appended)."""
    name = f"{schema}_ibis"
    run(client, f'CREATE SCHEMA "{CATALOG}"."{name}"')
    run(client, f"CREATE TABLE {fq(name, 'typed')} {IBIS_TYPED_DDL}")
    inserted = run(
        client, f"INSERT INTO {fq(name, 'typed')} VALUES {IBIS_TYPED_VALUES}"
    )
    assert inserted.rows == [[5]]
    assert client.append(CATALOG, name, "orders", IBIS_ORDERS, sync=True).ok
    return name


@pytest.fixture(scope="module")
def con(url, ibis_schema):
    backend = ibis.altertable.connect(
        base_url=url,
        username=USER,
        password=PASSWORD,
        catalog=CATALOG,
        database=ibis_schema,
    )
    yield backend
    backend.disconnect()


@pytest.fixture(scope="module")
def oracle():
    backend = ibis.duckdb.connect()
    backend.raw_sql(f"CREATE TABLE typed {IBIS_TYPED_DDL}")
    backend.raw_sql(f"INSERT INTO typed VALUES {IBIS_TYPED_VALUES}")
    backend.raw_sql("CREATE TABLE orders (order_id BIGINT, customer VARCHAR)")
    backend.raw_sql("INSERT INTO orders VALUES (1, 'ann'), (2, 'bob')")
    yield backend
    backend.disconnect()


def arrow_both(con, oracle, build) -> pa.Table:
    """`build(backend).to_pyarrow()` on the server, checked equal to the oracle's."""
    got = build(con).to_pyarrow()
    want = build(oracle).to_pyarrow()
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()
    return got


def frame_both(con, oracle, build):
    """`build(backend).execute()` (a DataFrame) on the server, checked equal to the oracle's."""
    import pandas.testing

    got = build(con).execute()
    pandas.testing.assert_frame_equal(got, build(oracle).execute())
    return got


def test_ibis_entry_point(con):
    from altertable_lakehouse.ibis import Backend

    assert isinstance(con, Backend)
    assert con.name == "altertable"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", con.version)


def test_ibis_lists(con, schema, ibis_schema):
    assert con.list_catalogs() == [CATALOG]
    databases = con.list_databases()
    assert ibis_schema in databases
    assert databases == sorted(set(databases))
    assert con.list_databases(like="_ibis$") == [ibis_schema]
    assert con.list_tables() == ["orders", "typed"]
    assert con.list_tables(like="ord") == ["orders"]
    assert con.list_tables(database=(CATALOG, schema)) == sorted(
        r[0]
        for r in rows(
            con.client,
            "SELECT table_name FROM information_schema.tables "
            f"WHERE table_catalog = '{CATALOG}' AND table_schema = '{schema}'",
        )
    )


def test_ibis_defaults_without_catalog_and_database(url, ibis_schema):
    bare = ibis.altertable.connect(base_url=url, username=USER, password=PASSWORD)
    try:
        assert bare.current_catalog == CATALOG
        assert bare.current_database == "main"
        t = bare.table("typed", database=(CATALOG, ibis_schema))
        assert t.count().execute() == 5
    finally:
        bare.disconnect()


def test_ibis_get_schema_types(con, oracle, ibis_schema):
    expected = ibis.schema(
        {
            "i": idt.Int32(nullable=False),
            "b": idt.int64,
            "d": idt.float64,
            "v": idt.string,
            "f": idt.boolean,
            "dt": idt.date,
            "ts": idt.Timestamp(scale=6),
            "dec": idt.Decimal(10, 2),
        }
    )
    assert oracle.get_schema("typed") == expected
    assert con.get_schema("typed") == expected
    assert con.get_schema("typed", catalog=CATALOG, database=ibis_schema) == expected
    assert con.table("typed").schema() == expected
    # (column order of tables made by /append: test_append_creates_columns_in_key_order)
    assert dict(con.get_schema("orders").items()) == {
        "order_id": idt.int64,
        "customer": idt.string,
    }


def test_ibis_whole_table_to_pyarrow(con, oracle):
    table = arrow_both(con, oracle, lambda b: b.table("typed").order_by("i"))
    assert table.schema.names == ["i", "b", "d", "v", "f", "dt", "ts", "dec"]
    assert table.schema.types == [
        pa.int32(),
        pa.int64(),
        pa.float64(),
        pa.string(),
        pa.bool_(),
        pa.date32(),
        pa.timestamp("us"),
        pa.decimal128(10, 2),
    ]
    assert table.to_pylist()[0] == {
        "i": 1,
        "b": 10,
        "d": 1.5,
        "v": "x",
        "f": True,
        "dt": dt.date(2024, 1, 1),
        "ts": dt.datetime(2024, 1, 1, 10, 0),
        "dec": Decimal("1.25"),
    }
    assert table.to_pylist()[4] == {
        "i": 5,
        "b": None,
        "d": None,
        "v": "z",
        "f": False,
        "dt": None,
        "ts": None,
        "dec": None,
    }


def _filter_aggregate(backend):
    t = backend.table("typed")
    kept = t.filter(t.f)
    return (
        kept.group_by("v")
        .aggregate(
            n=kept.count(),
            total=kept.b.sum(),
            mean_d=kept.d.mean(),
            max_dec=kept.dec.max(),
            last_dt=kept.dt.max(),
        )
        .order_by("v")
    )


def test_ibis_filter_aggregate(con, oracle):
    table = arrow_both(con, oracle, _filter_aggregate)
    assert table.schema.names == ["v", "n", "total", "mean_d", "max_dec", "last_dt"]
    assert table.to_pylist() == [
        {
            "v": "x",
            "n": 1,
            "total": 10,
            "mean_d": 1.5,
            "max_dec": Decimal("1.25"),
            "last_dt": dt.date(2024, 1, 1),
        },
        {
            "v": "y",
            "n": 2,
            "total": 70,
            "mean_d": 4.0,
            "max_dec": Decimal("4.00"),
            "last_dt": dt.date(2024, 1, 4),
        },
    ]

    frame = frame_both(con, oracle, _filter_aggregate)
    assert list(frame.columns) == ["v", "n", "total", "mean_d", "max_dec", "last_dt"]
    assert frame["v"].tolist() == ["x", "y"]
    assert frame["n"].tolist() == [1, 2]
    assert frame["total"].tolist() == [10, 70]
    assert frame["mean_d"].tolist() == [1.5, 4.0]
    assert frame["max_dec"].tolist() == [Decimal("1.25"), Decimal("4.00")]
    # ibis hands dates to pandas as Timestamps (its DuckDB backend does the same)
    assert frame["last_dt"].tolist() == [
        dt.datetime(2024, 1, 1),
        dt.datetime(2024, 1, 4),
    ]


def test_ibis_scalars(con, oracle):
    def scalar(build):
        got = build(con.table("typed")).execute()
        assert got == build(oracle.table("typed")).execute()
        return got

    assert scalar(lambda t: t.count()) == 5
    assert scalar(lambda t: t.b.sum()) == 100
    assert scalar(lambda t: t.d.mean()) == 3.0
    assert scalar(lambda t: t.filter(t.v == "z").b.isnull().all()) is True
    assert scalar(lambda t: t.v.nunique()) == 3


def test_ibis_column_and_decimal_literal(con, oracle):
    first_two = arrow_both(
        con, oracle, lambda b: b.table("typed").order_by("i").limit(2).select("i")
    )
    assert first_two.column("i").to_pylist() == [1, 2]

    def dearer(b):
        t = b.table("typed")
        return t.filter(t.dec > Decimal("2.5")).select("i", "dec").order_by("i")

    assert arrow_both(con, oracle, dearer).to_pylist() == [
        {"i": 3, "dec": Decimal("3.75")},
        {"i": 4, "dec": Decimal("4.00")},
    ]


def test_ibis_date_literal(con, oracle):
    # ibis' DuckDB compiler renders a date literal as MAKE_DATE(2024, 1, 3)
    def since(b):
        t = b.table("typed")
        return t.filter(t.dt >= dt.date(2024, 1, 3)).select("i").order_by("i")

    assert arrow_both(con, oracle, since).to_pylist() == [{"i": 3}, {"i": 4}]


def test_ibis_timestamp_literal(con, oracle):
    # ibis' DuckDB compiler renders a timestamp literal as
    # MAKE_TIMESTAMP(2024, 1, 3, 0, 0, 0.0)
    def later(b):
        t = b.table("typed")
        return t.filter(t.ts >= dt.datetime(2024, 1, 3)).select("i", "ts").order_by("i")

    assert arrow_both(con, oracle, later).to_pylist() == [
        {"i": 3, "ts": dt.datetime(2024, 1, 3, 12, 0)},
        {"i": 4, "ts": dt.datetime(2024, 1, 4, 13, 30)},
    ]


def test_ibis_temporal_functions(con, oracle):
    # EXTRACT(year FROM ts), DATE_TRUNC('DAY', ts), (DAYOFWEEK(dt) + 6) % 7
    def parts(b):
        t = b.table("typed")
        return (
            t.filter(t.i <= 2)
            .select(
                "i",
                year=t.ts.year(),
                day=t.ts.truncate("D"),
                weekday=t.dt.day_of_week.index(),
            )
            .order_by("i")
        )

    # 2024-01-01 is a Monday (ibis: index 0), 2024-01-02 a Tuesday
    assert arrow_both(con, oracle, parts).to_pylist() == [
        {"i": 1, "year": 2024, "day": dt.datetime(2024, 1, 1), "weekday": 0},
        {"i": 2, "year": 2024, "day": dt.datetime(2024, 1, 2), "weekday": 1},
    ]


def test_ibis_string_functions(con, oracle):
    # UPPER, LENGTH, CONTAINS
    def strings(b):
        t = b.table("typed")
        return (
            t.filter(t.i.isin([1, 3]))
            .select("i", u=t.v.upper(), n=t.v.length(), has_x=t.v.contains("x"))
            .order_by("i")
        )

    assert arrow_both(con, oracle, strings).to_pylist() == [
        {"i": 1, "u": "X", "n": 1, "has_x": True},
        {"i": 3, "u": "Y", "n": 1, "has_x": False},
    ]


def test_ibis_from_connection_and_join(client, oracle, ibis_schema):
    from altertable_lakehouse.ibis import Backend

    backend = Backend.from_connection(client, catalog=CATALOG, database=ibis_schema)

    def joined(b):
        orders = b.table("orders")
        typed = b.table("typed")
        return (
            orders.join(typed, orders.order_id == typed.i)
            .select(orders.customer, typed.v, typed.dec)
            .order_by("customer")
        )

    frame = frame_both(backend, oracle, joined)
    assert frame.to_dict("records") == [
        {"customer": "ann", "v": "x", "dec": Decimal("1.25")},
        {"customer": "bob", "v": "x", "dec": Decimal("2.50")},
    ]
    backend.disconnect()  # does not close a client it does not own
    assert run(client, "SELECT 1 AS one").rows == [[1]]
