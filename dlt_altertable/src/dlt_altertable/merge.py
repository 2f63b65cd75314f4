"""Merge validation: which dlt merge configurations the upsert honours."""

from dlt.common.destination.client import PreparedTableSchema
from dlt.common.schema.utils import get_columns_names_with_prop

from dlt_altertable.exceptions import UnsupportedMergeConfiguration

UNSUPPORTED_STRATEGIES = ("delete-insert", "scd2", "insert-only")


def merge_keys(table: PreparedTableSchema) -> tuple[list[str], list[str]]:
    """Validate a merge table and return (primary_key, cursor_fields).

    Raises `UnsupportedMergeConfiguration` (terminal) for anything the upsert cannot honour.
    """
    name = table["name"]
    strategy = table.get("x-merge-strategy")  # type: ignore[misc]
    problems: list[str] = []
    if strategy in UNSUPPORTED_STRATEGIES:
        problems.append(f"merge strategy `{strategy}` is not supported, only `upsert` (or none) is")
    if table.get("parent"):
        problems.append(
            "nested tables cannot be merged; keep `max_table_nesting=0` so nested data"
            " lands as JSON"
        )
    columns = table.get("columns", {})
    if merge_key := get_columns_names_with_prop(table, "merge_key"):
        problems.append(f"`merge_key` {merge_key} is not supported")
    if hard_delete := get_columns_names_with_prop(table, "hard_delete"):
        problems.append(f"`hard_delete` column {hard_delete} is not supported")
    primary_key = get_columns_names_with_prop(table, "primary_key")
    if not primary_key:
        problems.append("a `primary_key` is required")
    cursor: list[str] = []
    for col_name, col in columns.items():
        sort = col.get("dedup_sort")
        if sort is None:
            continue
        if sort == "desc":
            cursor.append(col_name)
        else:
            problems.append(
                f"`dedup_sort: {sort}` on `{col_name}` is not supported, only `desc`"
                " (the greatest value wins)"
            )
    for key in primary_key + cursor:
        if "," in key:
            problems.append(f"column name `{key}` contains a comma")
    if problems:
        raise UnsupportedMergeConfiguration(
            f"altertable cannot merge table `{name}`: " + "; ".join(problems) + "."
        )
    return primary_key, cursor
