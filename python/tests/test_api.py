"""The seed API surface: classes, methods, arguments, defaults and stats."""

from __future__ import annotations

import inspect
import threading

import polars as pl
import pyarrow as pa
import pytest
from conftest import read_delta, rows_of
from deltalake import DeltaTable

import deltalite
from deltalite import DeltaLiteTable, knob_defaults

SCHEMA = pa.schema(
    [("id", pa.int64()), ("day", pa.string()), ("val", pa.string())],
)


def make(path: str, partition: bool = True) -> DeltaLiteTable:
    return DeltaLiteTable.create(path, SCHEMA, partition_by=["day"] if partition else None)


def batch(ids, day="2026-01-01", val="x") -> pa.Table:
    return pa.table(
        {"id": list(ids), "day": [day] * len(ids), "val": [f"{val}{i}" for i in ids]},
        schema=SCHEMA,
    )


def test_exports_match_seed():
    for name in [
        "DeltaLiteTable",
        "UpsertStats",
        "DeltaLiteError",
        "DeltaLiteCommitConflictError",
        "DeltaLiteSchemaMismatchError",
        "DeltaLiteTableNotFoundError",
        "DeltaLiteUnsupportedTableError",
        "DeltaLiteSourceTooLargeError",
    ]:
        assert hasattr(deltalite, name), name
    for name in [
        "DeltaLiteCommitConflictError",
        "DeltaLiteSchemaMismatchError",
        "DeltaLiteTableNotFoundError",
        "DeltaLiteUnsupportedTableError",
        "DeltaLiteSourceTooLargeError",
    ]:
        assert issubclass(getattr(deltalite, name), deltalite.DeltaLiteError)
    assert issubclass(deltalite.DeltaLiteError, Exception)


def test_upsert_signature_defaults():
    sig = inspect.signature(DeltaLiteTable.upsert)
    defaults = {k: p.default for k, p in sig.parameters.items()}
    assert defaults["partition_key"] is None
    assert defaults["cursor_field"] is None
    assert defaults["commit_metadata"] is None
    assert defaults["on_duplicate"] == "error"
    assert defaults["omitted_columns"] == "null"
    # Every knob is None in the signature: the engine is the one source of its default.
    knobs = [
        "max_parallel_partitions",
        "max_parallel_files",
        "max_buffered_bytes",
        "prune_strategy",
        "skip_unmatched_files",
        "probe_concurrency",
        "read_batch_size",
        "target_file_size",
        "max_source_bytes",
        "multipart_threshold",
        "multipart_part_size",
        "commit_max_retries",
        "max_row_group_bytes",
        "isolate_source_rows",
        "use_probe_cache",
        "deletion_vector_max_share",
    ]
    for name in knobs:
        assert defaults[name] is None, name
    # The engine's defaults: the seed API's, and PostHog's deltalite 0.1.15 knobs with its.
    engine = knob_defaults()
    assert {
        k: engine[k]
        for k in [
            "max_parallel_partitions",
            "max_parallel_files",
            "max_buffered_bytes",
            "prune_strategy",
            "probe_concurrency",
            "read_batch_size",
            "commit_max_retries",
            "max_row_group_bytes",
            "isolate_source_rows",
            "use_probe_cache",
            "deletion_vector_max_share",
        ]
    } == {
        "max_parallel_partitions": 2,
        "max_parallel_files": 4,
        "max_buffered_bytes": 64 * 1024 * 1024,
        "prune_strategy": "probe",
        "probe_concurrency": 8,
        "read_batch_size": 8192,
        "commit_max_retries": 15,
        "max_row_group_bytes": None,
        "isolate_source_rows": False,
        "use_probe_cache": True,
        "deletion_vector_max_share": 0.5,
    }
    # The byte guards come from the process environment (2 GiB / 64 MiB / 16 MiB unless set).
    for name in ["max_source_bytes", "multipart_threshold", "multipart_part_size"]:
        assert isinstance(engine[name], int) and engine[name] > 0, name


