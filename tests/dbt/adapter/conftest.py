"""dbt's adapter conformance suite (`dbt-tests-adapter`) pointed at a real `deltalite serve`
through dbt-altertable: the profile every test class gets (`dbt_profile_target`), from the
`ALTERTABLE_*` variables tests/flight/serve_and_run.py sets. Classes whose dbt base has its
own per-test `clean_up` take `CascadeCleanUp` (below) first."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["dbt.tests.fixtures.project"]


@pytest.fixture(scope="class")
def profile_user():
    """Who owns what the tests create, as the docs suites expect to read it in the catalog:
    nobody. dbt-altertable's catalog query reports every table's owner as NULL (DuckDB
    tables have no owner)."""


@pytest.fixture(scope="class")
def dbt_profile_target():
    return {
        "type": "altertable",
        "host": os.environ["ALTERTABLE_HOST"],
        "port": int(os.environ["ALTERTABLE_PORT"]),
        "tls": False,
        "username": os.environ["ALTERTABLE_USERNAME"],
        "password": os.environ["ALTERTABLE_PASSWORD"],
        # dbt's own suites name the database `dbt` in SQL they expect (the ephemeral
        # ones compare compiled text): the server has a catalog of that name for them
        "database": "dbt",
        "threads": 1,
    }


def drop_with_cascade(project, schema: str) -> None:
    project.run_sql(f'DROP SCHEMA IF EXISTS "{project.database}"."{schema}" CASCADE')


class CascadeCleanUp:
    """The suite's own per-test `clean_up` (`adapter.drop_schema`), with `CASCADE`.

    dbt-altertable 0.2.13 drops a schema without `CASCADE` (its `altertable__drop_schema`
    omits it for DuckLake, which has none), and the server, like DuckDB, refuses to drop a
    schema that still holds tables or views without it: every class's clean-up failed on
    a schema its test had filled. The test bodies are dbt's, unchanged."""

    @pytest.fixture(autouse=True)
    def clean_up(self, project):
        yield
        drop_with_cascade(project, project.test_schema)


@pytest.fixture(scope="class", autouse=True)
def drop_test_schemas_with_cascade(project):
    """The same for dbt's class-level teardown (`project.drop_test_schema`), for the
    schemas a test class made."""
    yield
    for schema in list(project.created_schemas):
        drop_with_cascade(project, schema)
