"""Schema sync: tables created or evolved through `/query` DDL before their first load in a
package, once per process and package, with their partition hint and their descriptions as
catalog comments."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Optional

import pyarrow as pa
from dlt.common.data_writers.escape import escape_duckdb_literal
from dlt.common.schema import TSchemaTables
from dlt.common.schema.typing import TTableSchema

from dlt_altertable.exceptions import AltertableQueryError
from dlt_altertable.layout import partition_clause
from dlt_altertable.types import arrow_type_for_sql, quote_ident, quote_literal, sql_type

# (server, catalog, schema, load_id, table) already synced by this process
_SYNCED: set[tuple[str, ...]] = set()
# same key -> server columns outside dlt's schema, kept by an overwrite
_SERVER_EXTRA: dict[tuple[str, ...], dict[str, pa.DataType]] = {}
_SYNC_LOCK = threading.Lock()


def forget_synced() -> None:
    """After tables were dropped: sync them again before their next load."""
    with _SYNC_LOCK:
        _SYNCED.clear()


class SchemaSync:
    """Mixin of the job client: create and evolve tables from dlt's schema."""

    @staticmethod
    def typed_columns(table: TTableSchema) -> list[dict[str, Any]]:
        return [c for c in table.get("columns", {}).values() if c.get("data_type")]

    # ----- schema sync -----
    def _existing_columns(self, table_name: str) -> dict[str, str]:
        """Server columns of the table (name -> data type); {} when it does not exist.

        `DESCRIBE` opens this one table; an information_schema query opens every table of
        the catalog on the server (seconds each with a few hundred tables)."""
        try:
            result = self.query(f"DESCRIBE {self.qualified(table_name)}")
        except AltertableQueryError as ex:
            if ex.is_missing_object():
                return {}
            raise
        return {row[0]: row[1] for row in result.rows}

    def _stored_column_comments(self, table_name: str) -> dict[str, Optional[str]]:
        result = self.query(
            "SELECT column_name, column_comment FROM information_schema.columns"
            f" WHERE table_catalog = {quote_literal(str(self.config.catalog))} AND table_schema"
            f" = {quote_literal(self.dataset_name)} AND table_name = {quote_literal(table_name)}"
        )
        return {row[0]: row[1] for row in result.rows}

    def _table_comment(self, table_name: str) -> Optional[str]:
        result = self.query(
            "SELECT table_comment FROM information_schema.tables WHERE table_catalog ="
            f" {quote_literal(str(self.config.catalog))} AND table_schema ="
            f" {quote_literal(self.dataset_name)} AND table_name = {quote_literal(table_name)}"
        )
        return result.rows[0][0] if result.rows else None

    def _marker(self, load_id: str, table_name: str) -> tuple[str, ...]:
        return (
            self.config.base_url,
            str(self.config.catalog),
            self.dataset_name,
            load_id,
            table_name,
        )

    def server_extra_columns(self, load_id: str, table_name: str) -> dict[str, pa.DataType]:
        """Columns of the server table that dlt's schema does not have (seen at sync time)."""
        with _SYNC_LOCK:
            return dict(_SERVER_EXTRA.get(self._marker(load_id, table_name), {}))

    def sync_table(
        self, load_id: str, table: TTableSchema, file_schema: Optional[pa.Schema] = None
    ) -> None:
        """Create or evolve the table before its first load in a package (idempotent DDL),
        then apply its partition hint and publish changed descriptions as comments."""
        table_name = table["name"]
        marker = self._marker(load_id, table_name)
        with _SYNC_LOCK:
            if marker in _SYNCED:
                return
        columns = self.typed_columns(table)
        arrow_types = {}
        if file_schema is not None:
            arrow_types = {f.name: f.type for f in file_schema}
        defs = {
            c["name"]: f"{quote_ident(c['name'])} {sql_type(c, arrow_types.get(c['name']))}"
            for c in columns
        }
        existing = self._existing_columns(table_name)
        qualified = self.qualified(table_name)
        if not existing:
            self.query(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.dataset_name)}")
            self.query(f"CREATE TABLE IF NOT EXISTS {qualified} ({', '.join(defs.values())})")
        else:
            for name, definition in defs.items():
                if name not in existing:
                    self.query(f"ALTER TABLE {qualified} ADD COLUMN IF NOT EXISTS {definition}")
        # re-sent on every load like 0.2.2 does; the server makes no commit when unchanged
        if (clause := partition_clause(table)) is not None:
            self.query(f"ALTER TABLE {qualified} {clause}")
        described = any(c.get("description") for c in table.get("columns", {}).values())
        stored_comments: dict[str, Optional[str]] = {}
        if existing and described:
            stored_comments = self._stored_column_comments(table_name)
        self.apply_descriptions(table, stored_comments, new_table=not existing)
        extra: dict[str, pa.DataType] = {}
        for name, type_name in existing.items():
            if name not in defs and (arrow_type := arrow_type_for_sql(type_name)) is not None:
                extra[name] = arrow_type
        with _SYNC_LOCK:
            _SYNCED.add(marker)
            _SERVER_EXTRA[marker] = extra

    def apply_descriptions(
        self,
        table: TTableSchema,
        stored_comments: Optional[dict[str, Optional[str]]] = None,
        new_table: bool = False,
    ) -> None:
        """dlt descriptions as catalog comments (`COMMENT ON COLUMN|TABLE`), in one script.

        Only descriptions that differ from the stored comment are sent; `stored_comments`
        None means "unknown" (after an overwrite, which drops column comments): every column
        description is sent. The table comment is compared with the stored one unless the
        table is new."""
        qualified = self.qualified(table["name"])
        stored = stored_comments or {}
        statements = [
            f"COMMENT ON COLUMN {qualified}.{quote_ident(name)} IS"
            f" {escape_duckdb_literal(column['description'])};"
            for name, column in table.get("columns", {}).items()
            if column.get("description")
            and (stored_comments is None or column["description"] != stored.get(name))
        ]
        description = table.get("description")
        if description and (new_table or self._table_comment(table["name"]) != description):
            statements.append(
                f"COMMENT ON TABLE {qualified} IS {escape_duckdb_literal(description)};"
            )
        if statements:
            self.query("\n".join(["BEGIN TRANSACTION;", *statements, "COMMIT;"]))

    def update_stored_schema(
        self,
        only_tables: Optional[Iterable[str]] = None,
        expected_update: Optional[TSchemaTables] = None,
        force: bool = False,
    ) -> Optional[TSchemaTables]:
        applied = super().update_stored_schema(only_tables, expected_update, force)
        version_hash = self.schema.stored_version_hash
        if force or self.get_stored_schema_by_hash(version_hash) is None:
            self._store_schema_version()
        return applied
