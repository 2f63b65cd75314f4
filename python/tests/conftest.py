"""Shared fixtures and helpers for the deltalite Python tests."""

from __future__ import annotations

import decimal
import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, settings

# CI keeps the property suites bounded; `HYPOTHESIS_PROFILE=long` is for deeper runs.
_COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("ci", max_examples=25, **_COMMON)
settings.register_profile("dev", max_examples=10, **_COMMON)
settings.register_profile("long", max_examples=300, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    return str(tmp_path / "table")


def normalize(value: Any) -> Any:
    """A comparable, hashable form of a value: floats by bit pattern (so NaN == NaN and
    -0.0 != 0.0), nested values recursively."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("float", "nan")
        return ("float", value.hex())
    if isinstance(value, decimal.Decimal):
        return ("decimal", str(value))
    if isinstance(value, dict):
        return tuple(sorted((k, normalize(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(normalize(v) for v in value)
    return value


def rows_of(table: pa.Table) -> list[tuple]:
    """Rows as sorted tuples of normalized values, columns in name order."""
    names = sorted(table.column_names)
    table = table.select(names)
    rows = [tuple(normalize(r[n]) for n in names) for r in table.to_pylist()]
    return sorted(rows, key=repr)


def read_delta(path: str) -> pa.Table:
    """The table's logical contents as read by the deltalake package."""
    table = DeltaTable(path).to_pyarrow_table()
    # Partition columns may come back dictionary-encoded; compare plain values.
    columns = []
    for col in table.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        columns.append(col)
    return pa.table(columns, names=table.column_names)
