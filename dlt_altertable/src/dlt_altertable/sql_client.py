"""Read access for `pipeline.dataset()` / `pipeline.sql_client()` through `POST /query`.

Results are fetched with `format=parquet`, so Arrow types come from the server exactly.
"""

from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, AnyStr, Optional

import pyarrow as pa
from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.dataset import DBApiCursor
from dlt.destinations.exceptions import (
    DatabaseTerminalException,
    DatabaseTransientException,
    DatabaseUndefinedRelation,
)
from dlt.destinations.sql_client import DBTransaction, SqlClientBase, raise_database_error

from dlt_altertable.exceptions import (
    AltertableQueryError,
    AltertableTerminalError,
    AltertableTransientError,
)
from dlt_altertable.http import AltertableHttpClient


def _inline_args(query: str, args: Sequence[Any], caps: DestinationCapabilitiesContext) -> str:
    if not args:
        return query
    return query % tuple(_literal(a, caps) for a in args)


def _literal(value: Any, caps: DestinationCapabilitiesContext) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


class ArrowCursor(DBApiCursor):
    """A DB-API style cursor over an Arrow table returned by the server."""

    def __init__(self, table: Optional[pa.Table]) -> None:
        self._table = table
        self._offset = 0
        self.native_cursor = self  # type: ignore[assignment]
        names = table.column_names if table is not None else []
        self.columns_schema = {c: {"name": c, "nullable": True} for c in names}

    @property
    def description(self) -> Optional[list[tuple]]:
        if self._table is None:
            return None
        return [(f.name, str(f.type), None, None, None, None, True) for f in self._table.schema]

    def execute(self, query: AnyStr, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("use AltertableSqlClient.execute_query")

    def _rows(self, n: Optional[int]) -> list[tuple[Any, ...]]:
        if self._table is None:
            return []
        end = self._table.num_rows if n is None else min(self._offset + n, self._table.num_rows)
        chunk = self._table.slice(self._offset, end - self._offset)
        self._offset = end
        columns = [col.to_pylist() for col in chunk.columns]
        return list(zip(*columns, strict=True)) if columns else []

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows(None)

    def fetchmany(self, size: int = 1000) -> list[tuple[Any, ...]]:
        return self._rows(size)

    def fetchone(self) -> Optional[tuple[Any, ...]]:
        rows = self._rows(1)
        return rows[0] if rows else None

    def close(self) -> None:
        self._table = None

    def _rest(self) -> Optional[pa.Table]:
        if self._table is None:
            return None
        rest = self._table.slice(self._offset)
        self._offset = self._table.num_rows
        return rest

    def arrow(self, chunk_size: Optional[int] = None, **kwargs: Any) -> Optional[pa.Table]:
        if chunk_size:
            return next(self.iter_arrow(chunk_size), None)
        return self._rest()

    def iter_arrow(self, chunk_size: int) -> Generator[pa.Table, None, None]:
        if self._table is None:
            return
        if not chunk_size:
            yield self._rest()
            return
        while self._offset < self._table.num_rows:
            end = min(self._offset + chunk_size, self._table.num_rows)
            yield self._table.slice(self._offset, end - self._offset)
            self._offset = end

    def df(self, chunk_size: Optional[int] = None, **kwargs: Any) -> Any:
        table = self.arrow(chunk_size)
        return table.to_pandas() if table is not None else None

    def iter_df(self, chunk_size: int) -> Generator[Any, None, None]:
        for table in self.iter_arrow(chunk_size):
            yield table.to_pandas()

    def iter_fetch(self, chunk_size: int) -> Generator[list[tuple[Any, ...]], Any, Any]:
        while rows := self.fetchmany(chunk_size):
            yield rows


class AltertableSqlClient(SqlClientBase[AltertableHttpClient]):
    def __init__(
        self,
        http: AltertableHttpClient,
        catalog: str,
        dataset_name: str,
        capabilities: DestinationCapabilitiesContext,
    ) -> None:
        super().__init__(catalog, dataset_name, dataset_name, capabilities)
        self.http = http
        self._open = False

    def open_connection(self) -> AltertableHttpClient:
        self._open = True
        return self.http

    def close_connection(self) -> None:
        self._open = False

    @property
    def native_connection(self) -> AltertableHttpClient:
        return self.http

    @contextmanager
    def begin_transaction(self) -> Iterator[DBTransaction]:
        # every statement is its own Delta commit; there are no multi-statement transactions
        class _NoTx(DBTransaction):
            def commit_transaction(self) -> None:
                pass

            def rollback_transaction(self) -> None:
                raise NotImplementedError("the lakehouse API has no transactions")

        yield _NoTx()

    def catalog_name(self, quote: bool = True, casefold: bool = True) -> Optional[str]:
        name = self.database_name
        if casefold:
            name = self.capabilities.casefold_identifier(name)
        if quote:
            name = self.capabilities.escape_identifier(name)
        return name

    def has_dataset(self) -> bool:
        rows = self.execute_sql(
            "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = %s"
            " AND schema_name = %s",
            self.database_name,
            self.dataset_name,
        )
        return bool(rows)

    def create_dataset(self) -> None:
        self.execute_sql(f"CREATE SCHEMA IF NOT EXISTS {self.fully_qualified_dataset_name()}")

    def drop_dataset(self) -> None:
        self.execute_sql(f"DROP SCHEMA IF EXISTS {self.fully_qualified_dataset_name()} CASCADE")

    @raise_database_error
    def execute_sql(
        self, sql: AnyStr, *args: Any, **kwargs: Any
    ) -> Optional[Sequence[Sequence[Any]]]:
        statement = _inline_args(str(sql), args, self.capabilities)
        result = self.http.query(statement, schema=self.dataset_name)
        return [tuple(r) for r in result.rows]

    @contextmanager
    @raise_database_error
    def execute_query(self, query: AnyStr, *args: Any, **kwargs: Any) -> Iterator[DBApiCursor]:
        statement = _inline_args(str(query), args, self.capabilities)
        table = self.http.query_arrow(statement, schema=self.dataset_name)
        cursor = ArrowCursor(table)
        try:
            yield cursor
        finally:
            cursor.close()

    @staticmethod
    def _make_database_exception(ex: Exception) -> Exception:
        if isinstance(ex, AltertableQueryError):
            if ex.is_missing_object():
                return DatabaseUndefinedRelation(ex)
            return DatabaseTerminalException(ex)
        if isinstance(ex, AltertableTerminalError):
            return DatabaseTerminalException(ex)
        if isinstance(ex, AltertableTransientError):
            return DatabaseTransientException(ex)
        return ex
