"""Staged SQL merges (hard deletes, nested tables, partitions outside the key), the choice
of merge path per table, partition hints, descriptions as comments, nested replace. Each
test asserts the exact table contents after each load, queried from the server."""

import datetime as dt
import json
from pathlib import Path

import dlt
import pytest
from conftest import fq, make_destination
from dlt.common.destination.exceptions import DestinationTerminalException
from dlt.pipeline.exceptions import PipelineStepFailed
from proxy import Rule

from dlt_altertable import (
    InvalidLayoutHint,
    UnsupportedMergeConfiguration,
    altertable_adapter,
    altertable_partition,
)

UTC = dt.UTC


def _cause(ex: BaseException) -> BaseException:
    while getattr(ex, "exception", None) is not None and ex.exception is not ex:
        ex = ex.exception
    return ex


def _rows(server, dataset, table, cols, order):
    return server.query(f"SELECT {cols} FROM {fq(server, dataset, table)} ORDER BY {order}")


def _staging_schemas(server, dataset):
    rows = server.query("SELECT schema_name FROM information_schema.schemata")
    return [r["schema_name"] for r in rows if r["schema_name"].startswith(dataset + "_dlt_staging")]


def _queries(proxy, needle: str) -> list[str]:
    out = []
    for r in proxy.log:
        if r.route == "/query" and needle.encode() in r.body:
            out.append(json.loads(r.body)["statement"])
    return out


def _delta(server, dataset, table):
    from deltalake import DeltaTable

    return DeltaTable(str(Path(server.data) / server.catalog / dataset / table))


# ----- hard deletes -----


def _users(**kw):
    @dlt.resource(
        name="users",
        write_disposition="merge",
        primary_key="id",
        columns={"deleted": {"hard_delete": True, "data_type": "bool"}},
        **kw,
    )
    def users(rows):
        yield rows

    return users


@pytest.mark.parametrize("staged", [False, True])
def test_hard_delete_without_cursor(server, make_pipeline, proxy, staged):
    """Direct (`/upsert?delete_column=`) and staged (SQL MERGE) give the same table."""
    import uuid

    dataset = "ds_" + uuid.uuid4().hex[:10]
    users = _users()
    destination = make_destination(server, dataset, port=proxy.port, force_sql_merge=staged)
    p = make_pipeline(destination=destination)
    upserts, staged_uploads = proxy.count("/upsert"), proxy.count("/upload", "_dlt_staging_")
    merges = len(_queries(proxy, "MERGE INTO"))
    p.run(users([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]))
    assert _rows(server, dataset, "users", "id, name, deleted", "id") == [
        {"id": 1, "name": "a", "deleted": None},
        {"id": 2, "name": "b", "deleted": None},
        {"id": 3, "name": "c", "deleted": None},
    ]
    p.run(
        users(
            [
                {"id": 1, "deleted": True},  # removes its key
                {"id": 2, "name": "b2", "deleted": False},  # an update
                {"id": 4, "name": "d", "deleted": True},  # arrives deleted: never inserted
                {"id": 5, "name": "e"},
            ]
        )
    )
    assert _rows(server, dataset, "users", "id, name, deleted", "id") == [
        {"id": 2, "name": "b2", "deleted": False},
        {"id": 3, "name": "c", "deleted": None},
        {"id": 5, "name": "e", "deleted": None},
    ]
    if staged:
        # files to the staging schema, no /upsert, staging dropped afterwards
        assert proxy.count("/upsert") == upserts
        assert proxy.count("/upload", "_dlt_staging_") - staged_uploads >= 2
        assert len(_queries(proxy, "MERGE INTO")) - merges == 2
        assert _staging_schemas(server, dataset) == []
    else:
        # one /upsert per file naming the hard_delete column, nothing staged
        assert proxy.count("/upsert", "delete_column=deleted") - upserts == 2
        assert proxy.count("/upload", "_dlt_staging_") == staged_uploads
        assert len(_queries(proxy, "MERGE INTO")) == merges


