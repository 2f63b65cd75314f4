"""The real PyPI dlt-altertable 0.2.2's own HTTP layer (`dlt_altertable.api`) against a real
`deltalite serve` (tests/clients/serve_and_run.py).

The dlt pipelines themselves run in tests/dlt_differential; this file pins down what one
statement through the client's `execute_sql` reads back, where a pipeline would only show a
symptom several steps later (a restored schema with a renamed table).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest
from dlt_altertable.api import execute_sql, post_query
from dlt_altertable.configuration import AltertableClientConfiguration

CATALOG = "lakehouse"


@pytest.fixture(scope="module")
def config() -> AltertableClientConfiguration:
    base = os.environ.get("DELTALITE_URL")
    if not base:
        raise RuntimeError(
            "DELTALITE_URL is not set: run these tests with scripts/test-clients.sh"
        )
    url = urlsplit(base)
    config = AltertableClientConfiguration(
        host=url.hostname,
        port=url.port,
        tls=False,
        catalog=CATALOG,
        username="alice",
        password="secret",
    )
    config.on_resolved()
    return config


# dlt names a child table `parent▶child`. Without a charset in the response's Content-Type,
# `requests` guesses the body's encoding from its bytes, and for these bodies it guesses a
# single-byte code page: `▶` came back as `â–¶` and a restored schema named a table that
# does not exist. Each string here was misread that way; the plain-ASCII one is the control.
@pytest.mark.parametrize(
    "text",
    ["events▶tags", "events▶tags▶items", "café", "plain"],
)
def test_execute_sql_reads_non_ascii_text_back_unchanged(config, text):
    literal = text.replace("'", "''")
    assert execute_sql(config, f"SELECT '{literal}' AS name") == [[text]]


def test_query_response_declares_utf8(config):
    response = post_query(config, "SELECT 'events▶tags' AS name")
    assert response.headers["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert response.encoding == "utf-8"
