"""Cursor, duplicate and omitted-column rules against a plain-Python model of the
upsert contract (/work/shared/spec/upsert-contract.md)."""

from __future__ import annotations

import tempfile

import pyarrow as pa
import pytest
from conftest import read_delta, rows_of
from hypothesis import given
from hypothesis import strategies as st

from deltalite import DeltaLiteError, DeltaLiteTable

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("c1", pa.int64()),
        ("c2", pa.int64()),
        ("a", pa.int64()),
        ("b", pa.string()),
    ]
)
OPTIONAL = ["a", "b"]


def cursor_rank(row: dict, cursor: list[str]) -> tuple:
    # NULL ranks lowest at every position.
    return tuple((0,) if row[c] is None else (1, row[c]) for c in cursor)


class Model:
    """The contract, row by row."""

    def __init__(self, partitioned: bool) -> None:
        self.partitioned = partitioned
        self.keyed: dict[tuple, dict] = {}
        self.null_keyed: list[dict] = []

    def identity(self, row: dict) -> tuple:
        return (row["id"], row["p"] if self.partitioned else None)

    def apply(self, batch: list[dict], carried: list[str], cursor, on_duplicate, omitted):
        """Returns (updated, inserted, dropped, duplicates) or raises ValueError."""
        full = [{c: (r[c] if c in carried else None) for c in SCHEMA.names} for r in batch]
        winners: dict[tuple, dict] = {}
        order: list[tuple] = []
        duplicates = 0
        inserted = updated = dropped = 0
        for row in full:
            if row["id"] is None:
                self.null_keyed.append(row)
                inserted += 1
                continue
            ident = self.identity(row)
            if ident not in winners:
                winners[ident] = row
                order.append(ident)
                continue
            duplicates += 1
            if not cursor and on_duplicate == "error":
                raise ValueError("duplicate")
            if not cursor or cursor_rank(row, cursor) >= cursor_rank(winners[ident], cursor):
                winners[ident] = row
        for ident in order:
            row = winners[ident]
            stored = self.keyed.get(ident)
            if stored is None:
                self.keyed[ident] = row
                inserted += 1
                continue
            if cursor and not cursor_rank(row, cursor) > cursor_rank(stored, cursor):
                dropped += 1
                continue
            updated += 1
            if omitted == "keep":
                self.keyed[ident] = {**stored, **{c: row[c] for c in carried}}
            else:
                self.keyed[ident] = row
        return updated, inserted, dropped, duplicates

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(list(self.keyed.values()) + self.null_keyed, schema=SCHEMA)


small_int = st.one_of(st.none(), st.integers(0, 3))
row_strategy = st.fixed_dictionaries(
    {
        "id": st.one_of(st.none(), st.integers(0, 6)) | st.integers(0, 6),
        "p": st.sampled_from(["x", "y"]),
        "c1": small_int,
        "c2": small_int,
        "a": st.integers(-5, 5),
        "b": st.text(max_size=3),
    }
)
call_strategy = st.fixed_dictionaries(
    {
        "rows": st.lists(row_strategy, min_size=1, max_size=12),
        "cursor": st.sampled_from([[], ["c1"], ["c1", "c2"]]),
        "on_duplicate": st.sampled_from(["error", "last"]),
        "omitted": st.sampled_from(["null", "keep"]),
        "drop": st.sets(st.sampled_from(OPTIONAL)),
    }
)


@given(partitioned=st.booleans(), calls=st.lists(call_strategy, min_size=1, max_size=5))
def test_contract_matches_model(partitioned, calls):
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/t"
        table = DeltaLiteTable.create(path, SCHEMA, partition_by="p" if partitioned else None)
        model = Model(partitioned)
        for call in calls:
            carried = [c for c in SCHEMA.names if c not in call["drop"]]
            data = pa.Table.from_pylist(
                [{c: r[c] for c in carried} for r in call["rows"]],
                schema=pa.schema([SCHEMA.field(c) for c in carried]),
            )
            kwargs = {
                "primary_keys": ["id"],
                "partition_key": "p" if partitioned else None,
                "cursor_field": call["cursor"] or None,
                "on_duplicate": call["on_duplicate"],
                "omitted_columns": call["omitted"],
            }
            before = model.table()
            snapshot = (dict(model.keyed), list(model.null_keyed))
            try:
                expected = model.apply(
                    call["rows"], carried, call["cursor"], call["on_duplicate"], call["omitted"]
                )
            except ValueError:
                model.keyed, model.null_keyed = snapshot
                with pytest.raises(DeltaLiteError, match="duplicate"):
                    table.upsert(data, **kwargs)
                assert rows_of(read_delta(path)) == rows_of(before)
                continue
            stats = table.upsert(data, **kwargs)
            updated, inserted, dropped, duplicates = expected
            assert stats.rows_inserted == inserted
            assert stats.rows_dropped_by_cursor == dropped
            assert stats.duplicates_resolved == duplicates
            assert stats.null_pk_rows == sum(r["id"] is None for r in call["rows"])
            assert (
                stats.rows_updated + stats.rows_inserted + stats.rows_dropped_by_cursor
                == stats.source_rows - stats.duplicates_resolved
            )
            assert stats.rows_updated == updated
            assert rows_of(read_delta(path)) == rows_of(model.table())


def test_cursor_examples_from_contract(table_path):
    schema = pa.schema([("id", pa.int64()), ("c1", pa.int64()), ("c2", pa.int64())])
    table = DeltaLiteTable.create(table_path, schema)

    def up(c1, c2):
        data = pa.table({"id": [1], "c1": [c1], "c2": [c2]}, schema=schema)
        return table.upsert(data, primary_keys="id", cursor_field=["c1", "c2"])

    assert up(None, 1).rows_inserted == 1
    assert up(None, 2).rows_updated == 1  # (NULL, 2) beats (NULL, 1)
    assert up(None, 2).rows_dropped_by_cursor == 1  # equal does not overwrite
    assert up(5, None).rows_updated == 1  # non-NULL beats NULL
    assert up(None, 9).rows_dropped_by_cursor == 1  # NULL never beats non-NULL
    assert read_delta(table_path).to_pylist() == [{"id": 1, "c1": 5, "c2": None}]


def test_keep_with_key_only_batch(table_path):
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = DeltaLiteTable.create(table_path, schema)
    table.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema), primary_keys="id")
    stats = table.upsert(
        pa.table({"id": pa.array([2, 3], pa.int64())}), primary_keys="id", omitted_columns="keep"
    )
    assert stats.rows_inserted == 1
    got = sorted(read_delta(table_path).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": None}]