def test_hard_delete_last_row_of_a_key_wins(server, dataset, make_pipeline):
    """Without a cursor the last row of a key in the load wins, as on the /upsert path: a
    CDC stream of insert/update/delete lands as its final state."""
    users = _users()
    p = make_pipeline()
    p.run(users([{"id": 1, "name": "a"}]))
    p.run(
        users(
            [
                {"id": 1, "name": "a2"},
                {"id": 1, "deleted": True},
                {"id": 2, "name": "x"},
                {"id": 2, "deleted": True},
                {"id": 2, "name": "y"},
                {"id": 3, "deleted": True},
                {"id": 3, "name": "z"},
            ]
        )
    )
    assert _rows(server, dataset, "users", "id, name, deleted", "id") == [
        {"id": 2, "name": "y", "deleted": None},
        {"id": 3, "name": "z", "deleted": None},
    ]


def test_hard_delete_with_cursor_newer_wins(server, dataset, make_pipeline):
    users = _users()
    users_with_cursor = users.with_name("users")
    p = make_pipeline()

    def run(rows):
        r = users_with_cursor(rows)
        r.apply_hints(columns={"updated": {"dedup_sort": "desc", "data_type": "bigint"}})
        p.run(r)

    run(
        [
            {"id": 1, "v": "a", "updated": 10},
            {"id": 2, "v": "b", "updated": 10},
            {"id": 3, "v": "c", "updated": 10},
        ]
    )
    run(
        [
            {"id": 1, "deleted": True, "updated": 5},  # stale delete: ignored
            {"id": 2, "deleted": True, "updated": 11},  # newer delete: removes
            {"id": 3, "v": "c2", "updated": 12},  # the newest version of 3 ...
            {"id": 3, "deleted": True, "updated": 11},  # ... beats an older delete
            {"id": 4, "v": "d", "updated": 1},
            {"id": 4, "deleted": True, "updated": 2},  # newest is a delete: never inserted
            {"id": 5, "v": "e", "updated": 3},
            {"id": 5, "v": "e2", "updated": 3},  # a tie goes to the later row
        ]
    )
    assert _rows(server, dataset, "users", "id, v, updated", "id") == [
        {"id": 1, "v": "a", "updated": 10},
        {"id": 3, "v": "c2", "updated": 12},
        {"id": 5, "v": "e2", "updated": 3},
    ]
    # an equal cursor does not overwrite the stored row, NULL never beats a value
    run([{"id": 3, "v": "same", "updated": 12}, {"id": 5, "v": "null-cursor", "updated": None}])
    assert _rows(server, dataset, "users", "id, v, updated", "id") == [
        {"id": 1, "v": "a", "updated": 10},
        {"id": 3, "v": "c2", "updated": 12},
        {"id": 5, "v": "e2", "updated": 3},
    ]


def test_hard_delete_timestamp_column_and_composite_key(server, dataset, make_pipeline):
    @dlt.resource(
        name="tomb",
        write_disposition="merge",
        primary_key=("tenant", "id"),
        columns={"deleted_at": {"hard_delete": True, "data_type": "timestamp"}},
    )
    def tomb(rows):
        yield rows

    p = make_pipeline()
    p.run(
        tomb(
            [
                {"tenant": "a", "id": 1, "v": "v1"},
                {"tenant": "a", "id": 2, "v": "v2"},
                {"tenant": "b", "id": 1, "v": "v3"},
            ]
        )
    )
    gone = dt.datetime(2024, 5, 1, tzinfo=UTC)
    p.run(
        tomb(
            [
                {"tenant": "a", "id": 1, "v": "v1", "deleted_at": gone},
                {"tenant": "b", "id": 1, "v": "v3b"},
                {"tenant": "c", "id": 9, "v": "never", "deleted_at": gone},
            ]
        )
    )
    assert _rows(server, dataset, "tomb", "tenant, id, v, deleted_at", "tenant, id") == [
        {"tenant": "a", "id": 2, "v": "v2", "deleted_at": None},
        {"tenant": "b", "id": 1, "v": "v3b", "deleted_at": None},
    ]


# ----- nested tables -----


def _orders(**columns):
    @dlt.resource(
        name="orders",
        write_disposition="merge",
        primary_key="order_id",
        columns=columns or None,
    )
    def orders(rows):
        yield rows

    return orders


