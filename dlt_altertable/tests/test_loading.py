"""Dispositions, schema evolution, nested data and lineage, checked by querying the server."""

import json

import dlt
from conftest import fq


def _rows(server, dataset, table, order="id", cols="*"):
    return server.query(f"SELECT {cols} FROM {fq(server, dataset, table)} ORDER BY {order}")


def test_append_then_append_with_new_column(server, dataset, make_pipeline):
    p = make_pipeline()
    p.run([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], table_name="events")
    p.run([{"id": 3, "name": "c", "score": 1.5}], table_name="events")
    rows = _rows(server, dataset, "events", cols="id, name, score")
    assert rows == [
        {"id": 1, "name": "a", "score": None},
        {"id": 2, "name": "b", "score": None},
        {"id": 3, "name": "c", "score": 1.5},
    ]
    types = {
        c["name"]: c["type"]
        for c in server.columns(f"SELECT * FROM {fq(server, dataset, 'events')}")
    }
    assert types["id"] == "BIGINT"
    assert types["name"] == "VARCHAR"
    assert types["score"] == "DOUBLE"


def test_typed_ddl(server, dataset, make_pipeline):
    import datetime as dt
    from decimal import Decimal

    @dlt.resource(
        name="typed",
        columns={"naive": {"data_type": "timestamp", "timezone": False}},
    )
    def typed():
        yield {
            "id": 1,
            "flag": True,
            "ts": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            "naive": dt.datetime(2024, 1, 2, 3, 4, 5),
            "day": dt.date(2024, 1, 2),
            "amount": Decimal("12.345"),
            "blob": b"\x00\x01",
        }

    make_pipeline().run(typed())
    types = {
        c["name"]: c["type"]
        for c in server.columns(f"SELECT * FROM {fq(server, dataset, 'typed')}")
    }
    assert types["flag"] == "BOOLEAN"
    assert types["ts"] == "TIMESTAMP WITH TIME ZONE"
    assert types["naive"] == "TIMESTAMP"
    assert types["day"] == "DATE"
    assert types["amount"].startswith("DECIMAL(38,9)")
    assert types["blob"] == "BLOB"
    row = _rows(server, dataset, "typed")[0]
    assert row["flag"] is True
    assert row["day"].startswith("2024-01-02")
    assert dt.datetime.fromisoformat(row["ts"]) == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_replace_several_files_twice(server, dataset, make_pipeline, monkeypatch):
    monkeypatch.setenv("DATA_WRITER__FILE_MAX_ITEMS", "10")
    p = make_pipeline()
    info = p.run(
        [{"id": i, "v": f"a{i}"} for i in range(35)], table_name="snap", write_disposition="replace"
    )
    jobs = [
        j
        for j in info.load_packages[0].jobs["completed_jobs"]
        if j.job_file_info.table_name == "snap"
    ]
    assert len(jobs) >= 4, "the load must span several files"
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'snap')}") == [{"n": 35}]
    p.run(
        [{"id": 100 + i, "v": f"b{i}"} for i in range(23)],
        table_name="snap",
        write_disposition="replace",
    )
    rows = _rows(server, dataset, "snap", cols="id, v")
    assert [r["id"] for r in rows] == [100 + i for i in range(23)]


def test_replace_pads_files_written_before_schema_evolved(
    server, dataset, make_pipeline, monkeypatch
):
    monkeypatch.setenv("DATA_WRITER__FILE_MAX_ITEMS", "5")
    p = make_pipeline()
    data = [{"id": i} for i in range(10)] + [{"id": i, "extra": f"x{i}"} for i in range(10, 20)]
    p.run(data, table_name="evolving", write_disposition="replace")
    rows = _rows(server, dataset, "evolving", cols="id, extra")
    assert len(rows) == 20
    assert [r["extra"] for r in rows[:10]] == [None] * 10
    assert [r["extra"] for r in rows[10:]] == [f"x{i}" for i in range(10, 20)]
    # second load replaces everything, including the evolved column
    p.run([{"id": 1, "extra": "y"}], table_name="evolving", write_disposition="replace")
    assert _rows(server, dataset, "evolving", cols="id, extra") == [{"id": 1, "extra": "y"}]


