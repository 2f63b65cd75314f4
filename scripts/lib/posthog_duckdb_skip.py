"""pytest plugin for scripts/test-posthog.sh, loaded only when DuckDB's `delta` extension
cannot be loaded here: the suite's tests that read tables through DuckDB's `delta_scan`
are skipped with that reason instead of failing on `INSTALL delta` (DuckDB downloads the
extension at run time). Every other test runs as it is."""

from __future__ import annotations

import pytest

REASON = (
    "reads the table through DuckDB's delta extension, which DuckDB downloads at run time "
    "and cannot reach here"
)

# The tests that run `INSTALL delta; LOAD delta;` and `delta_scan(...)`.
READS_THROUGH_DUCKDB_DELTA = {
    "tests/test_interop.py::test_duckdb_delta_scan_reads_the_table",
    "tests/test_interop.py::test_duckdb_sees_partition_pruning_metadata",
    "tests/test_operations.py::test_interleaved_create_append_upsert_optimize_vacuum",
    "tests/test_operations.py::test_merge_then_upsert_then_merge_same_table",
    "tests/test_operations.py::test_vacuum_after_compact_after_upsert",
    "tests/test_compact.py::test_parity_with_delta_rs_optimize[partitioned]",
    "tests/test_compact.py::test_parity_with_delta_rs_optimize[unpartitioned]",
    "tests/test_compact.py::test_parity_with_delta_rs_optimize[encoded_partition_values]",
    "tests/test_compact.py::test_parity_with_delta_rs_optimize[multi_row_group_inputs]",
    "tests/test_compact.py::test_parity_with_delta_rs_optimize[wide_strings]",
    "tests/test_compact.py::test_parity_with_a_null_partition",
    "tests/test_compact.py::test_parity_after_a_partition_lost_every_file",
    "tests/test_compact.py::test_parity_across_schema_evolution_and_upsert_history",
}


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    for item in items:
        if item.nodeid in READS_THROUGH_DUCKDB_DELTA:
            item.add_marker(pytest.mark.skip(reason=REASON))