def test_knobs_left_as_none_are_the_engines_and_bad_ones_are_refused(tmp_path):
    uri = str(tmp_path / "t")
    batch = pa.table({"id": [1, 2], "v": ["a", "b"]})
    t = DeltaLiteTable.create(uri, batch.schema)
    t.upsert(batch, "id")
    # Spelling every knob as None is the same call as leaving them out.
    explicit = t.upsert(
        pa.table({"id": [2, 3], "v": ["B", "c"]}),
        "id",
        **{
            k: None
            for k in [
                "max_parallel_partitions",
                "prune_strategy",
                "commit_max_retries",
                "use_probe_cache",
                "skip_unmatched_files",
                "read_batch_size",
            ]
        },
    )
    assert (explicit.rows_updated, explicit.rows_inserted) == (1, 1)
    assert rows_of(read_delta(uri)) == [(1, "a"), (2, "B"), (3, "c")]
    # Validation is the engine's, whichever face calls it.
    with pytest.raises(ValueError, match="max_parallel_files must be positive"):
        t.upsert(batch, "id", max_parallel_files=0)
    with pytest.raises(ValueError, match="prune_strategy"):
        t.upsert(batch, "id", prune_strategy="sometimes")
    assert rows_of(read_delta(uri)) == [(1, "a"), (2, "B"), (3, "c")]


def test_open_upsert_and_inspect(table_path):
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    assert DeltaLiteTable.is_deltatable(table_path)
    assert table.version() == 0
    assert table.partition_columns() == ["day"]
    assert table.schema_arrow() == SCHEMA

    stats = table.upsert(batch([1, 2, 3]), primary_keys=["id"], partition_key="day")
    assert isinstance(stats, deltalite.UpsertStats)
    assert stats.version == 1 == table.version()
    assert (stats.rows_inserted, stats.rows_updated, stats.source_rows) == (3, 0, 3)
    assert stats.partitions_touched == 1
    assert stats.files_added >= 1
    assert "UpsertStats(version=1" in repr(stats)
    assert stats.to_dict()["rows_inserted"] == 3
    assert set(stats.timings) == {"prepare", "prune", "write", "commit", "total"}

    stats = table.upsert(
        batch([3, 4], val="y"),
        primary_keys="id",
        partition_key=["day"],
        commit_metadata={"source": "test", "n": 1},
    )
    assert (stats.rows_inserted, stats.rows_updated, stats.files_removed) == (1, 1, 1)
    assert stats.version == 2
    got = {r["id"]: r["val"] for r in read_delta(table_path).to_pylist()}
    assert got == {1: "x1", 2: "x2", 3: "y3", 4: "y4"}

    history = table.history(1)
    assert len(history) == 1
    assert history[0]["version"] == 2
    assert history[0].get("source") == "test" or "test" in str(history[0])
    assert len(table.history()) == 3

    uris = table.file_uris()
    assert uris and all(u.endswith(".parquet") for u in uris)
    assert sorted(uris) == sorted(DeltaTable(table_path).file_uris())


def test_reload_sees_other_writers(table_path):
    make(table_path)
    a = DeltaLiteTable.open(table_path)
    b = DeltaLiteTable.open(table_path)
    a.upsert(batch([1]), primary_keys=["id"])
    assert b.version() == 0
    b.reload()
    assert b.version() == 1


@pytest.mark.parametrize(
    "kind", ["table", "record_batch", "reader", "polars", "generator_reader", "empty"]
)
def test_data_kinds(table_path, kind):
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    data = batch([1, 2])
    if kind == "record_batch":
        data = data.to_batches()[0]
    elif kind == "reader":
        data = pa.RecordBatchReader.from_batches(SCHEMA, data.to_batches())
    elif kind == "polars":
        data = pl.from_arrow(data)
    elif kind == "generator_reader":
        data = pa.RecordBatchReader.from_batches(
            SCHEMA, (b for b in [batch([1]).to_batches()[0], batch([2]).to_batches()[0]])
        )
    elif kind == "empty":
        data = SCHEMA.empty_table()
    stats = table.upsert(data, primary_keys=["id"], partition_key="day")
    expected = 0 if kind == "empty" else 2
    assert stats.rows_inserted == expected
    assert read_delta(table_path).num_rows == expected


