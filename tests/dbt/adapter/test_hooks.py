"""dbt-tests-adapter's model and run hook suites: hooks inside and outside the model's
transaction (`vacuum` among them), hooks that `ref` models, hooks from a model's config,
`on-run-start`/`on-run-end` around `dbt run` and `dbt seed`.

Their setup runs the suite's own SQL files (`data/seed_model.sql`, `seed_run.sql`),
read from the installed package rather than copied here. `check_hooks` asserts what this
profile's target renders, as dbt-duckdb's own suite overrides it: the base classes
assert Postgres's target (`postgres`, user `root`, 4 threads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt.tests.adapter.hooks import test_model_hooks
from dbt.tests.adapter.hooks.test_model_hooks import (
    BaseHookRefs,
    BasePrePostModelHooks,
    BasePrePostModelHooksInConfig,
    BasePrePostModelHooksInConfigKwargs,
    BasePrePostModelHooksInConfigWithCount,
)
from dbt.tests.adapter.hooks.test_run_hooks import BasePrePostRunHooks


@pytest.fixture(scope="module")
def test_data_dir():
    """The hook suites' SQL files, where dbt-tests-adapter installed them."""
    return str(Path(test_model_hooks.__file__).parent / "data")


def check_row(ctx: dict, state: str, project, host: str) -> None:
    """One hook row as this profile's target renders it: dbt-altertable's credentials
    have no `dbname`, `user` or `pass`, so those render empty."""
    assert ctx["test_state"] == state
    assert ctx["target_dbname"] == ""
    assert ctx["target_host"] == host
    assert ctx["target_name"] == "default"
    assert ctx["target_schema"] == project.test_schema
    assert ctx["target_type"] == "altertable"
    assert ctx["target_user"] == ""
    assert ctx["target_pass"] == ""
    assert ctx["target_threads"] == 1
    assert ctx["run_started_at"]
    assert ctx["invocation_id"]
    assert ctx["thread_id"].startswith("Thread-") or ctx["thread_id"] == "MainThread"


class ModelHookRows:
    def check_hooks(self, state, project, host, count=1):
        for ctx in self.get_ctx_vars(state, count=count, project=project):
            check_row(ctx, state, project, host)


class RunHookRows:
    def check_hooks(self, state, project, host):
        check_row(self.get_ctx_vars(state, project), state, project, host)


class TestPrePostModelHooks(ModelHookRows, BasePrePostModelHooks):
    pass


class TestPrePostModelHooksUnderscores(
    ModelHookRows, test_model_hooks.TestPrePostModelHooksUnderscores
):
    """`pre_hook`/`post_hook` spelled with underscores (dbt's class, not a base)."""


class TestHookRefs(ModelHookRows, BaseHookRefs):
    pass


class TestPrePostModelHooksInConfig(ModelHookRows, BasePrePostModelHooksInConfig):
    pass


class TestPrePostModelHooksInConfigWithCount(
    ModelHookRows, BasePrePostModelHooksInConfigWithCount
):
    pass


class TestPrePostModelHooksInConfigKwargs(
    ModelHookRows, BasePrePostModelHooksInConfigKwargs
):
    pass


class TestPrePostRunHooks(RunHookRows, BasePrePostRunHooks):
    pass
