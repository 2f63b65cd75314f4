"""dbt-tests-adapter's ephemeral suite. The module keeps dbt's name: the tests compare the
compiled SQL with text that names the schema after it (`test_test_ephemeral`)."""

from dbt.tests.adapter.ephemeral.test_ephemeral import (
    BaseEphemeralErrorHandling,
    BaseEphemeralMulti,
    BaseEphemeralNested,
)


class TestEphemeralMulti(BaseEphemeralMulti):
    pass


class TestEphemeralNested(BaseEphemeralNested):
    pass


class TestEphemeralErrorHandling(BaseEphemeralErrorHandling):
    pass