def _items(server, dataset, child="orders__items", cols="i.sku"):
    return server.query(
        f"SELECT o.order_id, {cols}, i._dlt_list_idx AS idx FROM {fq(server, dataset, child)} AS i"
        f" JOIN {fq(server, dataset, 'orders')} AS o ON i._dlt_root_id = o._dlt_id"
        " AND i._dlt_parent_id = o._dlt_id ORDER BY o.order_id, i._dlt_list_idx"
    )


def _count(server, dataset, table):
    return server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, table)}")[0]["n"]


def test_nested_children_replaced_per_root_key(server, dataset, make_pipeline, proxy):
    orders = _orders()
    p = make_pipeline(
        destination=make_destination(server, dataset, port=proxy.port, max_table_nesting=2)
    )
    p.run(
        orders(
            [
                {
                    "order_id": 10,
                    "items": [{"sku": "A", "discounts": [{"code": "x"}]}, {"sku": "B"}],
                },
                {"order_id": 11, "items": [{"sku": "C"}]},
                {"order_id": 12, "items": [{"sku": "D"}]},
            ]
        )
    )
    assert _items(server, dataset) == [
        {"order_id": 10, "sku": "A", "idx": 0},
        {"order_id": 10, "sku": "B", "idx": 1},
        {"order_id": 11, "sku": "C", "idx": 0},
        {"order_id": 12, "sku": "D", "idx": 0},
    ]
    assert _count(server, dataset, "orders__items__discounts") == 1
    p.run(
        orders(
            [
                {"order_id": 10, "items": [{"sku": "A"}]},  # fewer items, discount gone
                {"order_id": 11, "items": []},  # empty list: its items go
                {"order_id": 13, "items": [{"sku": "E"}]},
            ]
        )
    )
    assert [r["order_id"] for r in _rows(server, dataset, "orders", "order_id", "order_id")] == [
        10,
        11,
        12,
        13,
    ]
    assert _items(server, dataset) == [
        {"order_id": 10, "sku": "A", "idx": 0},
        {"order_id": 12, "sku": "D", "idx": 0},
        {"order_id": 13, "sku": "E", "idx": 0},
    ]
    # no orphans anywhere
    assert _count(server, dataset, "orders__items") == 3
    assert _count(server, dataset, "orders__items__discounts") == 0
    assert proxy.count("/upsert") == 0


def test_nested_with_hard_delete_cursor_and_new_nested_table(server, dataset, make_pipeline):
    orders = _orders(
        version={"dedup_sort": "desc", "data_type": "bigint"},
        is_deleted={"hard_delete": True, "data_type": "bool"},
    )
    p = make_pipeline(max_table_nesting=2)
    p.run(
        orders(
            [
                {"order_id": 10, "version": 1, "items": [{"sku": "A"}, {"sku": "B"}]},
                {"order_id": 11, "version": 1, "items": [{"sku": "C"}]},
                {"order_id": 12, "version": 1, "items": [{"sku": "D"}]},
            ]
        )
    )
    p.run(
        orders(
            [
                {"order_id": 10, "version": 2, "items": [{"sku": "A2"}], "notes": [{"t": "n1"}]},
                {"order_id": 11, "version": 2, "is_deleted": True, "items": [{"sku": "C"}]},
                {"order_id": 12, "version": 0, "items": [{"sku": "Z"}]},  # stale
                {"order_id": 14, "version": 1, "is_deleted": True, "items": [{"sku": "F"}]},
            ]
        )
    )
    assert _rows(server, dataset, "orders", "order_id, version, is_deleted", "order_id") == [
        {"order_id": 10, "version": 2, "is_deleted": None},
        {"order_id": 12, "version": 1, "is_deleted": None},
    ]
    assert _items(server, dataset) == [
        {"order_id": 10, "sku": "A2", "idx": 0},
        {"order_id": 12, "sku": "D", "idx": 0},
    ]
    assert _count(server, dataset, "orders__items") == 2
    assert _items(server, dataset, "orders__notes", "i.t") == [
        {"order_id": 10, "t": "n1", "idx": 0}
    ]


