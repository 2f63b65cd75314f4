"""dbt-tests-adapter's snapshot suites beyond the basic ones: column names from the
snapshot's config and from dbt_project.yml, invalid names, several unique key columns,
the new-record modes, one with `dbt_valid_to_current`, and `dbt_valid_to_current` on
its own (`BaseSnapshotDbtValidToCurrent` reads rows by position from a query without
`ORDER BY`, after dbt's snapshot merge rewrote some of them: the server keeps a small
table's insertion order through an update, as DuckDB does). Their fixtures compare a table made
with `TEST_VALID_TO` unquoted with snapshots whose columns are named as dbt quotes them;
DuckDB keeps an unquoted name's case and binds a name in its own `SELECT`, as the
server does. The hard-delete and new-column suites add a source column with
`DEFAULT 'dummy_value'` between two snapshots."""

from dbt.tests.adapter.simple_snapshot.new_record_check_mode import (
    BaseSnapshotNewRecordCheckMode,
)
from dbt.tests.adapter.simple_snapshot.new_record_dbt_valid_to_current import (
    BaseSnapshotNewRecordDbtValidToCurrent,
)
from dbt.tests.adapter.simple_snapshot.new_record_timestamp_mode import (
    BaseSnapshotNewRecordTimestampMode,
)
from dbt.tests.adapter.simple_snapshot.test_ephemeral_snapshot_hard_deletes import (
    BaseSnapshotEphemeralHardDeletes,
    BaseSnapshotNewColumnSpecificCheckCols,
    BaseSnapshotNewColumnTimestampStrategy,
    BaseSnapshotNewColumnWithDeletes,
)
from dbt.tests.adapter.simple_snapshot.test_various_configs import (
    BaseSnapshotColumnNames,
    BaseSnapshotColumnNamesFromDbtProject,
    BaseSnapshotDbtValidToCurrent,
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


class TestSnapshotNewRecordDbtValidToCurrent(BaseSnapshotNewRecordDbtValidToCurrent):
    """`dbt_valid_to_current: date('9999-12-31')`: a DATE past 2262 meets TIMESTAMPs in
    a `coalesce`, comparisons and a `UNION ALL` of the staging table."""


class TestSnapshotEphemeralHardDeletes(BaseSnapshotEphemeralHardDeletes):
    pass


class TestSnapshotNewColumnTimestampStrategy(BaseSnapshotNewColumnTimestampStrategy):
    pass


class TestSnapshotNewColumnSpecificCheckCols(BaseSnapshotNewColumnSpecificCheckCols):
    pass


class TestSnapshotNewColumnWithDeletes(BaseSnapshotNewColumnWithDeletes):
    pass


class TestSnapshotDbtValidToCurrent(BaseSnapshotDbtValidToCurrent):
    pass