def _contacts(rows, **kw):
    @dlt.resource(
        name="contacts",
        write_disposition="merge",
        primary_key="id",
        columns={"lastmodifieddate": {"dedup_sort": "desc"}},
        **kw,
    )
    def contacts():
        yield rows

    return contacts()


def test_merge_dedup_sort_desc(server, dataset, make_pipeline):
    p = make_pipeline()
    p.run(
        _contacts(
            [
                {"id": 1, "email": "ada@example.com", "name": "Ada", "lastmodifieddate": 100},
                {"id": 2, "email": "grace@example.com", "name": "Grace", "lastmodifieddate": 100},
            ]
        )
    )
    p.run(
        _contacts(
            [
                # in-batch duplicates: the greatest cursor wins whatever the order
                {"id": 1, "email": "ada2@example.com", "name": "Ada", "lastmodifieddate": 200},
                {"id": 1, "email": "ada15@example.com", "name": "Ada", "lastmodifieddate": 150},
                # stale row never overwrites the newer stored one
                {"id": 2, "email": "stale@example.com", "name": "Old", "lastmodifieddate": 50},
                {"id": 3, "email": "new@example.com", "name": "New", "lastmodifieddate": 10},
            ]
        )
    )
    rows = _rows(server, dataset, "contacts", cols="id, email, name, lastmodifieddate")
    assert rows == [
        {"id": 1, "email": "ada2@example.com", "name": "Ada", "lastmodifieddate": 200},
        {"id": 2, "email": "grace@example.com", "name": "Grace", "lastmodifieddate": 100},
        {"id": 3, "email": "new@example.com", "name": "New", "lastmodifieddate": 10},
    ]
    # a merge whose file omits a column keeps its stored value: another pipeline (its own
    # schema, which never saw `name`) merges a subset of the columns
    other = make_pipeline()
    other.run(_contacts([{"id": 1, "email": "ada3@example.com", "lastmodifieddate": 300}]))
    rows = _rows(server, dataset, "contacts", cols="id, email, name")
    assert rows[0] == {"id": 1, "email": "ada3@example.com", "name": "Ada"}
    assert len(rows) == 3


def test_merge_without_cursor(server, dataset, make_pipeline):
    @dlt.resource(name="items", write_disposition="merge", primary_key="id")
    def items(rows):
        yield rows

    p = make_pipeline()
    p.run(items([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]))
    p.run(items([{"id": 2, "v": "b2"}, {"id": 3, "v": "c"}]))
    assert _rows(server, dataset, "items", cols="id, v") == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b2"},
        {"id": 3, "v": "c"},
    ]


def test_merge_no_strategy_named_and_upsert_strategy(server, dataset, make_pipeline):
    @dlt.resource(
        name="up",
        write_disposition={"disposition": "merge", "strategy": "upsert"},
        primary_key="id",
    )
    def up(rows):
        yield rows

    p = make_pipeline()
    p.run(up([{"id": 1, "v": 1}]))
    p.run(up([{"id": 1, "v": 2}]))
    assert _rows(server, dataset, "up", cols="id, v") == [{"id": 1, "v": 2}]


def test_merge_composite_key(server, dataset, make_pipeline):
    @dlt.resource(
        name="composite",
        write_disposition="merge",
        primary_key=("tenant", "id"),
        columns={"ts": {"dedup_sort": "desc"}},
    )
    def composite(rows):
        yield rows

    p = make_pipeline()
    p.run(
        composite(
            [
                {"tenant": "a", "id": 1, "v": "a1", "ts": 1},
                {"tenant": "b", "id": 1, "v": "b1", "ts": 1},
            ]
        )
    )
    p.run(
        composite(
            [
                {"tenant": "a", "id": 1, "v": "a1x", "ts": 2},
                {"tenant": "b", "id": 2, "v": "b2", "ts": 1},
            ]
        )
    )
    rows = server.query(
        f"SELECT tenant, id, v FROM {fq(server, dataset, 'composite')} ORDER BY tenant, id"
    )
    assert rows == [
        {"tenant": "a", "id": 1, "v": "a1x"},
        {"tenant": "b", "id": 1, "v": "b1"},
        {"tenant": "b", "id": 2, "v": "b2"},
    ]


