"""Job client: schema sync, one HTTP POST per load job file, and state sync."""

import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq
from dlt.common import logger
from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.client import (
    JobClientBase,
    LoadJob,
    PreparedTableSchema,
    RunnableLoadJob,
    StateInfo,
    StorageSchemaInfo,
    WithStateSync,
)
from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.json import json
from dlt.common.libs.pyarrow import get_py_arrow_datatype
from dlt.common.schema import Schema, TSchemaTables
from dlt.common.schema.typing import C_DLT_LOAD_ID, TTableSchema
from dlt.common.schema.utils import get_columns_names_with_prop
from dlt.common.storages import ParsedLoadJobFileName
from dlt.common.storages.load_package import PackageStorage
from dlt.destinations.sql_client import SqlClientBase, WithSqlClient

from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import (
    AltertableConfigurationError,
    AltertableQueryError,
    AltertableTransientError,
    UnsupportedMergeConfiguration,
)
from dlt_altertable.http import AltertableHttpClient, with_retries
from dlt_altertable.sql_client import AltertableSqlClient
from dlt_altertable.types import arrow_type_for_sql, quote_ident, quote_literal, sql_type

UNSUPPORTED_STRATEGIES = ("delete-insert", "scd2", "insert-only")

MAX_BACKOFF = 30.0
# (load_id, table, file_id) -> Retry-After seconds of the last transient failure
_RETRY_AFTER: dict[tuple[str, str, str], float | None] = {}

# (server, catalog, schema, load_id, table) already synced by this process
_SYNCED: set[tuple[str, ...]] = set()
# same key -> server columns outside dlt's schema, kept by an overwrite
_SERVER_EXTRA: dict[tuple[str, ...], dict[str, pa.DataType]] = {}
_SYNC_LOCK = threading.Lock()


def idempotency_key(*parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"dlt-{digest[:48]}"


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


class AltertableLoadJob(RunnableLoadJob):
    def __init__(self, file_path: str) -> None:
        super().__init__(file_path)
        self._job_client: AltertableJobClient = None  # type: ignore[assignment]

    def run(self) -> None:
        try:
            self._run()
        except AltertableTransientError as ex:
            # dlt re-queues the job at once: remember how long the retry should wait
            _RETRY_AFTER[self._retry_marker()] = ex.retry_after
            raise

    def _retry_marker(self) -> tuple[str, str, str]:
        parsed = ParsedLoadJobFileName.parse(self.file_name())
        return (self._load_id, parsed.table_name, parsed.file_id)

    def _backoff(self) -> None:
        retry = ParsedLoadJobFileName.parse(self.file_name()).retry_count
        if retry <= 0:
            return
        asked = _RETRY_AFTER.pop(self._retry_marker(), None)
        base = float(self._job_client.config.retry_backoff or 0.0)
        delay = asked if asked is not None else min(base * 2 ** (retry - 1), MAX_BACKOFF)
        if delay > 0:
            logger.info(f"altertable: retry {retry} of {self.file_name()} in {delay:.1f}s")
            time.sleep(delay)

    def _run(self) -> None:
        self._backoff()
        client = self._job_client
        table = self._load_table
        table_name = table["name"]
        disposition = table.get("write_disposition", "append")
        file_schema = pq.read_schema(self._file_path)
        client.sync_table(self._load_id, table, file_schema)
        parsed = ParsedLoadJobFileName.parse(self.file_name())
        params = client.table_params(table_name)

        if disposition == "merge":
            primary_key, cursor = merge_keys(table)
            params["primary_key"] = ",".join(primary_key)
            if cursor:
                params["cursor_field"] = ",".join(cursor)
            key = idempotency_key(self._load_id, table_name, parsed.file_id, "upsert")
            client.http.post_file("/upsert", params, self._file_path, key)
            return

        mode = "append"
        if disposition == "replace" and not self._completed_file_ids(table_name):
            # the first file of the table to run in this load overwrites, the others append
            mode = "overwrite"
        if mode == "overwrite":
            # re-applying an overwrite is harmless, replaying a stale one is not: once another
            # file of this load overwrote the table, a dedup on this file's key would drop its
            # rows. So each overwrite attempt has its own key.
            key = idempotency_key(
                self._load_id, table_name, parsed.file_id, mode, str(parsed.retry_count)
            )
        else:
            # appends happen only after some file of the table completed in this load, so no
            # overwrite can follow them: a committed append stays live and its retry must dedup
            key = idempotency_key(self._load_id, table_name, parsed.file_id, mode)
        params["mode"] = mode
        extra = (
            client.server_extra_columns(self._load_id, table_name) if mode == "overwrite" else {}
        )
        padded = self._pad_file(file_schema, extra)
        try:
            client.http.post_file("/upload", params, padded or self._file_path, key)
        finally:
            if padded:
                os.unlink(padded)

    def _completed_file_ids(self, table_name: str) -> set[str]:
        """File ids of this table's jobs already completed in this package. With
        table-sequential loading no other job of the table runs concurrently."""
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(self._file_path)))
        folder = os.path.join(package_dir, PackageStorage.COMPLETED_JOBS_FOLDER)
        done: set[str] = set()
        if not os.path.isdir(folder):
            return done
        for name in os.listdir(folder):
            try:
                parsed = ParsedLoadJobFileName.parse(name)
            except Exception:
                continue
            if parsed.table_name == table_name:
                done.add(parsed.file_id)
        return done

    def _pad_file(
        self, file_schema: pa.Schema, server_extra: Optional[dict[str, pa.DataType]] = None
    ) -> Optional[str]:
        """Pad a file written before dlt evolved the schema with typed NULL columns.

        `server_extra`: columns the server table has beyond dlt's schema; an overwrite keeps
        them (as NULL) so that removed columns stay."""
        columns = self._job_client.typed_columns(self._load_table)
        missing = [c for c in columns if c["name"] not in file_schema.names]
        extra = {
            name: type_
            for name, type_ in (server_extra or {}).items()
            if name not in file_schema.names
        }
        if not missing and not extra:
            return None
        caps = self._job_client.capabilities
        target_fields = []
        for col in columns:
            if col["name"] in file_schema.names:
                target_fields.append(file_schema.field(col["name"]))
            else:
                target_fields.append(
                    pa.field(col["name"], get_py_arrow_datatype(col, caps, "UTC"), nullable=True)
                )
        listed = {c["name"] for c in columns}
        target_fields += [f for f in file_schema if f.name not in listed]
        target_fields += [pa.field(name, type_, nullable=True) for name, type_ in extra.items()]
        target = pa.schema(target_fields)
        fd, out_path = tempfile.mkstemp(prefix="dlt-altertable-", suffix=".parquet")
        os.close(fd)
        try:
            source = pq.ParquetFile(self._file_path)
            with pq.ParquetWriter(out_path, target) as writer:
                wrote = False
                for batch in source.iter_batches():
                    arrays = []
                    for field in target:
                        if field.name in batch.schema.names:
                            arrays.append(batch.column(field.name))
                        else:
                            arrays.append(pa.nulls(batch.num_rows, type=field.type))
                    writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=target))
                    wrote = True
                if not wrote:
                    writer.write_table(target.empty_table())
        except BaseException:
            os.unlink(out_path)
            raise
        logger.info(
            f"altertable: padded {self.file_name()} with NULL columns"
            f" {[c['name'] for c in missing] + list(extra)}"
        )
        return out_path


