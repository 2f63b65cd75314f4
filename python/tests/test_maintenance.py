"""Time travel, vacuum and path URIs of `DeltaLiteTable`, checked against delta-rs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import read_delta, rows_of
from deltalake import DeltaTable

from deltalite import DeltaLiteTable

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def batch(ids: list[int], v: str) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def three_versions(path: Path) -> DeltaLiteTable:
    t = DeltaLiteTable.create(path, SCHEMA)
    t.upsert(batch([1, 2], "a"), "id")
    t.upsert(batch([2, 3], "b"), "id")
    return t


def test_open_at_a_version_reads_what_delta_rs_reads_there(tmp_path):
    path = tmp_path / "t"
    three_versions(path)
    for v in range(3):
        old = DeltaLiteTable.open(path, version=v)
        assert old.version() == v
        assert sorted(old.file_uris()) == sorted(DeltaTable(str(path), version=v).file_uris())
    with pytest.raises(ValueError, match="version 7 does not exist: the latest is 2"):
        DeltaLiteTable.open(path, version=7)
    # A handle at an old version still writes on top of the latest.
    old = DeltaLiteTable.open(str(path), version=1)
    stats = old.upsert(batch([4], "c"), "id")
    assert stats.version == 3
    assert rows_of(read_delta(str(path))) == [(1, "a"), (2, "b"), (3, "b"), (4, "c")]


def test_paths_are_accepted_wherever_a_uri_is(tmp_path):
    path = tmp_path / "p"
    assert DeltaLiteTable.table_exists(path) is False
    assert DeltaLiteTable.is_deltatable(path) is False
    t = DeltaLiteTable.create(path, SCHEMA)
    assert t.uri == str(path)
    assert DeltaLiteTable.table_exists(path) is True
    assert DeltaLiteTable.is_deltatable(path) is True
    assert DeltaLiteTable.open(path).version() == 0
    with pytest.raises(TypeError, match="uri must be a str or a path, not int"):
        DeltaLiteTable.open(5)


def test_vacuum_keeps_the_retention_and_deletes_only_unread_files(tmp_path):
    path = tmp_path / "vac"
    t = three_versions(path)
    t.compact()
    orphan = path / "part-orphan.parquet"
    orphan.write_bytes(b"left by a write that never committed")
    two_hours_ago = time.time() - 2 * 3600
    os.utime(orphan, (two_hours_ago, two_hours_ago))
    assert t.vacuum() == []
    with pytest.raises(ValueError) as e:
        t.vacuum(retention_hours=1)
    assert str(e.value) == (
        "a retention of 1 hours is below the table's delta.deletedFileRetentionDuration (168 "
        "hours): files younger than that may still be read by older versions or by writes "
        "in flight; pass enforce_retention_duration=False if you mean it"
    )
    with pytest.raises(ValueError, match="retention_hours must be a non-negative number"):
        t.vacuum(retention_hours=-1)
    # One hour: the orphan goes, the files compaction removed a moment ago stay.
    listed = t.vacuum(retention_hours=1, enforce_retention_duration=False)
    assert listed == ["part-orphan.parquet"] and orphan.exists()
    assert t.vacuum(retention_hours=1, dry_run=False, enforce_retention_duration=False) == listed
    assert not orphan.exists()
    live = {Path(u).name for u in DeltaTable(str(path)).file_uris()}
    removed = t.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert removed and not (set(removed) & live)
    assert t.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False) == removed
    assert sorted(p.name for p in path.glob("*.parquet")) == sorted(live)
    assert rows_of(read_delta(str(path))) == [(1, "a"), (2, "b"), (3, "b")]