def test_nested_data_lands_as_json(server, dataset, make_pipeline):
    p = make_pipeline()
    p.run(
        [{"id": 1, "tags": ["x", "y"], "meta": {"k": 1, "deep": {"a": [1, 2]}}}],
        table_name="docs",
    )
    tables = server.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = "
        f"'{dataset}' ORDER BY table_name"
    )
    assert not any(t["table_name"].startswith("docs__") for t in tables)
    row = _rows(server, dataset, "docs", cols="id, tags, meta")[0]
    assert json.loads(row["tags"]) == ["x", "y"]
    assert json.loads(row["meta"]) == {"k": 1, "deep": {"a": [1, 2]}}


def test_dlt_columns_and_state_table(server, dataset, make_pipeline):
    p = make_pipeline()
    info = p.run([{"id": 1}, {"id": 2}], table_name="lineage")
    load_id = info.loads_ids[0]
    rows = _rows(server, dataset, "lineage", cols="id, _dlt_id, _dlt_load_id")
    assert [r["_dlt_load_id"] for r in rows] == [load_id, load_id]
    assert all(r["_dlt_id"] for r in rows) and rows[0]["_dlt_id"] != rows[1]["_dlt_id"]
    n = server.query(
        f"SELECT count(*) AS n FROM {fq(server, dataset, 'lineage')}"
        f" WHERE _dlt_load_id = '{load_id}'"
    )
    assert n == [{"n": 2}]
    state = server.query(
        f"SELECT pipeline_name, version, state FROM {fq(server, dataset, '_dlt_pipeline_state')}"
    )
    assert state and state[0]["pipeline_name"] == p.pipeline_name and state[0]["state"]
    loads = server.query(f"SELECT load_id, status FROM {fq(server, dataset, '_dlt_loads')}")
    assert {"load_id": load_id, "status": 0} in loads


def test_replace_with_no_rows_empties_table(server, dataset, make_pipeline):
    @dlt.resource(name="vanishing", write_disposition="replace")
    def vanishing(rows):
        yield from rows

    p = make_pipeline()
    p.run(vanishing([{"id": 1}, {"id": 2}]))
    assert _rows(server, dataset, "vanishing", cols="id") == [{"id": 1}, {"id": 2}]
    p.run(vanishing([]))
    assert _rows(server, dataset, "vanishing", cols="id") == []


def test_uint64_and_arrow_items(server, dataset, make_pipeline):
    import pyarrow as pa

    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "big": pa.array([2**64 - 1, 5], pa.uint64()),
        }
    )
    make_pipeline().run(table, table_name="unsigned")
    types = {
        c["name"]: c["type"]
        for c in server.columns(f"SELECT * FROM {fq(server, dataset, 'unsigned')}")
    }
    assert types["big"] == "DECIMAL(20,0)"
    rows = _rows(server, dataset, "unsigned", cols="id, CAST(big AS VARCHAR) AS big")
    assert [r["big"] for r in rows] == [str(2**64 - 1), "5"]


def test_refresh_drop_data_and_drop_sources(server, dataset, make_pipeline):
    @dlt.source
    def src(rows):
        @dlt.resource(name="refreshed", write_disposition="append")
        def refreshed():
            yield rows

        return refreshed

    p = make_pipeline()
    p.run(src([{"id": 1, "old": "x"}, {"id": 2, "old": "y"}]))
    p.run(src([{"id": 3}]), refresh="drop_data")
    assert _rows(server, dataset, "refreshed", cols="id") == [{"id": 3}]
    p.run(src([{"id": 4, "new": "z"}]), refresh="drop_sources")
    rows = _rows(server, dataset, "refreshed")
    assert [r["id"] for r in rows] == [4]
    assert "old" not in rows[0], "drop_sources recreates the table from the new schema"


def test_replace_keeps_columns_outside_dlt_schema(server, dataset, make_pipeline):
    """Removed columns stay: a replace from a schema that never saw `legacy` keeps the column."""
    make_pipeline().run(
        [{"id": 1, "legacy": "old"}], table_name="kept", write_disposition="replace"
    )
    make_pipeline().run([{"id": 2}], table_name="kept", write_disposition="replace")
    assert _rows(server, dataset, "kept", cols="id, legacy") == [{"id": 2, "legacy": None}]
    types = {
        c["name"]: c["type"] for c in server.columns(f"SELECT * FROM {fq(server, dataset, 'kept')}")
    }
    assert types["legacy"] == "VARCHAR"
