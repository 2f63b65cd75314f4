"""Interop with the deltalake and polars packages, both directions."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
from conftest import read_delta, rows_of
from deltalake import DeltaTable, write_deltalake

from deltalite import DeltaLiteTable

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.float64())])


def rows(ids, p, v) -> pa.Table:
    return pa.table(
        {"id": list(ids), "p": [p] * len(ids), "v": [float(v)] * len(ids)}, schema=SCHEMA
    )


def test_our_tables_read_by_deltalake_and_polars(table_path):
    table = DeltaLiteTable.create(table_path, SCHEMA, partition_by="p")
    table.upsert(pa.concat_tables([rows(range(10), "a", 1), rows(range(5), "b", 1)]), "id", "p")
    table.upsert(rows(range(5, 15), "a", 2), "id", "p")
    expected = {(i, "a"): (2.0 if i >= 5 else 1.0) for i in range(15)}
    expected.update({(i, "b"): 1.0 for i in range(5)})

    by_deltalake = {(r["id"], r["p"]): r["v"] for r in read_delta(table_path).to_pylist()}
    assert by_deltalake == expected
    frame = pl.read_delta(table_path)
    assert {(r["id"], r["p"]): r["v"] for r in frame.iter_rows(named=True)} == expected
    dt = DeltaTable(table_path)
    assert dt.version() == table.version() == 2
    assert dt.history(1)[0]["operation"] == "MERGE"
    # deltalake can keep writing after us, and we see it.
    write_deltalake(table_path, rows([100], "c", 3), mode="append")
    table.reload()
    assert table.version() == 3
    assert table.upsert(rows([100], "c", 4), "id", "p").rows_updated == 1


def test_upsert_into_deltalake_table_with_checkpoint_and_evolution(table_path):
    for i in range(12):
        write_deltalake(
            table_path, rows([i, i + 100], f"p{i % 3}", i), partition_by=["p"], mode="append"
        )
        if i == 9:
            DeltaTable(table_path).create_checkpoint()
    evolved = rows([200], "p0", 0).append_column("w", pa.array(["new"]))
    write_deltalake(table_path, evolved, mode="append", schema_mode="merge")
    assert "w" in DeltaTable(table_path).schema().to_arrow().names

    table = DeltaLiteTable.open(table_path)
    assert table.version() == DeltaTable(table_path).version()
    assert table.partition_columns() == ["p"]
    assert "w" in table.schema_arrow().names

    update = pa.table(
        {
            "id": pa.array([0, 3, 200, 999], pa.int64()),
            "p": ["p0", "p0", "p0", "p2"],
            "v": [-1.0, -3.0, -2.0, 9.0],
            "w": ["a", "b", "c", "d"],
        }
    )
    stats = table.upsert(update, primary_keys="id", partition_key="p")
    assert (stats.rows_updated, stats.rows_inserted) == (3, 1)
    assert stats.partitions_touched == 2

    expected = {}
    for i in range(12):
        for k in (i, i + 100):
            expected[(k, f"p{i % 3}")] = (float(i), None)
    expected[(200, "p0")] = (0.0, "new")
    for r in update.to_pylist():
        expected[(r["id"], r["p"])] = (r["v"], r["w"])
    got = {(r["id"], r["p"]): (r["v"], r["w"]) for r in read_delta(table_path).to_pylist()}
    assert got == expected
    assert rows_of(pl.read_delta(table_path).to_arrow()) == rows_of(read_delta(table_path))
