"""dbt-tests-adapter's snapshot suites beyond the basic ones: column names from the
snapshot's config and from dbt_project.yml, invalid names, several unique key columns,
and the new-record modes. (Not the `dbt_valid_to_current` suites: DataFusion gives a
`coalesce` or `CASE` of a DATE and a TIMESTAMP nanoseconds, which end in 2262, and
their `9999-12-31` fails; one of them also reads rows by position without an
`ORDER BY`.) Their fixtures compare a table made
with `TEST_VALID_TO` unquoted with snapshots whose columns are named as dbt quotes them;
DuckDB keeps an unquoted name's case and binds a name in its own `SELECT`, as the
server does."""

from dbt.tests.adapter.simple_snapshot.new_record_check_mode import (
    BaseSnapshotNewRecordCheckMode,
)
from dbt.tests.adapter.simple_snapshot.new_record_timestamp_mode import (
    BaseSnapshotNewRecordTimestampMode,
)
from dbt.tests.adapter.simple_snapshot.test_various_configs import (
    BaseSnapshotColumnNames,
    BaseSnapshotColumnNamesFromDbtProject,
    BaseSnapshotInvalidColumnNames,
    BaseSnapshotMultiUniqueKey,
)


class TestSnapshotColumnNames(BaseSnapshotColumnNames):
    pass


class TestSnapshotColumnNamesFromDbtProject(BaseSnapshotColumnNamesFromDbtProject):
    pass


class TestSnapshotInvalidColumnNames(BaseSnapshotInvalidColumnNames):
    pass


class TestSnapshotMultiUniqueKey(BaseSnapshotMultiUniqueKey):
    pass


class TestSnapshotNewRecordTimestampMode(BaseSnapshotNewRecordTimestampMode):
    pass


class TestSnapshotNewRecordCheckMode(BaseSnapshotNewRecordCheckMode):
    pass
