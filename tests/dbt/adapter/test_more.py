"""dbt-tests-adapter beyond the basic suite: incremental strategies and unique keys, docs
generation, snapshots."""

import pytest
from conftest import CascadeCleanUp, drop_with_cascade
from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_docs_generate import (
    BaseDocsGenerate,
    BaseDocsGenReferences,
)
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import (
    BaseMergeExcludeColumns,
)
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import (
    BaseIncrementalOnSchemaChange,
)
from dbt.tests.adapter.incremental.test_incremental_predicates import (
    BaseIncrementalPredicates,
)
from dbt.tests.adapter.incremental.test_incremental_unique_id import (
    BaseIncrementalUniqueKey,
)
from dbt.tests.adapter.simple_snapshot.test_snapshot import (
    BaseSimpleSnapshot,
    BaseSnapshotCheck,
)


class TestIncrementalUniqueKey(CascadeCleanUp, BaseIncrementalUniqueKey):
    pass


class TestMergeExcludeColumns(BaseMergeExcludeColumns):
    pass


class TestIncrementalOnSchemaChange(BaseIncrementalOnSchemaChange):
    pass


class TestIncrementalPredicatesDeleteInsert(BaseIncrementalPredicates):
    pass


# The catalog's column types as the adapter reports them: DuckDB's names (dbt's expected
# catalogs default to Postgres's, for adapters to override, as dbt-duckdb does).
DUCKDB_TYPES = {
    "id_type": "INTEGER",
    "text_type": "VARCHAR",
    "time_type": "TIMESTAMP",
    "view_type": "VIEW",
    "table_type": "BASE TABLE",
}


class TestDocsGenerate(BaseDocsGenerate):
    @pytest.fixture(autouse=True)
    def clean_up(self, project):
        """dbt's drops the alternate schema only (the seed stays for the next test); with
        `CASCADE`, as `CascadeCleanUp` says why."""
        yield
        drop_with_cascade(project, f"{project.test_schema}_test")

    @pytest.fixture(scope="class")
    def expected_catalog(self, project, profile_user):
        return expected_catalog.base_expected_catalog(
            project,
            role=profile_user,
            model_stats=expected_catalog.no_stats(),
            **DUCKDB_TYPES,
        )


class TestDocsGenReferences(BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, profile_user):
        return expected_catalog.expected_references_catalog(
            project,
            role=profile_user,
            bigint_type="BIGINT",
            model_stats=expected_catalog.no_stats(),
            **DUCKDB_TYPES,
        )


class TestSimpleSnapshot(BaseSimpleSnapshot):
    pass


class TestSnapshotCheck(BaseSnapshotCheck):
    pass