class AltertableJobClient(WithSqlClient, JobClientBase, WithStateSync):
    def __init__(
        self,
        schema: Schema,
        config: AltertableClientConfiguration,
        capabilities: DestinationCapabilitiesContext,
    ) -> None:
        config.ensure_complete()
        super().__init__(schema, config, capabilities)
        self.config: AltertableClientConfiguration = config
        self.http = AltertableHttpClient(config)
        self._sql_client: Optional[AltertableSqlClient] = None

    # ----- dataset access -----
    @property
    def sql_client(self) -> SqlClientBase[Any]:
        if self._sql_client is None:
            self._sql_client = AltertableSqlClient(
                self.http, str(self.config.catalog), self.dataset_name, self.capabilities
            )
        return self._sql_client

    @property
    def sql_client_class(self) -> type[SqlClientBase[Any]]:
        return AltertableSqlClient

    # ----- naming -----
    @property
    def dataset_name(self) -> str:
        return str(self.config.dataset_name)

    def qualified(self, table_name: str) -> str:
        return ".".join(
            quote_ident(p) for p in (str(self.config.catalog), self.dataset_name, table_name)
        )

    def table_params(self, table_name: str) -> dict[str, str]:
        return {
            "catalog": str(self.config.catalog),
            "schema": self.dataset_name,
            "table": table_name,
        }

    @staticmethod
    def typed_columns(table: TTableSchema) -> list[dict[str, Any]]:
        return [c for c in table.get("columns", {}).values() if c.get("data_type")]

    def query(self, statement: str) -> Any:
        return self.http.query(
            statement, schema=self.dataset_name, compute_size=self.config.compute_size
        )

    # ----- storage -----
    def initialize_storage(self, truncate_tables: Optional[Iterable[str]] = None) -> None:
        with_retries(
            lambda: self.query(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.dataset_name)}")
        )
        # replace is implemented by `mode=overwrite` on the first file of each table, so only
        # truncations requested by `refresh="drop_data"` arrive here
        for table_name in truncate_tables or ():
            try:
                with_retries(lambda t=table_name: self.query(f"DELETE FROM {self.qualified(t)}"))
            except AltertableQueryError as ex:
                if not ex.is_missing_object():
                    raise

    def drop_tables(self, *tables: str, delete_schema: bool = True) -> None:
        """Drop tables (dlt `refresh="drop_sources"/"drop_resources"`, `pipeline drop`)."""
        for table_name in tables:
            with_retries(
                lambda t=table_name: self.query(f"DROP TABLE IF EXISTS {self.qualified(t)}")
            )
        if delete_schema:
            n = self.schema.naming.normalize_identifier
            try:
                with_retries(
                    lambda: self.query(
                        f"DELETE FROM {self.qualified(self.schema.version_table_name)}"
                        f" WHERE {quote_ident(n('schema_name'))} ="
                        f" {quote_literal(self.schema.name)}"
                    )
                )
            except AltertableQueryError as ex:
                if not ex.is_missing_object():
                    raise
        with _SYNC_LOCK:
            _SYNCED.clear()

    def is_storage_initialized(self) -> bool:
        result = with_retries(
            lambda: self.query(
                "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = "
                f"{quote_literal(str(self.config.catalog))} AND schema_name = "
                f"{quote_literal(self.dataset_name)}"
            )
        )
        return bool(result.rows)

    def drop_storage(self) -> None:
        self.query(f"DROP SCHEMA IF EXISTS {quote_ident(self.dataset_name)} CASCADE")

    def should_truncate_table_before_load(self, table_name: str) -> bool:
        return False

    # ----- validation -----
    def verify_schema(
        self,
        only_tables: Optional[Iterable[str]] = None,
        new_jobs: Optional[Iterable[ParsedLoadJobFileName]] = None,
    ) -> list[PreparedTableSchema]:
        refuse_parallelism_override()
        names = set(only_tables or self.schema.data_table_names(seen_data_only=True))
        for name in sorted(names):
            if name not in self.schema.tables:
                continue
            table = self.prepare_load_table(name)
            if table.get("write_disposition") == "merge":
                merge_keys(table)
        return super().verify_schema(only_tables, new_jobs)

    # ----- schema sync -----
    def _existing_columns(self, table_name: str) -> dict[str, str]:
        result = self.query(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = "
            f"{quote_literal(str(self.config.catalog))} AND table_schema = "
            f"{quote_literal(self.dataset_name)} AND table_name = {quote_literal(table_name)}"
        )
        return {row[0]: row[1] for row in result.rows}

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
        """Create or evolve the table before its first load in a package (idempotent DDL)."""
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
        if existing:
            for name, definition in defs.items():
                if name not in existing:
                    self.query(f"ALTER TABLE {qualified} ADD COLUMN IF NOT EXISTS {definition}")
        extra: dict[str, pa.DataType] = {}
        for name, type_name in existing.items():
            if name not in defs and (arrow_type := arrow_type_for_sql(type_name)) is not None:
                extra[name] = arrow_type
        with _SYNC_LOCK:
            _SYNCED.add(marker)
            _SERVER_EXTRA[marker] = extra

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

    # ----- jobs -----
    def create_load_job(
        self, table: PreparedTableSchema, file_path: str, load_id: str, restore: bool = False
    ) -> LoadJob:
        if not file_path.endswith(".parquet"):
            raise AltertableConfigurationError(
                f"altertable loads parquet files only, got {os.path.basename(file_path)}"
            )
        return AltertableLoadJob(file_path)

    def __enter__(self) -> "AltertableJobClient":
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> None:
        pass


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


def refuse_parallelism_override(strategies: Sequence[Optional[str]] = ()) -> None:
    """The replace bookkeeping needs table-sequential loading; refuse `parallel`."""
    from dlt.common.configuration import resolve_configuration
    from dlt.load.configuration import LoaderConfiguration

    configured: list[Optional[str]] = list(strategies)
    try:
        load_config = resolve_configuration(
            LoaderConfiguration(), sections=("load",), accept_partial=True
        )
        configured.append(load_config.parallelism_strategy)
    except Exception:  # pragma: no cover - config unreadable: nothing to refuse
        pass
    for strategy in configured:
        if strategy not in (None, "table-sequential", "sequential"):
            raise AltertableConfigurationError(
                f"altertable requires loader_parallelism_strategy='table-sequential' (got"
                f" {strategy!r}): the replace bookkeeping overwrites with the first file of each"
                " table and appends the rest, so two files of one table must never load at once."
                " Remove LOAD__PARALLELISM_STRATEGY / load.parallelism_strategy."
            )