def test_nested_merge_needs_one_row_per_key(server, dataset, make_pipeline):
    orders = _orders()
    p = make_pipeline(max_table_nesting=1)
    p.run(orders([{"order_id": 10, "v": 1, "items": [{"sku": "A"}]}]))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(
            orders(
                [
                    {"order_id": 10, "v": 2, "items": [{"sku": "B"}]},
                    {"order_id": 10, "v": 3, "items": [{"sku": "C"}]},
                ]
            )
        )
    cause = _cause(exc.value)
    assert isinstance(cause, UnsupportedMergeConfiguration), repr(cause)
    assert isinstance(cause, DestinationTerminalException)
    assert "one row per primary key" in str(cause)
    assert _rows(server, dataset, "orders", "order_id, v", "order_id") == [{"order_id": 10, "v": 1}]
    assert _items(server, dataset) == [{"order_id": 10, "sku": "A", "idx": 0}]


def test_staged_merge_rerun_after_partial_script(server, dataset, make_pipeline, proxy):
    """The server commits each statement of a script on its own: the merge script stops
    after the root MERGE (nested rows already deleted, not yet inserted) and reports an
    error. The retry re-runs the whole script: rows that this load already wrote are not
    stale to it, so the nested rows come back, once."""
    orders = _orders(version={"dedup_sort": "desc", "data_type": "bigint"})
    p = make_pipeline(
        destination=make_destination(server, dataset, port=proxy.port, max_table_nesting=1)
    )
    p.run(orders([{"order_id": 1, "version": 1, "items": [{"sku": "A"}, {"sku": "B"}]}]))

    def cut_after_root_merge(body: bytes) -> bytes:
        payload = json.loads(body)
        lines = payload["statement"].split("\n")
        merge_at = next(i for i, line in enumerate(lines) if line.startswith("MERGE INTO"))
        payload["statement"] = "\n".join([*lines[: merge_at + 1], "COMMIT;"])
        return json.dumps(payload).encode()

    proxy.rules.append(
        Rule(
            lambda r: r.route == "/query" and b"MERGE INTO" in r.body,
            "error_line",
            times=1,
            rewrite_body=cut_after_root_merge,
        )
    )
    p.run(
        orders(
            [
                {"order_id": 1, "version": 2, "items": [{"sku": "A2"}, {"sku": "B2"}]},
                {"order_id": 2, "version": 1, "items": [{"sku": "C"}]},
            ]
        )
    )
    assert len(_queries(proxy, "MERGE INTO")) == 3  # load 1, the cut attempt, the retry
    assert _rows(server, dataset, "orders", "order_id, version", "order_id") == [
        {"order_id": 1, "version": 2},
        {"order_id": 2, "version": 1},
    ]
    assert _items(server, dataset) == [
        {"order_id": 1, "sku": "A2", "idx": 0},
        {"order_id": 1, "sku": "B2", "idx": 1},
        {"order_id": 2, "sku": "C", "idx": 0},
    ]
    assert _count(server, dataset, "orders__items") == 3


def test_failed_complete_load_resumes_on_next_run(server, dataset, make_pipeline, proxy):
    """The merge fails for good in complete_load; the package stays pending with its staged
    files; the next `load()` merges it and drops the staging schema."""
    users = _users()
    # staged on purpose: a hard_delete table alone would take /upsert
    p = make_pipeline(
        destination=make_destination(server, dataset, port=proxy.port, force_sql_merge=True)
    )
    p.run(users([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]))
    proxy.rules.append(
        Rule(lambda r: r.route == "/query" and b"MERGE INTO" in r.body, "status", status=503)
    )
    with pytest.raises(PipelineStepFailed):
        p.run(users([{"id": 1, "deleted": True}, {"id": 3, "name": "c"}]))
    assert _rows(server, dataset, "users", "id, name", "id") == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
    ]
    assert len(_staging_schemas(server, dataset)) == 1
    proxy.rules.clear()
    p.load()
    assert _rows(server, dataset, "users", "id, name", "id") == [
        {"id": 2, "name": "b"},
        {"id": 3, "name": "c"},
    ]
    assert _staging_schemas(server, dataset) == []
    loads = server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, '_dlt_loads')}")
    assert loads == [{"n": 2}]


