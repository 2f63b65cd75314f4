"""Streaming, bounded-memory partition upsert for Delta Lake tables.

The native module does the work; this package re-exports its public names so that
``import deltalite`` exposes the same API as the seed package.
"""

from deltalite._deltalite import (
    CompactStats,
    DeltaLiteCommitConflictError,
    DeltaLiteError,
    DeltaLiteInvalidArgumentError,
    DeltaLiteSchemaMismatchError,
    DeltaLiteSourceTooLargeError,
    DeltaLiteTable,
    DeltaLiteTableNotFoundError,
    DeltaLiteTransientError,
    DeltaLiteUnsupportedTableError,
    UpsertStats,
    WriteStats,
    __version__,
    clear_probe_cache,
    knob_defaults,
    probe_cache_stats,
    set_probe_cache_max_bytes,
)

__all__ = [
    "CompactStats",
    "DeltaLiteCommitConflictError",
    "DeltaLiteError",
    "DeltaLiteInvalidArgumentError",
    "DeltaLiteSchemaMismatchError",
    "DeltaLiteSourceTooLargeError",
    "DeltaLiteTable",
    "DeltaLiteTableNotFoundError",
    "DeltaLiteTransientError",
    "DeltaLiteUnsupportedTableError",
    "UpsertStats",
    "WriteStats",
    "__version__",
    "clear_probe_cache",
    "knob_defaults",
    "probe_cache_stats",
    "set_probe_cache_max_bytes",
]
