"""Fixtures for the Flight SQL suites: our own tests in this folder, and the integration
tests that altertable-flightsql 0.4.1 ships in its sdist, which import `TableInfo` and
`SchemaInfo` from `tests.conftest` and use the fixtures below (the sdist has no
conftest; `scripts/test-flight.sh` copies this file next to its tests, never the other
way round).

The server is a real `deltalite serve` started by `scripts/test-flight.sh` on the host
(these tests run in the CPython 3.13 root, which shares the host's loopback); its
address and a user come in the `ALTERTABLE_*` variables, as the upstream conftest takes
them.

What the fixtures mean on our server:
- `test_catalog`: `ATTACH ':memory:' AS test_catalog_<hex>` makes a scratch catalog: a
  catalog in the data root that only the attaching Flight session sees, removed by
  `DETACH`, when the session closes or expires, and at server start. DuckDB's
  `:memory:` database is likewise empty, private to its connection and gone with it.
- `test_schema`, `test_table`: ordinary DDL and DML through `execute()` (DoPut).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pytest
from altertable_flightsql import Client


@dataclass(frozen=True)
class SchemaInfo:
    catalog: str
    schema: str
    full_name: str


@dataclass(frozen=True)
class TableInfo:
    catalog: str
    schema: str
    table: str
    full_name: str


@pytest.fixture(scope="session")
def altertable_service() -> dict:
    missing = [
        v
        for v in (
            "ALTERTABLE_HOST",
            "ALTERTABLE_PORT",
            "ALTERTABLE_USERNAME",
            "ALTERTABLE_PASSWORD",
        )
        if v not in os.environ
    ]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not set: run scripts/test-flight.sh, which starts the server"
        )
    return {
        "host": os.environ["ALTERTABLE_HOST"],
        "port": int(os.environ["ALTERTABLE_PORT"]),
        "username": os.environ["ALTERTABLE_USERNAME"],
        "password": os.environ["ALTERTABLE_PASSWORD"],
        "tls": os.environ.get("ALTERTABLE_TLS", "false").lower() == "true",
        "catalog": os.environ.get("ALTERTABLE_CATALOG") or None,
        "schema": os.environ.get("ALTERTABLE_SCHEMA") or None,
    }


@pytest.fixture
def altertable_client(altertable_service):
    with Client(**altertable_service) as client:
        yield client


@pytest.fixture
def test_catalog(altertable_client):
    name = f"test_catalog_{uuid.uuid4().hex[:8]}"
    altertable_client.execute(f"ATTACH ':memory:' AS {name}")
    yield name
    altertable_client.execute(f"DETACH {name}")


@pytest.fixture
def test_schema(altertable_client, test_catalog):
    schema = f"test_schema_{uuid.uuid4().hex[:8]}"
    full_name = f"{test_catalog}.{schema}"
    altertable_client.execute(f"CREATE SCHEMA {full_name}")
    yield SchemaInfo(catalog=test_catalog, schema=schema, full_name=full_name)
    altertable_client.execute(f"DROP SCHEMA IF EXISTS {full_name} CASCADE")


@pytest.fixture
def test_table(altertable_client, test_schema):
    table = f"test_table_{uuid.uuid4().hex[:8]}"
    full_name = f"{test_schema.full_name}.{table}"
    altertable_client.execute(
        f"CREATE TABLE {full_name} (id INT, name VARCHAR, value INT)"
    )
    altertable_client.execute(
        f"INSERT INTO {full_name} (id, name, value) VALUES "
        "(1, 'Alice', 100), (2, 'Bob', 200), (3, 'Charlie', 300)"
    )
    yield TableInfo(
        catalog=test_schema.catalog,
        schema=test_schema.schema,
        table=table,
        full_name=full_name,
    )
    altertable_client.execute(f"DROP TABLE IF EXISTS {full_name}")
