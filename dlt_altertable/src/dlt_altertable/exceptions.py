"""Errors raised by the destination, mapped onto dlt's retry contract."""

from dlt.common.configuration.exceptions import ConfigurationValueError
from dlt.common.destination.exceptions import (
    DestinationTerminalException,
    DestinationTransientException,
)


class AltertableTerminalError(DestinationTerminalException):
    """A request the server rejected for good (400/401/402/403/404/405) or an invalid setup."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class AltertableTransientError(DestinationTransientException):
    """A failure a retry may fix: 429, 5xx, other statuses, connection errors, timeouts,
    `{"error"}` lines inside a `/query` stream."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        self.status_code = status_code
        self.retry_after: float | None = None
        super().__init__(message)


class AltertableQueryError(AltertableTransientError):
    """An `{"error": ...}` line inside a `/query` stream (transient by contract)."""

    def is_missing_object(self) -> bool:
        msg = str(self).lower()
        return "does not exist" in msg or "not found" in msg or "no catalog + schema" in msg


class AltertableConfigurationError(AltertableTerminalError, ConfigurationValueError):
    """Missing or invalid configuration; raised before any request is made."""


class UnsupportedMergeConfiguration(AltertableTerminalError):
    """A merge configuration that the server-side upsert cannot honour."""


class InvalidLayoutHint(AltertableTerminalError, ValueError):
    """A partition hint that cannot be applied (bad key, unknown column, wrong type)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