# ----- the two merge paths give the same result -----


def _contacts_scenario(p, other):
    @dlt.resource(
        name="contacts",
        write_disposition="merge",
        primary_key="id",
        columns={"ts": {"dedup_sort": "desc", "data_type": "bigint"}},
    )
    def contacts(rows):
        yield rows

    p.run(
        contacts(
            [
                {"id": 1, "email": "a1", "name": "A", "ts": 1},
                {"id": 1, "email": "a3", "name": "A", "ts": 3},
                {"id": 1, "email": "a2", "name": "A", "ts": 2},
                {"id": 2, "email": "b", "name": "B", "ts": None},
                {"id": 3, "email": "c", "name": "C", "ts": 5},
                {"id": 4, "email": "d1", "name": "D", "ts": 7},
                {"id": 4, "email": "d2", "name": "D", "ts": 7},
            ]
        )
    )
    p.run(
        contacts(
            [
                {"id": 1, "email": "stale", "name": "S", "ts": 2},
                {"id": 2, "email": "b2", "name": "B", "ts": 1},  # a value beats a stored NULL
                {"id": 3, "email": "tie", "name": "T", "ts": 5},  # equal: stored row wins
                {"id": 3, "email": "null", "name": "N", "ts": None},
                {"id": 5, "email": "e", "name": "E", "ts": 0},
            ]
        )
    )
    # another pipeline whose schema never saw `name` keeps the stored names
    other.run(contacts([{"id": 4, "email": "d3", "ts": 8}]))


def test_sql_merge_equals_upsert(server, make_pipeline, proxy):
    import uuid

    results = {}
    for force in (False, True):
        ds = "ds_" + uuid.uuid4().hex[:10]
        dest = make_destination(server, ds, port=proxy.port, force_sql_merge=force)
        before = proxy.count("/upsert")
        _contacts_scenario(make_pipeline(destination=dest), make_pipeline(destination=dest))
        used_upsert = proxy.count("/upsert") - before
        assert (used_upsert == 0) == force
        results[force] = _rows(server, ds, "contacts", "id, email, name, ts", "id")
    expected = [
        {"id": 1, "email": "a3", "name": "A", "ts": 3},
        {"id": 2, "email": "b2", "name": "B", "ts": 1},
        {"id": 3, "email": "c", "name": "C", "ts": 5},
        {"id": 4, "email": "d3", "name": "D", "ts": 8},
        {"id": 5, "email": "e", "name": "E", "ts": 0},
    ]
    assert results[False] == expected
    assert results[True] == expected


# ----- partition hints -----


def _metrics():
    @dlt.resource(name="metrics", write_disposition="append")
    def metrics(rows):
        yield rows

    return metrics


def test_partition_adapter(server, dataset, make_pipeline, proxy):
    metrics = _metrics()
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    spec = [
        "region",
        altertable_partition.month("ts"),
        altertable_partition.bucket(4, "id"),
    ]
    rows1 = [
        {"region": "eu", "ts": dt.datetime(2024, 1, 5, tzinfo=UTC), "id": 1, "v": 1.5},
        {"region": "us", "ts": dt.datetime(2024, 2, 5, tzinfo=UTC), "id": 2, "v": 2.5},
    ]
    p.run(altertable_adapter(metrics(rows1), partition=spec))
    alter = '"region", month("ts"), bucket(4, "id")'
    statement = f"ALTER TABLE {fq(server, dataset, 'metrics')} SET PARTITIONED BY ({alter})"
    assert _queries(proxy, "PARTITIONED BY") == [statement]
    table = _delta(server, dataset, "metrics")
    assert table.metadata().partition_columns == ["region"]
    # the server stores the keys in one canonical spelling
    stored = "region, month(ts), bucket(4, id)"
    assert table.metadata().configuration["deltalite.partitioned_by"] == stored
    version = table.version()
    p.run(
        altertable_adapter(
            metrics([{"region": "eu", "ts": dt.datetime(2024, 3, 5, tzinfo=UTC), "id": 3}]),
            partition=spec,
        )
    )
    # re-sent each load, like 0.2.2; unchanged, it makes no commit: only the append's
    assert _queries(proxy, "PARTITIONED BY") == [statement, statement]
    assert _delta(server, dataset, "metrics").version() == version + 1
    assert _rows(server, dataset, "metrics", "region, id, v", "id") == [
        {"region": "eu", "id": 1, "v": 1.5},
        {"region": "us", "id": 2, "v": 2.5},
        {"region": "eu", "id": 3, "v": None},
    ]
    # an empty list resets
    p.run(altertable_adapter(metrics([{"region": "us", "id": 4}]), partition=[]))
    assert _queries(proxy, "PARTITIONED BY")[-1] == (
        f"ALTER TABLE {fq(server, dataset, 'metrics')} RESET PARTITIONED BY"
    )
    assert _delta(server, dataset, "metrics").metadata().partition_columns == []
    assert _count(server, dataset, "metrics") == 4


