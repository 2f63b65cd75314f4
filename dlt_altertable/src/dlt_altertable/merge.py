"""Merge: validation, the choice between the two merge paths, and the SQL of the staged one.

Two paths load a `merge` table (strategy `upsert`, or none named):

- **direct**: each load file is one `POST /upsert?primary_key=…&cursor_field=…` (one Delta
  commit per file, the server's streaming upsert). Used for simple merges: a root table
  without a `hard_delete` column, without nested tables, and whose identity partition keys
  (if any) are part of the primary key.
- **staged**: every file of the table chain (root and nested tables) is uploaded to a
  per-load staging schema, and `complete_load` merges it with SQL (`MERGE INTO …`, `DELETE`,
  `INSERT`). Used for everything the upsert cannot express: hard deletes, nested tables
  (children replaced per root key), and tables partitioned by a column outside the key (the
  upsert identifies a row within its partition, a SQL MERGE across the table).

`docs/dlt-destination.md` explains the choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from dlt.common.data_writers.escape import escape_duckdb_literal
from dlt.common.schema.typing import TTableSchema
from dlt.common.schema.utils import (
    get_columns_names_with_prop,
    get_first_column_name_with_prop,
)
from dlt.destinations.sql_jobs import SqlMergeFollowupJob

from dlt_altertable.exceptions import UnsupportedMergeConfiguration
from dlt_altertable.layout import identity_partition_columns
from dlt_altertable.types import quote_ident

UNSUPPORTED_STRATEGIES = ("delete-insert", "scd2", "insert-only")
# the staged root table's order column: (staging ordinal of the file << 32) + row number
SEQ_COLUMN = "_dlt_altertable_seq"


@dataclass
class MergeSpec:
    """A validated merge table: its keys, cursor and hard-delete column."""

    primary_key: list[str]
    cursor: list[str]
    hard_delete: Optional[str] = None
    problems: list[str] = field(default_factory=list)


def merge_spec(table: TTableSchema, *, staged: bool) -> MergeSpec:
    """Validate a merge root table and return its keys.

    Raises `UnsupportedMergeConfiguration` (terminal) for what neither path can honour:
    strategies other than `upsert`, `merge_key`, no `primary_key`, `dedup_sort: asc`;
    on the direct path also key or cursor names with commas (the `/upsert` parameters are
    comma lists).
    """
    name = table["name"]
    strategy = table.get("x-merge-strategy")  # type: ignore[misc]
    problems: list[str] = []
    if strategy in UNSUPPORTED_STRATEGIES:
        problems.append(f"merge strategy `{strategy}` is not supported, only `upsert` (or none) is")
    columns = table.get("columns", {})
    if merge_key := get_columns_names_with_prop(table, "merge_key"):
        problems.append(f"`merge_key` {merge_key} is not supported")
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
    hard_delete = get_first_column_name_with_prop(table, "hard_delete")
    if not staged:
        for key in primary_key + cursor + ([hard_delete] if hard_delete else []):
            if "," in key:
                problems.append(f"column name `{key}` contains a comma")
    if problems:
        raise UnsupportedMergeConfiguration(
            f"altertable cannot merge table `{name}`: " + "; ".join(problems) + "."
        )
    return MergeSpec(
        primary_key=primary_key,
        cursor=cursor,
        hard_delete=hard_delete,
    )


def staged_merge_reasons(root: TTableSchema, has_nested_tables: bool) -> list[str]:
    """Why a merge root table needs the staged SQL path; empty when `/upsert` is equivalent."""
    reasons = []
    # A hard_delete column is not a reason: `/upsert?delete_column=` applies dlt's rule.
    if has_nested_tables:
        reasons.append("nested tables")
    primary_key = set(get_columns_names_with_prop(root, "primary_key"))
    if outside := [c for c in identity_partition_columns(root) if c not in primary_key]:
        reasons.append(f"partitioned by {outside} outside the primary key")
    return reasons


# ----- SQL of the staged path -----


@dataclass
class StagedTable:
    """One table of a staged chain: the dlt table and its staged file tables (qualified)."""

    table: TTableSchema
    target: str
    staging: str
    files: list[str]

    @property
    def name(self) -> str:
        return self.table["name"]

    def column_names(self) -> list[str]:
        return [n for n, c in self.table.get("columns", {}).items() if c.get("data_type")]

    def source_sql(self, columns: Sequence[str]) -> str:
        """All staged rows of this table: its files combined by name, or no rows."""
        if not self.files:
            return f"SELECT {', '.join(map(quote_ident, columns))} FROM {self.target} WHERE FALSE"
        return " UNION ALL BY NAME ".join(f"SELECT * FROM {f}" for f in self.files)


def _key_list(columns: Sequence[str], alias: str = "") -> str:
    return ", ".join(f"{alias}{quote_ident(c)}" for c in columns)


def _incoming_is_newer(cursor: Sequence[str]) -> str:
    """`s` beats `d` position by position: greater, or non-NULL against NULL (the upsert
    contract's strictly-newer rule; an equal cursor does not overwrite)."""
    terms = []
    for i, column in enumerate(cursor):
        c = quote_ident(column)
        greater = f"(s.{c} > d.{c} OR (d.{c} IS NULL AND s.{c} IS NOT NULL))"
        equal_before = [
            f"(s.{quote_ident(p)} IS NOT DISTINCT FROM d.{quote_ident(p)})" for p in cursor[:i]
        ]
        terms.append(" AND ".join([*equal_before, greater]) if equal_before else greater)
    return "(" + " OR ".join(f"({t})" for t in terms) + ")"


def hard_delete_condition(table: TTableSchema, alias: str = "") -> Optional[str]:
    """dlt's condition for a row marked deleted (`= True` for bool columns, else
    `IS NOT NULL`), or None without a `hard_delete` column."""
    _, cond = SqlMergeFollowupJob._get_hard_delete_col_and_cond(
        table,  # type: ignore[arg-type]
        quote_ident,
        escape_duckdb_literal,
        alias=alias,
    )
    return cond


def duplicate_check_sql(root: StagedTable, spec: MergeSpec) -> str:
    """Rows and distinct keys among the staged root rows (a nested chain needs one row per
    key: the nested rows of two versions of one key cannot be told apart)."""
    return (
        f"SELECT count(*) AS n, count(DISTINCT row({_key_list(spec.primary_key)})) AS k"
        f" FROM ({root.source_sql(root.column_names())}) AS staged"
    )


def merge_statements(
    chain: Sequence[StagedTable],
    spec: MergeSpec,
    load_id: str,
    row_key: Optional[str],
    root_keys: dict[str, str],
) -> list[str]:
    """The statements that merge a staged chain into its targets.

    Root: the newest staged row per key (cursor `DESC NULLS LAST`, then the later row),
    minus rows not strictly newer than the stored row; one `MERGE` deletes the rows marked
    deleted, updates the matched and inserts the new (not those arriving deleted).
    Nested tables (`row_key` is the root's `_dlt_id`, `root_keys` each nested table's root
    key column): the nested rows of every merged or deleted root key are deleted, then the
    staged nested rows of the surviving roots inserted; dlt's nested row keys derive from the
    root's key hash, so this equals dlt's `MERGE … ON _dlt_id` plus its two deletes.

    Every statement commits on its own on the server, so the script is written to be re-run
    after a partial failure: a stored row written by this same load (`_dlt_load_id`) does not
    make its staged row stale, so a re-run applies the same changes again.
    """
    root = chain[0]
    columns = root.column_names()
    pk = _key_list(spec.primary_key)
    order = [f"{quote_ident(c)} DESC NULLS LAST" for c in spec.cursor]
    order.append(f"{quote_ident(SEQ_COLUMN)} DESC")
    statements = [
        f"CREATE OR REPLACE TABLE {root.staging} AS SELECT * FROM ({root.source_sql(columns)})"
        f" AS staged QUALIFY row_number() OVER (PARTITION BY {pk} ORDER BY {', '.join(order)})"
        " = 1;"
    ]
    if spec.cursor:
        match = " AND ".join(f"s.{quote_ident(k)} = d.{quote_ident(k)}" for k in spec.primary_key)
        same_load = ""
        if "_dlt_load_id" in columns:
            # parenthesized: the server binds `IS DISTINCT FROM` looser than `AND`
            same_load = f' AND (d."_dlt_load_id" IS DISTINCT FROM {escape_duckdb_literal(load_id)})'
        statements.append(
            f"DELETE FROM {root.staging} AS s WHERE EXISTS (SELECT 1 FROM {root.target} AS d"
            f" WHERE {match}{same_load} AND NOT ({_incoming_is_newer(spec.cursor)} IS TRUE));"
        )
    deleted = hard_delete_condition(root.table)
    deleted_s = hard_delete_condition(root.table, alias="s.")
    if row_key is not None:
        rk = quote_ident(row_key)
        for nested in chain[1:]:
            nk = quote_ident(root_keys[nested.name])
            statements.append(
                f"DELETE FROM {nested.target} WHERE {nk} IN (SELECT {rk} FROM {root.target}"
                f" WHERE ({pk}) IN (SELECT {pk} FROM {root.staging})) OR {nk} IN"
                f" (SELECT {rk} FROM {root.staging});"
            )
    update = ", ".join(f"{quote_ident(c)} = s.{quote_ident(c)}" for c in columns)
    insert_cols = _key_list(columns)
    insert_vals = _key_list(columns, "s.")
    on = " AND ".join(f"d.{quote_ident(k)} = s.{quote_ident(k)}" for k in spec.primary_key)
    clauses = [f"MERGE INTO {root.target} AS d USING {root.staging} AS s ON {on}"]
    if deleted_s:
        clauses.append(f"WHEN MATCHED AND ({deleted_s}) IS TRUE THEN DELETE")
    clauses.append(f"WHEN MATCHED THEN UPDATE SET {update}")
    not_matched = "WHEN NOT MATCHED"
    if deleted_s:
        not_matched += f" AND ({deleted_s}) IS NOT TRUE"
    clauses.append(f"{not_matched} THEN INSERT ({insert_cols}) VALUES ({insert_vals});")
    statements.append(" ".join(clauses))
    if row_key is not None:
        rk = quote_ident(row_key)
        surviving = f"SELECT {rk} FROM {root.staging}"
        if deleted:
            surviving += f" WHERE ({deleted}) IS NOT TRUE"
        for nested in chain[1:]:
            if not nested.files:
                continue
            nk = quote_ident(root_keys[nested.name])
            nested_cols = nested.column_names()
            cols = _key_list(nested_cols)
            statements.append(
                f"INSERT INTO {nested.target} ({cols}) SELECT {cols} FROM"
                f" ({nested.source_sql(nested_cols)}) AS staged WHERE {nk} IN ({surviving});"
            )
    return statements


def root_key_columns(chain: Sequence[TTableSchema]) -> tuple[str, dict[str, str]]:
    """The root's row key (`_dlt_id`) and each nested table's root key column
    (`_dlt_root_id`, or `_dlt_parent_id` one level down), as dlt's SQL merge finds them."""
    tables: Any = chain
    row_key = SqlMergeFollowupJob.get_row_key_col(tables, tables[0], "", "")
    root_keys = {
        t["name"]: SqlMergeFollowupJob.get_root_key_col(tables, t, "", "") for t in chain[1:]
    }
    return row_key, root_keys
