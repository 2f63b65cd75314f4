"""State sync: dlt's bookkeeping rows (schema versions, loads) written through `/upload`,
and pipeline state and schemas restored through `/query`, so a fresh runner resumes where
the last one stopped."""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq
from dlt.common.destination.client import StateInfo, StorageSchemaInfo
from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.json import json
from dlt.common.libs.pyarrow import get_py_arrow_datatype
from dlt.common.schema.typing import C_DLT_LOAD_ID

from dlt_altertable.exceptions import AltertableQueryError
from dlt_altertable.http import with_retries
from dlt_altertable.load_job import idempotency_key
from dlt_altertable.types import quote_ident, quote_literal


class StateSync:
    """Mixin of the job client: dlt's bookkeeping tables and state restore."""

    # ----- dlt bookkeeping rows -----
    def _write_rows(self, table_name: str, rows: list[dict[str, Any]], key: str) -> None:
        table = self.schema.tables[table_name]
        columns = self.typed_columns(table)
        fields = [
            pa.field(c["name"], get_py_arrow_datatype(c, self.capabilities, "UTC")) for c in columns
        ]
        arrow_schema = pa.schema(fields)
        data = pa.Table.from_pylist(rows, schema=arrow_schema)
        fd, path = tempfile.mkstemp(prefix="dlt-altertable-", suffix=".parquet")
        os.close(fd)
        try:
            pq.write_table(data, path)
            marker_id = "bookkeeping-" + key

            def _do() -> None:
                self.sync_table(marker_id, table, arrow_schema)
                params = self.table_params(table_name)
                params["mode"] = "append"
                self.http.post_file("/upload", params, path, key)

            with_retries(_do)
        finally:
            os.unlink(path)

    def _store_schema_version(self) -> None:
        n = self.schema.naming.normalize_identifier
        schema = self.schema
        row = {
            n("version"): schema.version,
            n("engine_version"): schema.ENGINE_VERSION,
            n("inserted_at"): datetime.now(UTC),
            n("schema_name"): schema.name,
            n("version_hash"): schema.stored_version_hash,
            n("schema"): json.dumps(schema.to_dict()),
        }
        key = idempotency_key("version", schema.name, schema.stored_version_hash)
        self._write_rows(schema.version_table_name, [row], key)

    def complete_load(self, load_id: str) -> None:
        n = self.schema.naming.normalize_identifier
        row = {
            n("load_id"): load_id,
            n("schema_name"): self.schema.name,
            n("status"): 0,
            n("inserted_at"): datetime.now(UTC),
            n("schema_version_hash"): self.schema.version_hash,
        }
        key = idempotency_key("loads", load_id, self.schema.name)
        self._write_rows(self.schema.loads_table_name, [row], key)

    # ----- state sync -----
    def _select(self, statement: str) -> list[dict[str, Any]]:
        try:
            return with_retries(lambda: self.query(statement)).dicts()
        except AltertableQueryError as ex:
            if ex.is_missing_object():
                raise DestinationUndefinedEntity(ex) from ex
            raise

    def _schema_info(self, where: str) -> Optional[StorageSchemaInfo]:
        n = self.schema.naming.normalize_identifier
        cols = ", ".join(
            quote_ident(n(c))
            for c in (
                "version_hash",
                "schema_name",
                "version",
                "engine_version",
                "inserted_at",
                "schema",
            )
        )
        try:
            rows = self._select(
                f"SELECT {cols} FROM {self.qualified(self.schema.version_table_name)}"
                f" WHERE {where} ORDER BY {quote_ident(n('inserted_at'))} DESC LIMIT 1"
            )
        except DestinationUndefinedEntity:
            return None
        if not rows:
            return None
        row = rows[0]
        row[n("inserted_at")] = _parse_ts(row[n("inserted_at")])
        return StorageSchemaInfo.from_normalized_mapping(row, self.schema.naming)

    def get_stored_schema(self, schema_name: Optional[str] = None) -> Optional[StorageSchemaInfo]:
        n = self.schema.naming.normalize_identifier
        where = "1 = 1"
        if schema_name:
            where = f"{quote_ident(n('schema_name'))} = {quote_literal(schema_name)}"
        return self._schema_info(where)

    def get_stored_schema_by_hash(self, version_hash: str) -> Optional[StorageSchemaInfo]:
        n = self.schema.naming.normalize_identifier
        return self._schema_info(
            f"{quote_ident(n('version_hash'))} = {quote_literal(version_hash)}"
        )

    def get_stored_state(self, pipeline_name: str) -> Optional[StateInfo]:
        n = self.schema.naming.normalize_identifier
        state_cols = (
            "version",
            "engine_version",
            "pipeline_name",
            "state",
            "created_at",
            "version_hash",
            C_DLT_LOAD_ID,
        )
        select = ", ".join(f"s.{quote_ident(n(c))}" for c in state_cols)
        statement = (
            f"SELECT {select} FROM {self.qualified(self.schema.state_table_name)} AS s"
            f" JOIN {self.qualified(self.schema.loads_table_name)} AS l"
            f" ON l.{quote_ident(n('load_id'))} = s.{quote_ident(n(C_DLT_LOAD_ID))}"
            f" WHERE s.{quote_ident(n('pipeline_name'))} = {quote_literal(pipeline_name)}"
            f" AND l.{quote_ident(n('status'))} = 0"
            f" ORDER BY l.{quote_ident(n('load_id'))} DESC LIMIT 1"
        )
        rows = self._select(statement)
        if not rows:
            return None
        row = rows[0]
        row[n("created_at")] = _parse_ts(row[n("created_at")])
        return StateInfo.from_normalized_mapping(row, self.schema.naming)


def _parse_ts(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed
        except ValueError:
            return value
    return value
