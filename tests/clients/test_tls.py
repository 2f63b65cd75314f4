"""The real clients over TLS against a real `deltalite serve --tls-cert … --tls-key …`
(tests/clients/serve_and_run.py starts it with a self-signed certificate for localhost and
127.0.0.1): `requests` verifying the certificate, and the real dlt-altertable 0.2.2 with its
default, `tls=true`, both its HTTP layer and a whole pipeline configured from the
`ALTERTABLE_*` environment as a user's would be.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import dlt
import pytest
import requests
from dlt_altertable.api import execute_sql
from dlt_altertable.configuration import AltertableClientConfiguration

from dlt_altertable import altertable

CATALOG = "lakehouse"


@pytest.fixture(scope="module")
def tls() -> tuple[str, str]:
    url, ca = os.environ.get("DELTALITE_TLS_URL"), os.environ.get("DELTALITE_TLS_CA")
    if not url or not ca:
        raise RuntimeError(
            "DELTALITE_TLS_URL / DELTALITE_TLS_CA are not set: run these tests with "
            "scripts/test-clients.sh"
        )
    assert url.startswith("https://127.0.0.1:"), url
    return url, ca


def test_requests_verifies_the_certificate(tls):
    url, ca = tls
    r = requests.post(
        f"{url}/query",
        json={"statement": "SELECT 'over tls' AS via"},
        auth=("alice", "secret"),
        headers={"X-Request-Id": "tls-test-1"},
        verify=ca,
        timeout=30,
    )
    assert r.status_code == 200
    assert r.text.splitlines()[2] == '["over tls"]'
    assert r.headers["X-Request-Id"] == "tls-test-1"
    # The same request with the default CA bundle: the certificate is not trusted.
    with pytest.raises(requests.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        requests.get(f"{url}/livez", timeout=30)
    # Plain HTTP on the TLS port is not served.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url.replace("https://", "http://") + "/livez", timeout=30)


@pytest.fixture
def trusting(tls, monkeypatch) -> tuple[str, int]:
    """`requests` (under dlt-altertable) trusts the server's certificate, as a user's
    environment would with a private CA; the host and port of the TLS server."""
    url, ca = tls
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca)
    parts = urlsplit(url)
    return "localhost", parts.port


def test_dlt_altertable_api_defaults_to_tls(trusting):
    host, port = trusting
    config = AltertableClientConfiguration(
        host=host, port=port, catalog=CATALOG, username="alice", password="secret"
    )
    config.on_resolved()
    assert config.tls is True
    assert config.base_url == f"https://localhost:{port}"
    assert execute_sql(config, "SELECT 40 + 2 AS answer") == [[42]]


def test_a_dlt_pipeline_loads_over_tls_from_the_altertable_environment(
    trusting, monkeypatch, tmp_path
):
    host, port = trusting
    for name, value in {
        "ALTERTABLE_HOST": host,
        "ALTERTABLE_PORT": str(port),
        "ALTERTABLE_CATALOG": CATALOG,
        "ALTERTABLE_USERNAME": "alice",
        "ALTERTABLE_PASSWORD": "secret",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ALTERTABLE_TLS", raising=False)
    pipeline = dlt.pipeline(
        pipeline_name="over_tls",
        pipelines_dir=str(tmp_path),
        destination=altertable(),
        dataset_name="tls_ds",
    )
    rows = [{"id": 1, "name": "ann"}, {"id": 2, "name": "bo"}]
    pipeline.run(rows, table_name="people", write_disposition="merge", primary_key="id")
    pipeline.run(
        [{"id": 2, "name": "bob"}, {"id": 3, "name": "cy"}],
        table_name="people",
        write_disposition="merge",
        primary_key="id",
    )
    config = AltertableClientConfiguration(
        host=host, port=port, catalog=CATALOG, username="alice", password="secret"
    )
    config.on_resolved()
    assert execute_sql(
        config, "SELECT id, name FROM lakehouse.tls_ds.people ORDER BY id"
    ) == [[1, "ann"], [2, "bob"], [3, "cy"]]