def test_duckdb_result(table_path):
    duckdb = pytest.importorskip("duckdb")
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    rel = duckdb.sql("select 1::bigint as id, '2026-01-01' as day, 'v' as val")
    assert table.upsert(rel, primary_keys=["id"]).rows_inserted == 1


def test_not_arrow_is_type_error(table_path):
    make(table_path)
    with pytest.raises(TypeError):
        DeltaLiteTable.open(table_path).upsert([1, 2], primary_keys=["id"])


def test_invalid_knobs_are_value_errors(table_path):
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    with pytest.raises(ValueError):
        table.upsert(batch([1]), primary_keys=["id"], prune_strategy="bogus")
    with pytest.raises(ValueError):
        table.upsert(batch([1]), primary_keys=["id"], on_duplicate="first")
    with pytest.raises(ValueError):
        table.upsert(batch([1]), primary_keys=["id"], max_parallel_files=0)
    with pytest.raises(TypeError):
        table.upsert(batch([1]), primary_keys=["id"], no_such_knob=1)


@pytest.mark.parametrize(
    "knobs",
    [
        {"skip_unmatched_files": False},
        {"prune_strategy": "none"},
        {
            "max_parallel_partitions": 1,
            "max_parallel_files": 1,
            "max_buffered_bytes": 1 << 20,
            "probe_concurrency": 1,
            "read_batch_size": 7,
            "target_file_size": 1 << 20,
            "max_source_bytes": 0,
            "multipart_threshold": 0,
            "multipart_part_size": 5 << 20,
            "commit_max_retries": 3,
        },
    ],
)
def test_knobs_do_not_change_results(table_path, knobs):
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    table.upsert(batch(range(50)), primary_keys=["id"])
    table.upsert(batch(range(25, 75), val="z"), primary_keys=["id"], **knobs)
    got = {r["id"]: r["val"] for r in read_delta(table_path).to_pylist()}
    assert got == {i: (f"z{i}" if i >= 25 else f"x{i}") for i in range(75)}


def test_skip_unmatched_false_rewrites_all_files(table_path):
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    for i in range(3):
        table.upsert(batch([i]), primary_keys=["id"])
    probe = DeltaLiteTable.open(table_path).upsert(batch([0], val="q"), primary_keys=["id"])
    assert probe.files_removed == 1 and probe.files_carried_over == 2
    full = table.upsert(batch([0], val="r"), primary_keys=["id"], skip_unmatched_files=False)
    assert full.files_removed == 3


def test_append_overwrite_and_create(table_path):
    table = make(table_path, partition=False)
    with pytest.raises(deltalite.DeltaLiteError):
        make(table_path)
    stats = table.append(batch([1, 2]))
    assert isinstance(stats, deltalite.WriteStats)
    assert (stats.version, stats.rows_written) == (1, 2)
    # append by name, missing columns are NULL
    table.append(pa.table({"id": pa.array([3], pa.int64())}))
    assert rows_of(read_delta(table_path)) == rows_of(
        pa.table(
            {
                "day": ["2026-01-01", "2026-01-01", None],
                "id": pa.array([1, 2, 3], pa.int64()),
                "val": ["x1", "x2", None],
            }
        )
    )
    stats = table.overwrite(batch([9]))
    assert stats.files_removed == 2
    assert read_delta(table_path).to_pylist() == [{"id": 9, "day": "2026-01-01", "val": "x9"}]


def test_rows_replaced_counts_every_stored_copy_of_a_key(table_path):
    table = make(table_path, partition=False)
    table.append(batch([1, 2]))
    table.append(batch([2]))  # key 2 now stored twice, as another writer may leave it
    stats = table.upsert(batch([2], val="y"), "id")
    # One source row won; both stored copies of its key were replaced.
    assert (stats.rows_updated, stats.rows_replaced, stats.rows_inserted, stats.rows_copied) == (
        1,
        2,
        0,
        1,
    )
    assert stats.to_dict()["rows_replaced"] == 2
    assert "rows_updated=1, rows_replaced=2," in repr(stats)
    got = sorted((r["id"], r["val"]) for r in read_delta(table_path).to_pylist())
    assert got == [(1, "x1"), (2, "y2"), (2, "y2")]


