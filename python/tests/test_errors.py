"""Every exception class, raised by a real case."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import read_delta
from deltalake import DeltaTable, write_deltalake

from deltalite import (
    DeltaLiteCommitConflictError,
    DeltaLiteError,
    DeltaLiteSchemaMismatchError,
    DeltaLiteSourceTooLargeError,
    DeltaLiteTable,
    DeltaLiteTableNotFoundError,
    DeltaLiteTransientError,
    DeltaLiteUnsupportedTableError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int32())])


def rows(ids, p="a", v=0) -> pa.Table:
    return pa.table({"id": list(ids), "p": [p] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def table(table_path) -> DeltaLiteTable:
    return DeltaLiteTable.create(table_path, SCHEMA, partition_by="p")


def test_missing_table(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(DeltaLiteTableNotFoundError):
        DeltaLiteTable.open(missing)
    assert DeltaLiteTable.is_deltatable(missing) is False
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(DeltaLiteTableNotFoundError):
        DeltaLiteTable.open(str(tmp_path / "empty_dir"))


def test_unknown_column_is_schema_mismatch(table, table_path):
    data = rows([1]).append_column("extra", pa.array([1]))
    with pytest.raises(DeltaLiteSchemaMismatchError):
        table.upsert(data, primary_keys=["id"])
    assert table.version() == 0 and read_delta(table_path).num_rows == 0


def test_uncastable_value_is_schema_mismatch(table):
    data = pa.table({"id": ["1", "not a number"], "p": ["a", "a"], "v": [1, 2]})
    with pytest.raises(DeltaLiteSchemaMismatchError, match="id"):
        table.upsert(data, primary_keys=["id"])
    overflow = pa.table(
        {"id": pa.array([1], pa.int64()), "p": ["a"], "v": pa.array([2**40], pa.int64())}
    )
    with pytest.raises(DeltaLiteSchemaMismatchError, match="v"):
        table.upsert(overflow, primary_keys=["id"])


def test_missing_key_column_is_schema_mismatch(table):
    with pytest.raises(DeltaLiteError):
        table.upsert(rows([1]).drop_columns(["id"]), primary_keys=["id"])


def test_duplicate_keys_raise_base_error(table, table_path):
    with pytest.raises(DeltaLiteError, match="duplicate") as info:
        table.upsert(rows([1, 2, 1, 1]), primary_keys=["id"])
    assert "2" in str(info.value)  # the count of repeated rows
    assert read_delta(table_path).num_rows == 0
    # ... and NULL keys are never duplicates of each other
    nulls = pa.table({"id": pa.array([None, None], pa.int64()), "p": ["a", "a"], "v": [1, 2]})
    stats = table.upsert(nulls, primary_keys=["id"])
    assert stats.null_pk_rows == 2 and stats.rows_inserted == 2


@pytest.mark.parametrize(
    "config",
    [{"delta.enableChangeDataFeed": "true"}, {"delta.appendOnly": "true"}],
)
def test_unsupported_tables_from_deltalake(table_path, config):
    write_deltalake(table_path, rows([1]), partition_by=["p"], configuration=config)
    table = DeltaLiteTable.open(table_path)
    with pytest.raises(DeltaLiteUnsupportedTableError):
        table.upsert(rows([1, 2], v=5), primary_keys=["id"])
    assert DeltaTable(table_path).version() == 0


def test_oversized_source(table, table_path):
    big = rows(range(10_000))
    with pytest.raises(DeltaLiteSourceTooLargeError):
        table.upsert(big, primary_keys=["id"], max_source_bytes=1024)
    assert read_delta(table_path).num_rows == 0
    # 0 disables the guard
    assert table.upsert(big, primary_keys=["id"], max_source_bytes=0).rows_inserted == 10_000


def test_oversized_stream_stops_reading_early(table):
    pulled = []

    def gen():
        for i in range(1000):
            pulled.append(i)
            yield rows(range(i * 100, i * 100 + 100)).to_batches()[0]

    reader = pa.RecordBatchReader.from_batches(SCHEMA, gen())
    with pytest.raises(DeltaLiteSourceTooLargeError):
        table.upsert(reader, primary_keys=["id"], max_source_bytes=64 * 1024)
    assert len(pulled) < 1000


def test_exhausted_commit_retries(table_path, table):
    table.upsert(rows([1, 2]), primary_keys=["id"])
    stale = DeltaLiteTable.open(table_path)
    also_stale = DeltaLiteTable.open(table_path)
    # A concurrent writer (deltalake) commits to the same partition after both loaded.
    write_deltalake(table_path, rows([3]), mode="append")
    with pytest.raises(DeltaLiteCommitConflictError):
        stale.upsert(rows([1], v=9), primary_keys=["id"], commit_max_retries=0)
    # With retries a stale handle re-plans and wins without losing the other write. (The
    # handle that gave up has reloaded meanwhile, so it would not conflict again.)
    stats = also_stale.upsert(rows([1], v=9), primary_keys=["id"], commit_max_retries=2)
    assert stats.commit_retries >= 1
    got = {r["id"]: r["v"] for r in read_delta(table_path).to_pylist()}
    assert got == {1: 9, 2: 0, 3: 0}


def test_partition_key_mismatch(table):
    with pytest.raises(DeltaLiteError):
        table.upsert(rows([1]), primary_keys=["id"], partition_key="v")


def test_an_unreachable_store_is_a_transient_error():
    # Nothing listens on loopback port 9: the store cannot be reached now, and a retry later
    # may succeed, so the error is retryable, unlike a missing table or bad input.
    unreachable = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "max_retries": "0",
    }
    with pytest.raises(DeltaLiteTransientError, match="error sending request"):
        DeltaLiteTable.open("s3://lake/t", storage_options=unreachable)
    # Losing the commit race for good is retryable too, and still a DeltaLiteError.
    assert issubclass(DeltaLiteCommitConflictError, DeltaLiteTransientError)
    assert issubclass(DeltaLiteTransientError, DeltaLiteError)
