"""Compaction: small files of each partition bin-packed in one OPTIMIZE commit."""

from __future__ import annotations

import shutil

import polars as pl
import pyarrow as pa
from conftest import read_delta, rows_of
from deltalake import DeltaTable, Field

import deltalite
from deltalite import DeltaLiteTable

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def rows(ids, p, v="x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "p": [p] * len(ids), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def files_per_partition(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for uri in DeltaTable(path).file_uris():
        part = uri.split("p=")[1].split("/")[0]
        out[part] = out.get(part, 0) + 1
    return out


def test_compact_bin_packs_each_partition(table_path):
    table = DeltaLiteTable.create(table_path, SCHEMA, partition_by="p")
    for i in range(6):
        table.upsert(rows(range(i * 10, i * 10 + 10), "a"), "id", "p")
        table.upsert(rows(range(i * 10, i * 10 + 10), "b"), "id", "p")
    table.upsert(rows(range(5), "c"), "id", "p")
    assert files_per_partition(table_path) == {"a": 6, "b": 6, "c": 1}
    before = rows_of(read_delta(table_path))
    version = table.version()

    stats = table.compact(primary_keys="id", commit_metadata={"job": "compact"})
    assert isinstance(stats, deltalite.CompactStats)
    assert stats.version == version + 1 == table.version()
    assert (stats.partitions_compacted, stats.files_removed, stats.files_added) == (2, 12, 2)
    assert stats.rows_rewritten == 120
    assert "CompactStats(" in repr(stats)
    assert files_per_partition(table_path) == {"a": 1, "b": 1, "c": 1}
    assert rows_of(read_delta(table_path)) == before
    assert rows_of(pl.read_delta(table_path).to_arrow()) == before
    info = DeltaTable(table_path).history(1)[0]
    assert info["operation"] == "OPTIMIZE"
    assert info.get("job") == "compact"

    # Nothing left to do: no commit.
    assert table.compact().version == stats.version
    # Upserts keep working on compacted files.
    up = table.upsert(rows([3, 999], "a", "new"), "id", "p")
    assert (up.rows_updated, up.rows_inserted) == (1, 1)


def test_compact_respects_target_size_and_schema_evolution(table_path, tmp_path):
    table = DeltaLiteTable.create(table_path, SCHEMA)
    for i in range(4):
        table.upsert(rows(range(i * 1000, i * 1000 + 1000), "a"), "id")
    big = table.upsert(rows(range(10_000, 60_000), "a"), "id")
    assert big.files_added == 1
    # An older file lacks the new column: compaction fills it with NULLs.
    DeltaTable(table_path).alter.add_columns(Field("w", "long", nullable=True))
    table.reload()
    extra = rows([70_000], "a").append_column("w", pa.array([7], pa.int64()))
    table.upsert(extra, "id")
    before = rows_of(read_delta(table_path))
    sizes = sorted(
        DeltaTable(table_path).get_add_actions(flatten=True).column("size_bytes").to_pylist()
    )
    target = sizes[-1]  # the big file is not small; everything else is
    # delta-rs's optimize on a copy: bins are runs of neighbouring files in log order, so
    # the last small file, whose only neighbour is the big one, stays alone (as there).
    copy = str(tmp_path / "copy")
    shutil.copytree(table_path, copy)
    theirs = DeltaTable(copy).optimize.compact(target_size=target)
    stats = table.compact(target_file_size=target)
    assert (stats.files_removed, stats.files_added) == (4, 1)
    assert (stats["numFilesRemoved"], stats["numFilesAdded"]) == (
        theirs["numFilesRemoved"],
        theirs["numFilesAdded"],
    )
    assert stats["totalConsideredFiles"] == theirs["totalConsideredFiles"] == 6
    assert stats["totalFilesSkipped"] == theirs["totalFilesSkipped"] == 2
    assert len(DeltaTable(table_path).file_uris()) == 3
    assert rows_of(read_delta(table_path)) == before
