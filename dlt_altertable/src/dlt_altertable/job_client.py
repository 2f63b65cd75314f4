"""The job client: storage, naming, jobs and the merge path of each table; schema sync
(`schema_sync.py`), state sync (`state_sync.py`), merge validation and SQL (`merge.py`), the
staged merge path (`staging.py`) and the load job (`load_job.py`) live in their own
modules."""

import os
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Optional

from dlt.common import logger
from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.client import (
    JobClientBase,
    LoadJob,
    PreparedTableSchema,
    WithStateSync,
)
from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.schema import Schema
from dlt.common.schema.utils import get_nested_tables, get_root_table, has_table_seen_data
from dlt.common.storages import ParsedLoadJobFileName
from dlt.destinations.sql_client import SqlClientBase, WithSqlClient
from dlt.destinations.utils import verify_unsupported_merge_options

from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import (
    AltertableConfigurationError,
    AltertableQueryError,
    UnsupportedMergeConfiguration,
)
from dlt_altertable.http import AltertableHttpClient, with_retries
from dlt_altertable.layout import PARTITION_HINT, partition_expressions, partition_keys
from dlt_altertable.load_job import AltertableLoadJob
from dlt_altertable.merge import (
    MergeSpec,
    StagedTable,
    duplicate_check_sql,
    merge_spec,
    merge_statements,
    root_key_columns,
    staged_merge_reasons,
)
from dlt_altertable.schema_sync import SchemaSync, forget_synced
from dlt_altertable.sql_client import AltertableSqlClient
from dlt_altertable.staging import (
    completed_staged_files,
    drop_staging_schema,
    staging_qualified,
)
from dlt_altertable.state_sync import StateSync
from dlt_altertable.types import quote_ident, quote_literal

# staging schemas this process already created: (server, catalog, schema)
_STAGING_SCHEMAS: set[tuple[str, str, str]] = set()


