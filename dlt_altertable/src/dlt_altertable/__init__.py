"""dlt destination for the lakehouse HTTP API (Altertable-compatible)."""

from dlt_altertable.altertable_adapter import altertable_adapter, altertable_partition
from dlt_altertable.configuration import AltertableClientConfiguration
from dlt_altertable.exceptions import (
    AltertableConfigurationError,
    AltertableQueryError,
    AltertableTerminalError,
    AltertableTransientError,
    InvalidLayoutHint,
    UnsupportedMergeConfiguration,
)
from dlt_altertable.factory import altertable

__all__ = [
    "altertable",
    "altertable_adapter",
    "altertable_partition",
    "AltertableClientConfiguration",
    "AltertableConfigurationError",
    "AltertableQueryError",
    "AltertableTerminalError",
    "AltertableTransientError",
    "InvalidLayoutHint",
    "UnsupportedMergeConfiguration",
]
