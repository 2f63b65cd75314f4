"""Thin HTTP client for the Lakehouse API with dlt's terminal/transient error mapping."""

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Optional, TypeVar

import requests

from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import (
    AltertableQueryError,
    AltertableTerminalError,
    AltertableTransientError,
)

TERMINAL_STATUSES = frozenset({400, 401, 402, 403, 404, 405})
MAX_RETRY_AFTER = 30.0
T = TypeVar("T")


def parquet_from_bytes(content: bytes) -> Any:
    """Decode a Parquet body into a pyarrow Table, reading from an Arrow-owned copy.

    Reading from a Python object (``io.BytesIO``, or a ``BufferReader`` over ``bytes``) leaves
    Arrow's reader threads holding a reference to it; when one of them drops the last
    reference while the interpreter finalizes, it takes the GIL, is torn down by
    ``pthread_exit`` inside a C++ destructor, and the process aborts with "terminate called
    without an active exception" after all its work is done (pyarrow 26, CPython 3.11: 14
    of 200 short scripts; apache/arrow#34314). A buffer Arrow allocated holds no Python
    reference, so releasing it needs no GIL (0 of 600).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    owned = pa.allocate_buffer(len(content))
    pa.FixedSizeBufferWriter(owned).write(content)
    return pq.read_table(pa.BufferReader(owned))


def raise_for_response(response: requests.Response, what: str) -> None:
    """Map a non-200 answer onto dlt's retry contract."""
    if response.status_code == 200:
        return
    try:
        body = response.text
    except Exception:  # pragma: no cover - body unreadable
        body = ""
    first_line = (body or "").strip().splitlines()[0][:2000] if body and body.strip() else ""
    message = f"{what} failed with HTTP {response.status_code}: {first_line}"
    if response.status_code in TERMINAL_STATUSES:
        raise AltertableTerminalError(message, response.status_code)
    error = AltertableTransientError(message, response.status_code)
    retry_after = response.headers.get("Retry-After")
    if retry_after:
        try:
            error.retry_after = min(max(float(retry_after), 0.0), MAX_RETRY_AFTER)
        except ValueError:
            pass
    raise error


class QueryResult:
    def __init__(self, metadata: dict, columns: list[dict], rows: list[list]) -> None:
        self.metadata = metadata
        self.columns = columns
        self.rows = rows

    @property
    def column_names(self) -> list[str]:
        return [c["name"] for c in self.columns]

    def dicts(self) -> list[dict[str, Any]]:
        names = self.column_names
        return [dict(zip(names, row, strict=False)) for row in self.rows]


class AltertableHttpClient:
    """One session per thread; dlt runs load jobs on a thread pool."""

    def __init__(self, config: AltertableClientConfiguration) -> None:
        self.config = config
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.auth = (str(self.config.username), str(self.config.password))
            session.headers["User-Agent"] = "dlt-altertable"
            self._local.session = session
        return session

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def _post(self, path: str, what: str, timeout: tuple[float, float], **kwargs: Any):
        url = self.config.base_url + path
        try:
            return self.session.post(url, timeout=timeout, **kwargs)
        except requests.exceptions.Timeout as ex:
            raise AltertableTransientError(f"{what}: timeout talking to {url}: {ex}") from ex
        except requests.exceptions.ConnectionError as ex:
            raise AltertableTransientError(f"{what}: connection error to {url}: {ex}") from ex
        except requests.exceptions.RequestException as ex:
            raise AltertableTransientError(f"{what}: request to {url} failed: {ex}") from ex

    # ----- ingest -----
    def post_file(
        self,
        endpoint: str,
        params: dict[str, str],
        file_path: str,
        idempotency_key: Optional[str],
    ) -> None:
        """POST a parquet file to /upload or /upsert, streamed from disk."""
        headers = {"Content-Type": "application/parquet"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        what = f"POST {endpoint} {params.get('table')}"
        with open(file_path, "rb") as body:
            response = self._post(
                endpoint,
                what,
                (self.config.connect_timeout, self.config.upload_timeout),
                params=params,
                data=body,
                headers=headers,
            )
        try:
            raise_for_response(response, what)
        finally:
            response.close()

    # ----- query -----
    def query(
        self,
        statement: str,
        *,
        schema: Optional[str] = None,
        compute_size: Optional[str] = None,
    ) -> QueryResult:
        """Run a statement, parse the NDJSON stream; `{"error"}` lines raise (transient)."""
        body: dict[str, Any] = {"statement": statement, "catalog": self.config.catalog}
        if schema:
            body["schema"] = schema
        if compute_size:
            body["compute_size"] = compute_size
        what = f"POST /query {statement[:200]!r}"
        response = self._post(
            "/query",
            what,
            (self.config.connect_timeout, self.config.query_timeout),
            json=body,
            stream=True,
        )
        try:
            raise_for_response(response, what)
            metadata: dict = {}
            columns: list[dict] = []
            rows: list[list] = []
            try:
                for index, raw in enumerate(response.iter_lines()):
                    if not raw:
                        continue
                    value = json.loads(raw)
                    if isinstance(value, dict) and "error" in value:
                        raise AltertableQueryError(f"{what}: {value['error']}")
                    if index == 0:
                        metadata = value
                    elif index == 1:
                        columns = value
                    else:
                        rows.append(value)
            except requests.exceptions.RequestException as ex:
                raise AltertableTransientError(f"{what}: stream interrupted: {ex}") from ex
            except ValueError as ex:
                raise AltertableTransientError(f"{what}: malformed response: {ex}") from ex
            return QueryResult(metadata, columns, rows)
        finally:
            response.close()

    def query_arrow(self, statement: str, *, schema: Optional[str] = None) -> Any:
        """Run a statement with format=parquet and return a pyarrow Table."""

        body: dict[str, Any] = {
            "statement": statement,
            "catalog": self.config.catalog,
            "format": "parquet",
        }
        if schema:
            body["schema"] = schema
        what = f"POST /query (parquet) {statement[:200]!r}"
        response = self._post(
            "/query", what, (self.config.connect_timeout, self.config.query_timeout), json=body
        )
        try:
            if response.status_code != 200:
                # SQL errors come back as non-200 with the message for format=parquet
                text = response.text.strip()
                if response.status_code in TERMINAL_STATUSES:
                    raise AltertableQueryError(f"{what}: HTTP {response.status_code}: {text}")
                raise_for_response(response, what)
            content = response.content
            if content[:4] != b"PAR1":
                # some servers stream errors as JSON even for parquet
                text = content.decode("utf-8", "replace").strip()
                raise AltertableQueryError(f"{what}: unexpected response: {text[:2000]}")
            return parquet_from_bytes(content)
        finally:
            response.close()


def with_retries(
    fn: Callable[[], T],
    attempts: int = 4,
    first_delay: float = 0.5,
    retry_missing: bool = False,
) -> T:
    """Retry idempotent bookkeeping calls (state, schema versions) on transient errors.

    Query errors that read like a missing object are not retried unless `retry_missing`
    (for statements whose objects must exist, where such an error is a server-side race)."""
    delay = first_delay
    for attempt in range(attempts):
        try:
            return fn()
        except AltertableQueryError as ex:
            if (ex.is_missing_object() and not retry_missing) or attempt == attempts - 1:
                raise
        except AltertableTransientError:
            if attempt == attempts - 1:
                raise
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")
