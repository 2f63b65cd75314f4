"""The `altertable` destination factory."""

from typing import TYPE_CHECKING, Any, Optional

from dlt.common.data_writers.escape import escape_duckdb_literal, escape_postgres_identifier
from dlt.common.destination import Destination, DestinationCapabilitiesContext
from dlt.common.destination.reference import DestinationReference
from dlt.common.normalizers.naming import NamingConvention

from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import AltertableConfigurationError

if TYPE_CHECKING:
    from dlt_altertable.job_client import AltertableJobClient


class altertable(Destination[AltertableClientConfiguration, "AltertableJobClient"]):  # noqa: N801
    """Load into a lakehouse through the Altertable-compatible HTTP API.

    `dlt.pipeline(destination=altertable)` or `altertable(host=..., catalog=..., ...)`.
    """

    spec = AltertableClientConfiguration

    def _raw_capabilities(self) -> DestinationCapabilitiesContext:
        caps = DestinationCapabilitiesContext()
        caps.preferred_loader_file_format = "parquet"
        caps.supported_loader_file_formats = ["parquet"]
        caps.preferred_staging_file_format = None
        caps.supported_staging_file_formats = []
        caps.has_case_sensitive_identifiers = True
        caps.max_identifier_length = 255
        caps.max_column_identifier_length = 255
        caps.max_query_length = 32 * 1024 * 1024
        caps.is_max_query_length_in_bytes = True
        caps.max_text_data_type_length = 1024 * 1024 * 1024
        caps.is_max_text_data_type_length_in_bytes = True
        caps.supports_ddl_transactions = False
        caps.supports_transactions = False
        caps.supports_naive_datetime = True
        caps.timestamp_precision = 6
        caps.decimal_precision = (38, 9)
        caps.wei_precision = (38, 0)
        caps.max_table_nesting = 0
        caps.supported_replace_strategies = ["truncate-and-insert"]
        # upsert first: a merge resource that names no strategy is upserted. The others are
        # declared only so that dlt lets them reach `verify_schema`, which refuses them with a
        # terminal error before any upload.
        caps.supported_merge_strategies = ["upsert", "delete-insert", "scd2", "insert-only"]
        caps.loader_parallelism_strategy = "table-sequential"
        caps.sqlglot_dialect = "duckdb"
        caps.escape_identifier = escape_postgres_identifier
        caps.escape_literal = escape_duckdb_literal
        caps.supports_multiple_statements = False
        return caps

    @classmethod
    def adjust_capabilities(
        cls,
        caps: DestinationCapabilitiesContext,
        config: AltertableClientConfiguration,
        naming: Optional[NamingConvention],
    ) -> DestinationCapabilitiesContext:
        caps = super().adjust_capabilities(caps, config, naming)
        caps.loader_parallelism_strategy = "table-sequential"
        return caps

    @property
    def client_class(self) -> type["AltertableJobClient"]:
        from dlt_altertable.job_client import AltertableJobClient

        return AltertableJobClient

    def __init__(
        self,
        host: Optional[str] = None,
        catalog: Optional[str] = None,
        dataset_name: Optional[str] = None,
        username: Optional[str] = None,
        password: Optional[str] = None,
        port: Optional[int] = None,
        tls: Optional[bool] = None,
        compute_size: Optional[str] = None,
        destination_name: Optional[str] = None,
        environment: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        """Configure the destination. Explicit arguments override every other source."""
        strategy = kwargs.get("loader_parallelism_strategy")
        if strategy not in (None, "table-sequential", "sequential"):
            raise AltertableConfigurationError(
                "altertable requires loader_parallelism_strategy='table-sequential'; the replace"
                f" bookkeeping depends on it (got {strategy!r})"
            )
        super().__init__(
            host=host,
            catalog=catalog,
            dataset_name=dataset_name,
            username=username,
            password=password,
            port=port,
            tls=tls,
            compute_size=compute_size,
            destination_name=destination_name,
            environment=environment,
            **kwargs,
        )

    def configuration(
        self, initial_config: AltertableClientConfiguration, accept_partial: bool = False
    ) -> AltertableClientConfiguration:
        config = super().configuration(initial_config, accept_partial=accept_partial)
        if not accept_partial:
            if not config.destination_name:
                config.destination_name = self.destination_name
            config.ensure_complete()
        return config


altertable.register()
# also resolvable as `destination="altertable"` (e.g. from config.toml) once imported
DestinationReference.register(altertable, "altertable")
