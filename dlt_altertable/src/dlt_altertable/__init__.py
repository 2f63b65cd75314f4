"""dlt destination for the lakehouse HTTP API (Altertable-compatible)."""

from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import (
    AltertableConfigurationError,
    AltertableQueryError,
    AltertableTerminalError,
    AltertableTransientError,
    UnsupportedMergeConfiguration,
)
from dlt_altertable.factory import altertable

__all__ = [
    "altertable",
    "AltertableClientConfiguration",
    "AltertableConfigurationError",
    "AltertableQueryError",
    "AltertableTerminalError",
    "AltertableTransientError",
    "UnsupportedMergeConfiguration",
]