def test_partition_column_hint_and_replace(server, dataset, make_pipeline):
    @dlt.resource(
        name="snap",
        write_disposition="replace",
        columns={"site": {"partition": True}, "day": {"partition": True, "data_type": "date"}},
    )
    def snap(rows):
        yield rows

    p = make_pipeline()
    p.run(snap([{"site": "A", "day": dt.date(2024, 1, 1), "v": 1}, {"site": "B", "v": 2}]))
    # identity keys in the order of dlt's columns, as 0.2.2 orders them
    columns = p.default_schema.tables["snap"]["columns"]
    keys = [name for name, c in columns.items() if c.get("partition")]
    assert sorted(keys) == ["day", "site"]
    assert _delta(server, dataset, "snap").metadata().partition_columns == keys
    # a replace overwrites the rows and keeps the partitioning
    p.run(snap([{"site": "C", "day": dt.date(2024, 1, 2), "v": 3}]))
    assert _delta(server, dataset, "snap").metadata().partition_columns == keys
    assert _rows(server, dataset, "snap", "site, v", "site") == [{"site": "C", "v": 3}]


@pytest.mark.parametrize(
    "partition,message",
    [
        ([altertable_partition.month("name")], "month cannot partition 'name' (text)"),
        (["nope"], "layout column 'nope' does not exist"),
        ([altertable_partition.hour("day")], "hour cannot partition 'day' (date)"),
    ],
)
def test_invalid_partition_fails_before_upload(
    server, dataset, make_pipeline, proxy, partition, message
):
    @dlt.resource(name="bad", columns={"day": {"data_type": "date"}})
    def bad():
        yield {"id": 1, "name": "x", "day": dt.date(2024, 1, 1)}

    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(altertable_adapter(bad(), partition=partition))
    cause = _cause(exc.value)
    assert isinstance(cause, InvalidLayoutHint), repr(cause)
    assert message in str(cause)
    assert proxy.count("/upload") == 0


def test_adapter_refuses_what_0_2_2_refuses():
    resource = _metrics()([{"id": 1}])
    with pytest.raises(NotImplementedError, match="Sort hints are unsupported"):
        altertable_adapter(resource, partition="id", sort="id")
    with pytest.raises(InvalidLayoutHint, match="Specify partition"):
        altertable_adapter(resource)
    with pytest.raises(InvalidLayoutHint, match="Bucket count"):
        altertable_adapter(resource, partition=altertable_partition.bucket(0, "id"))
    with pytest.raises(InvalidLayoutHint, match="Unsupported partition transform"):
        altertable_adapter(resource, partition=altertable_partition.truncate(4, "id"))
    with pytest.raises(InvalidLayoutHint, match="Duplicate"):
        altertable_adapter(resource, partition=["id", "id"])
    altertable_adapter(resource, partition=altertable_partition.identity("id"))
    assert resource.compute_table_schema()["x-altertable-partition"] == [
        {"column": "id", "transform": "identity"}
    ]