def test_delete_column_removes_keys_under_the_cursor_rule(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("c", pa.int64()), ("gone", pa.bool_())])
    table = DeltaLiteTable.create(str(tmp_path / "t"), schema)
    table.append(pa.table({"id": [1, 2, 3], "c": [5, 5, 5], "gone": [False, False, None]}))
    stats = table.upsert(
        pa.table({"id": [1, 2, 4], "c": [6, 4, 1], "gone": [True, True, True]}, schema=schema),
        "id",
        cursor_field="c",
        delete_column="gone",
    )
    # 1: newer delete removes it; 2: stale delete loses; 4: no key to remove, not stored
    assert (stats.rows_deleted, stats.rows_dropped_by_cursor, stats.rows_inserted) == (1, 1, 0)
    assert stats.to_dict()["rows_deleted"] == 1
    got = sorted((r["id"], r["c"], r["gone"]) for r in read_delta(str(tmp_path / "t")).to_pylist())
    assert got == [(2, 5, False), (3, 5, None)]
    with pytest.raises(
        deltalite.DeltaLiteSchemaMismatchError, match='delete column "nope" is not in the table'
    ):
        table.upsert(pa.table({"id": [1], "c": [9], "gone": [True]}), "id", delete_column="nope")


def test_concurrent_threads_upsert(tmp_path):
    """Threads on their own handles (GIL released) writing disjoint partitions all land."""
    path = str(tmp_path / "t")
    make(path)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            handle = DeltaLiteTable.open(path)
            for j in range(3):
                handle.upsert(
                    batch(range(n * 100 + j * 10, n * 100 + j * 10 + 10), day=f"d{n}"),
                    primary_keys=["id"],
                    partition_key="day",
                )
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert read_delta(path).num_rows == 4 * 30
    assert DeltaLiteTable.open(path).version() == 12


def test_shared_handle_across_threads(table_path):
    """One handle used by many threads: calls serialize, every key lands exactly once."""
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    threads = [
        threading.Thread(
            target=table.upsert,
            args=(batch(range(i * 5, i * 5 + 5)),),
            kwargs={"primary_keys": "id"},
        )
        for i in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = sorted(r["id"] for r in read_delta(table_path).to_pylist())
    assert ids == list(range(30))


def test_gil_released_during_upsert(table_path):
    """Python code keeps running in other threads while the engine works."""
    make(table_path)
    table = DeltaLiteTable.open(table_path)
    data = batch(range(300_000))
    ticks = 0
    worker = threading.Thread(target=table.upsert, args=(data,), kwargs={"primary_keys": "id"})
    worker.start()
    while worker.is_alive():
        ticks += 1
    worker.join()
    assert table.version() == 1
    # With the GIL held for the whole call this loop could not have advanced meaningfully.
    assert ticks > 1000


def test_two_partition_columns_and_null_partition(table_path):
    schema = pa.schema(
        [("id", pa.int64()), ("p1", pa.string()), ("p2", pa.int32()), ("v", pa.int64())]
    )
    table = DeltaLiteTable.create(table_path, schema, partition_by=["p1", "p2"])
    first = pa.table(
        {"id": [1, 2, 3], "p1": ["a", None, "b"], "p2": [1, 2, None], "v": [1, 1, 1]},
        schema=schema,
    )
    assert table.upsert(first, "id", ["p1", "p2"]).partitions_touched == 3
    second = pa.table(
        {"id": [1, 2, 3, 3], "p1": ["a", None, "b", "c"], "p2": [1, 2, None, 9], "v": [2] * 4},
        schema=schema,
    )
    stats = table.upsert(second, "id", ["p1", "p2"])
    # Identity is the key within its partition, NULL partition values included.
    assert (stats.rows_updated, stats.rows_inserted) == (3, 1)
    got = sorted((r["id"], r["p1"], r["p2"], r["v"]) for r in read_delta(table_path).to_pylist())
    assert got == [(1, "a", 1, 2), (2, None, 2, 2), (3, "b", None, 2), (3, "c", 9, 2)]
    assert table.partition_columns() == ["p1", "p2"]