class AltertableJobClient(SchemaSync, StateSync, WithSqlClient, JobClientBase, WithStateSync):
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
        forget_synced()

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
        """Replace overwrites with the first file of each table in a load. A nested table of
        a replaced root may get no file at all (the new rows have empty lists), so nested
        tables of `replace` roots are emptied before the load, as SQL destinations do."""
        table = self.schema.tables.get(table_name)
        if table is None or not table.get("parent"):
            return False
        root = get_root_table(self.schema.tables, table_name)
        return root.get("write_disposition") == "replace"

    # ----- merge paths -----
    def _chain(self, root_name: str) -> list[PreparedTableSchema]:
        """The root and its nested tables that have seen data, parents first."""
        return [
            self.prepare_load_table(t["name"])
            for t in get_nested_tables(self.schema.tables, root_name)
            if t["name"] == root_name or has_table_seen_data(t)
        ]

    def staged_reasons(self, table_name: str) -> list[str]:
        """Why the chain of `table_name` merges through staging; empty for the direct
        `/upsert` path or a table that is not merged."""
        root = get_root_table(self.schema.tables, table_name)
        if root.get("write_disposition") != "merge":
            return []
        root_name = root["name"]
        prepared = self.prepare_load_table(root_name)
        nested = len(self._chain(root_name)) > 1
        reasons = staged_merge_reasons(prepared, nested)
        if not reasons and self.config.force_sql_merge:
            reasons.append("force_sql_merge")
        return reasons

    def is_staged(self, table_name: str) -> bool:
        return bool(self.staged_reasons(table_name))

    def ensure_staging_schema(self, schema_name: str) -> None:
        marker = (self.config.base_url, str(self.config.catalog), schema_name)
        if marker in _STAGING_SCHEMAS:
            return
        self.query(
            "CREATE SCHEMA IF NOT EXISTS"
            f" {quote_ident(str(self.config.catalog))}.{quote_ident(schema_name)}"
        )
        _STAGING_SCHEMAS.add(marker)

    def prepare_load_table(self, table_name: str) -> PreparedTableSchema:
        table = super().prepare_load_table(table_name)
        if PARTITION_HINT in table:
            keys = partition_keys(table.get(PARTITION_HINT))
            for key in keys:
                key["column"] = self.schema.naming.normalize_identifier(key["column"])
            table[PARTITION_HINT] = keys  # type: ignore[literal-required]
        return table

    # ----- validation -----
    def verify_schema(
        self,
        only_tables: Optional[Iterable[str]] = None,
        new_jobs: Optional[Iterable[ParsedLoadJobFileName]] = None,
    ) -> list[PreparedTableSchema]:
        refuse_parallelism_override()
        names = set(only_tables or self.schema.data_table_names(seen_data_only=True))
        merged = []
        for name in sorted(names):
            if name not in self.schema.tables:
                continue
            table = self.prepare_load_table(name)
            partition_expressions(table)
            if table.get("write_disposition") != "merge":
                continue
            merged.append(table)
            root = get_root_table(self.schema.tables, name)
            merge_spec(self.prepare_load_table(root["name"]), staged=self.is_staged(name))
        for error in verify_unsupported_merge_options(
            self.schema,
            merged,
            self.capabilities,
            "altertable",
            ("source_filter", "skip_unchanged_rows"),
        ):
            raise UnsupportedMergeConfiguration(str(error))
        return super().verify_schema(only_tables, new_jobs)

    # ----- staged merges -----
    def complete_load(self, load_id: str) -> None:
        """Merge the staged chains of this load (if any), record the load, drop staging."""
        staged = completed_staged_files()
        if staged and not self._load_recorded(load_id):
            roots = sorted({get_root_table(self.schema.tables, t)["name"] for t in staged})
            for root_name in roots:
                self._merge_chain(load_id, root_name, staged)
        super().complete_load(load_id)
        if staged:
            with_retries(lambda: drop_staging_schema(self, load_id), retry_missing=True)

    def _load_recorded(self, load_id: str) -> bool:
        n = self.schema.naming.normalize_identifier
        try:
            rows = self._select(
                f"SELECT 1 AS recorded FROM {self.qualified(self.schema.loads_table_name)}"
                f" WHERE {quote_ident(n('load_id'))} = {quote_literal(load_id)}"
                f" AND {quote_ident(n('status'))} = 0"
            )
        except DestinationUndefinedEntity:
            return False
        return bool(rows)

    def _merge_chain(self, load_id: str, root_name: str, staged: dict[str, list[str]]) -> None:
        chain = self._chain(root_name)
        if not staged.get(root_name):
            logger.warning(f"altertable: nothing staged for the root {root_name}, skipping")
            return
        for table in chain:
            # outside dlt's job retries: retry here (the DDL is idempotent)
            with_retries(lambda t=table: self.sync_table(load_id, t), retry_missing=True)
        spec: MergeSpec = merge_spec(chain[0], staged=True)
        tables = [
            StagedTable(
                table=t,
                target=self.qualified(t["name"]),
                staging=staging_qualified(self, load_id, t["name"]),
                files=[staging_qualified(self, load_id, f) for f in staged.get(t["name"], [])],
            )
            for t in chain
        ]
        row_key, root_keys = (None, {})
        if len(chain) > 1:
            row_key, root_keys = root_key_columns(chain)
            counts = with_retries(
                lambda: self.query(duplicate_check_sql(tables[0], spec)), retry_missing=True
            )
            n, k = counts.rows[0]
            if n != k:
                raise UnsupportedMergeConfiguration(
                    f"Table {root_name}: a merge with nested tables needs one row per primary"
                    f" key per load ({n} rows, {k} keys): the nested rows of two versions of"
                    " one key cannot be told apart."
                )
        statements = merge_statements(tables, spec, load_id, row_key, root_keys)
        script = "\n".join(["BEGIN TRANSACTION;", *statements, "COMMIT;"])
        # re-runnable after a partial failure (see merge_statements)
        with_retries(lambda: self.query(script), retry_missing=True)
        logger.info(f"altertable: merged staged chain {[t.name for t in tables]}")

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
