"""Partition hints: the `x-altertable-partition` table hint (set by `altertable_adapter`) and
dlt's `partition: true` column hints, sent as `ALTER TABLE … SET PARTITIONED BY (…)`.

Same hint format, validation and SQL as dlt-altertable 0.2.2 (`layout.py`), so a pipeline
written for it loads unchanged. Differences: a `replace` table may be partitioned (the
server keeps a table's partitioning across `/upload?mode=overwrite`), and dlt's plain
`sort` column hints are ignored rather than refused (the server has no sort order to set).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Optional, TypedDict, TypeGuard, get_args

from dlt.common.data_writers.escape import escape_postgres_identifier
from dlt.common.schema.typing import TTableSchema

from dlt_altertable.exceptions import InvalidLayoutHint

PartitionTransform = Literal["identity", "year", "month", "day", "hour", "bucket"]

PARTITION_HINT: str = "x-altertable-partition"
SORT_HINT: str = "x-altertable-sort"
MAX_SIGNED_INT32 = 2**31 - 1


class PartitionKey(TypedDict):
    column: str
    transform: PartitionTransform
    buckets: NotRequired[int]


def is_partition_transform(value: object) -> TypeGuard[PartitionTransform]:
    return isinstance(value, str) and value in get_args(PartitionTransform)


def partition_keys(keys: object) -> list[PartitionKey]:
    """Validate and normalise a partition hint: a list of column names or
    `{"column", "transform", "buckets"}` entries."""
    if not isinstance(keys, list):
        raise InvalidLayoutHint("Altertable partition hints must be a list.")
    normalized: list[PartitionKey] = []
    for key in keys:
        entry = {"column": key} if isinstance(key, str) else key
        if not isinstance(entry, dict) or set(entry) - {"column", "transform", "buckets"}:
            raise InvalidLayoutHint(f"Invalid Altertable partition key: {key!r}.")
        column = entry.get("column")
        if not isinstance(column, str) or not column or "\x00" in column:
            raise InvalidLayoutHint(f"Invalid Altertable layout column: {column!r}.")
        transform = entry.get("transform", "identity")
        if not is_partition_transform(transform):
            raise InvalidLayoutHint(f"Unsupported partition transform: {transform!r}.")
        item: PartitionKey = {"column": column, "transform": transform}
        buckets = entry.get("buckets")
        if transform == "bucket":
            if type(buckets) is not int or not 0 < buckets <= MAX_SIGNED_INT32:
                raise InvalidLayoutHint(
                    f"Bucket count must be a signed 32-bit integer in 1..{MAX_SIGNED_INT32}."
                )
            item["buckets"] = buckets
        elif "buckets" in entry:
            raise InvalidLayoutHint("Only bucket transforms accept a bucket count.")
        if item in normalized:
            raise InvalidLayoutHint(f"Duplicate Altertable partition key: {key!r}.")
        normalized.append(item)
    return normalized


def table_partition_keys(table: TTableSchema) -> Optional[list[PartitionKey]]:
    """The table's partition keys: the `x-altertable-partition` hint, else the columns with
    `partition: true` in column order; None when the table has no partition hint at all (its
    partitioning is then left as it is), `[]` to reset it."""
    if SORT_HINT in table:
        raise NotImplementedError("Sort hints are unsupported.")
    columns = table.get("columns", {})
    if PARTITION_HINT in table:
        return partition_keys(table.get(PARTITION_HINT))  # type: ignore[arg-type]
    if any("partition" in column for column in columns.values()):
        for column in columns.values():
            if "partition" in column and type(column["partition"]) is not bool:
                raise InvalidLayoutHint("Standard partition column hints must be bool.")
        return partition_keys([name for name, column in columns.items() if column.get("partition")])
    return None


def partition_expressions(table: TTableSchema) -> Optional[list[str]]:
    """SQL expressions of the table's partition keys (validated against its columns), or
    None when the table has no partition hint."""
    keys = table_partition_keys(table)
    if keys is None:
        return None
    return [_partition_expression(table, key) for key in keys]


def identity_partition_columns(table: TTableSchema) -> list[str]:
    """Columns that become real Delta partition columns on the server (identity keys)."""
    return [
        key["column"] for key in table_partition_keys(table) or [] if key["transform"] == "identity"
    ]


def partition_clause(table: TTableSchema) -> Optional[str]:
    """`SET PARTITIONED BY (…)` / `RESET PARTITIONED BY`, or None without a partition hint."""
    expressions = partition_expressions(table)
    if expressions is None:
        return None
    if not expressions:
        return "RESET PARTITIONED BY"
    return f"SET PARTITIONED BY ({', '.join(expressions)})"


def _partition_expression(table: TTableSchema, key: PartitionKey) -> str:
    name = key["column"]
    columns: dict[str, Any] = table.get("columns", {})  # type: ignore[assignment]
    if name not in columns:
        raise InvalidLayoutHint(f"Table {table['name']}: layout column {name!r} does not exist.")
    column = escape_postgres_identifier(name)
    transform = key["transform"]
    data_type = columns[name].get("data_type")
    if transform in ("year", "month", "day", "hour") and (
        data_type not in ("date", "timestamp") or (transform == "hour" and data_type == "date")
    ):
        raise InvalidLayoutHint(
            f"Table {table['name']}: {transform} cannot partition {name!r} ({data_type})."
        )
    if transform == "identity":
        return column
    if transform == "bucket":
        return f"bucket({key['buckets']}, {column})"
    return f"{transform}({column})"