def test_merge_partitioned_outside_key_uses_sql_merge(server, dataset, make_pipeline, proxy):
    """/upsert identifies a row within its partition; dlt's merge across the table. A merge
    table partitioned by a column outside its key goes through the SQL MERGE, so a key that
    changes partition stays one row; partitioned by a key column, /upsert is equivalent."""

    @dlt.resource(
        name="moving",
        write_disposition="merge",
        primary_key="id",
        columns={"region": {"partition": True, "data_type": "text"}},
    )
    def moving(rows):
        yield rows

    @dlt.resource(
        name="keyed",
        write_disposition="merge",
        primary_key=("region", "id"),
        columns={"region": {"partition": True, "data_type": "text"}},
    )
    def keyed(rows):
        yield rows

    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run([moving([{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]), keyed([])])
    p.run(moving([{"id": 1, "region": "us", "v": 2}]))
    assert _rows(server, dataset, "moving", "id, region, v", "id") == [
        {"id": 1, "region": "us", "v": 2},
        {"id": 2, "region": "us", "v": None},
    ]
    assert proxy.count("/upsert", "table=moving") == 0
    p.run(keyed([{"region": "eu", "id": 1, "v": 1}, {"region": "us", "id": 1, "v": 2}]))
    p.run(keyed([{"region": "eu", "id": 1, "v": 3}]))
    assert _rows(server, dataset, "keyed", "region, id, v", "region, id") == [
        {"region": "eu", "id": 1, "v": 3},
        {"region": "us", "id": 1, "v": 2},
    ]
    assert proxy.count("/upsert", "table=keyed") >= 2
    assert _delta(server, dataset, "keyed").metadata().partition_columns == ["region"]


# ----- descriptions -----


def _comments(server, dataset, table):
    cols = server.query(
        "SELECT column_name, column_comment FROM information_schema.columns WHERE"
        f" table_schema = '{dataset}' AND table_name = '{table}'"
    )
    tables = server.query(
        "SELECT table_comment FROM information_schema.tables WHERE"
        f" table_schema = '{dataset}' AND table_name = '{table}'"
    )
    return (
        {c["column_name"]: c["column_comment"] for c in cols if c["column_comment"]},
        tables[0]["table_comment"],
    )


@pytest.mark.parametrize("disposition", ["append", "replace", "merge"])
def test_descriptions_become_comments(server, dataset, make_pipeline, proxy, disposition):
    def resource(email_description):
        @dlt.resource(
            name="people",
            write_disposition=disposition,
            primary_key="id",
            columns={
                "email": {"description": email_description},
                "name": {"description": "full name"},
            },
        )
        def people():
            yield {"id": 1, "email": "a@example.com", "name": "A"}

        r = people()
        r.apply_hints(additional_table_hints={"description": "people's table"})
        return r

    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(resource("e-mail"))
    assert _comments(server, dataset, "people") == (
        {"email": "e-mail", "name": "full name"},
        "people's table",
    )
    p.run(resource("primary e-mail"))
    assert _comments(server, dataset, "people") == (
        {"email": "primary e-mail", "name": "full name"},
        "people's table",
    )
    if disposition != "replace":
        # unchanged descriptions send nothing
        sent = len(_queries(proxy, "COMMENT ON"))
        p.run(resource("primary e-mail"))
        assert len(_queries(proxy, "COMMENT ON")) == sent
    loads = 2 if disposition == "replace" else 3
    assert _count(server, dataset, "people") == (loads if disposition == "append" else 1)


# ----- replace with nested tables -----


def test_replace_empties_nested_tables_without_rows(server, dataset, make_pipeline):
    @dlt.resource(name="inv", write_disposition="replace")
    def inv(rows):
        yield rows

    p = make_pipeline(max_table_nesting=1)
    p.run(inv([{"sku": "A", "lines": [{"n": 1}, {"n": 2}]}, {"sku": "B", "lines": [{"n": 3}]}]))
    assert _count(server, dataset, "inv__lines") == 3
    p.run(inv([{"sku": "C", "lines": [{"n": 4}]}]))
    assert [r["n"] for r in _rows(server, dataset, "inv__lines", "n", "n")] == [4]
    # the new rows have no list items at all: no file for the nested table in this load
    p.run(inv([{"sku": "D", "lines": []}]))
    assert _rows(server, dataset, "inv", "sku", "sku") == [{"sku": "D"}]
    assert _count(server, dataset, "inv__lines") == 0
