"""Streaming, bounded-memory partition upsert for Delta Lake tables.

The native module does the work; this package re-exports its public names so that
``import deltalite`` exposes the same API as the seed package.
"""

from deltalite._deltalite import (
    CompactStats,
    DeltaLiteCommitConflictError,
    DeltaLiteError,
    DeltaLiteSchemaMismatchError,
    DeltaLiteSourceTooLargeError,
    DeltaLiteTable,
    DeltaLiteTableNotFoundError,
    DeltaLiteTransientError,
    DeltaLiteUnsupportedTableError,
    UpsertStats,
    WriteStats,
    __version__,
    knob_defaults,
)

__all__ = [
    "CompactStats",
    "DeltaLiteCommitConflictError",
    "DeltaLiteError",
    "DeltaLiteSchemaMismatchError",
    "DeltaLiteSourceTooLargeError",
    "DeltaLiteTable",
    "DeltaLiteTableNotFoundError",
    "DeltaLiteTransientError",
    "DeltaLiteUnsupportedTableError",
    "UpsertStats",
    "WriteStats",
    "__version__",
    "knob_defaults",
]
