"""State on ephemeral runners and dataset access."""

import uuid

import dlt
from conftest import fq, make_destination


def _orders(upto: int):
    @dlt.resource(name="orders", write_disposition="append", primary_key="id")
    def orders(updated_at=dlt.sources.incremental("updated_at", initial_value=0)):
        yield [{"id": i, "updated_at": i * 10} for i in range(1, upto + 1)]

    return orders()


def test_fresh_runner_restores_state_and_continues_incremental(server, dataset, tmp_path):
    name = "inc_" + uuid.uuid4().hex[:8]
    first = dlt.pipeline(
        pipeline_name=name,
        pipelines_dir=str(tmp_path / "runner1"),
        destination=make_destination(server, dataset),
    )
    first.run(_orders(5))
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'orders')}") == [{"n": 5}]

    # a new runner: empty pipelines_dir, same pipeline name and destination
    second = dlt.pipeline(
        pipeline_name=name,
        pipelines_dir=str(tmp_path / "runner2"),
        destination=make_destination(server, dataset),
    )
    second.run(_orders(8))
    rows = server.query(f"SELECT id FROM {fq(server, dataset, 'orders')} ORDER BY id")
    assert [r["id"] for r in rows] == list(range(1, 9)), "rows 1..5 must not load twice"
    state = second.state["sources"][second.default_schema_name]["resources"]["orders"]
    assert state["incremental"]["updated_at"]["last_value"] == 80

    # and a third runner sees the cursor of the second
    third = dlt.pipeline(
        pipeline_name=name,
        pipelines_dir=str(tmp_path / "runner3"),
        destination=make_destination(server, dataset),
    )
    third.sync_destination()
    state = third.state["sources"][third.default_schema_name]["resources"]["orders"]
    assert state["incremental"]["updated_at"]["last_value"] == 80
    assert "orders" in third.default_schema.tables


def test_fresh_runner_without_remote_state_starts_from_scratch(server, dataset, tmp_path):
    p = dlt.pipeline(
        pipeline_name="empty_" + uuid.uuid4().hex[:8],
        pipelines_dir=str(tmp_path / "r"),
        destination=make_destination(server, dataset),
    )
    p.run(_orders(3))
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'orders')}") == [{"n": 3}]


def test_pipeline_dataset_reads_back_with_types(server, dataset, make_pipeline):
    import datetime as dt

    import pyarrow as pa

    p = make_pipeline()
    p.run(
        [
            {"id": 1, "name": "a", "score": 1.5, "ts": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)},
            {"id": 2, "name": "b", "score": None, "ts": dt.datetime(2024, 1, 2, tzinfo=dt.UTC)},
        ],
        table_name="readback",
    )
    ds = p.dataset()
    table = ds.table("readback").arrow()
    table = table.sort_by("id")
    assert table.column("id").to_pylist() == [1, 2]
    assert table.schema.field("id").type == pa.int64()
    assert table.schema.field("name").type in (pa.string(), pa.large_string(), pa.string_view())
    assert table.schema.field("score").type == pa.float64()
    assert pa.types.is_timestamp(table.schema.field("ts").type)
    assert table.column("score").to_pylist() == [1.5, None]
    rows = ds.query(
        f'SELECT count(*) AS n FROM "{server.catalog}"."{dataset}"."readback"'
    ).fetchall()
    assert rows == [(2,)]
    with p.sql_client() as client:
        assert client.execute_sql("SELECT max(id) FROM readback") == [(2,)]


def test_seed_bootstrap_query_works_as_written(server, dataset, tmp_path):
    """The seed's manual cursor bootstrap (rows[2][0] of the NDJSON stream) against our server."""
    import json

    import requests

    p = dlt.pipeline(
        pipeline_name="boot_" + uuid.uuid4().hex[:8],
        pipelines_dir=str(tmp_path / "r"),
        destination=make_destination(server, dataset),
    )
    p.run(_orders(4))
    catalog, schema, table_name = server.catalog, dataset, "orders"
    response = requests.post(
        f"{server.url}/query",
        json={"statement": f'SELECT max(updated_at) FROM "{catalog}"."{schema}"."{table_name}"'},
        auth=(server.user, server.password),
        timeout=(10, 300),
    )
    response.raise_for_status()
    rows = [json.loads(line) for line in response.text.splitlines()]
    assert not any(isinstance(row, dict) and "error" in row for row in rows)
    assert rows[2][0] == 40
