"""The job client: storage, naming and jobs; schema sync (`schema_sync.py`), state sync
(`state_sync.py`), merge validation (`merge.py`) and the load job (`load_job.py`) live in
their own modules."""

import os
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Optional

from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.client import (
    JobClientBase,
    LoadJob,
    PreparedTableSchema,
    WithStateSync,
)
from dlt.common.schema import Schema
from dlt.common.storages import ParsedLoadJobFileName
from dlt.destinations.sql_client import SqlClientBase, WithSqlClient

from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import AltertableConfigurationError, AltertableQueryError
from dlt_altertable.http import AltertableHttpClient, with_retries
from dlt_altertable.load_job import AltertableLoadJob
from dlt_altertable.merge import merge_keys
from dlt_altertable.schema_sync import SchemaSync, forget_synced
from dlt_altertable.sql_client import AltertableSqlClient
from dlt_altertable.state_sync import StateSync
from dlt_altertable.types import quote_ident, quote_literal


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
