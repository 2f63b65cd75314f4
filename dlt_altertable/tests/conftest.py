"""Fixtures: a real `deltalite serve` process on a temp data root and an ephemeral port."""

import json
import os
import socket
import sys
import uuid
from pathlib import Path

import dlt
import pytest
import requests

from dlt_altertable import altertable

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "harness"))
from server_process import ServerProcess  # noqa: E402

USER, PASSWORD, CATALOG = "dlt", "s3cret", "lakehouse"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, host: str, port: int, data: str = "") -> None:
        self.host, self.port = host, port
        self.data = data  # the data root: <data>/<catalog>/<schema>/<table> are Delta tables
        self.url = f"http://{host}:{port}"
        self.user, self.password, self.catalog = USER, PASSWORD, CATALOG

    def query(self, statement: str) -> list[dict]:
        """Run SQL through /query and return rows as dicts; raise on an error line."""
        r = requests.post(
            self.url + "/query",
            json={"statement": statement, "catalog": self.catalog},
            auth=(self.user, self.password),
            timeout=(10, 300),
        )
        r.raise_for_status()
        lines = [json.loads(line) for line in r.text.splitlines() if line.strip()]
        for line in lines:
            if isinstance(line, dict) and "error" in line:
                raise RuntimeError(line["error"])
        names = [c["name"] for c in lines[1]]
        return [dict(zip(names, row, strict=True)) for row in lines[2:]]

    def columns(self, statement: str) -> list[dict]:
        r = requests.post(
            self.url + "/query",
            json={"statement": statement, "catalog": self.catalog},
            auth=(self.user, self.password),
            timeout=(10, 300),
        )
        lines = [json.loads(line) for line in r.text.splitlines() if line.strip()]
        if isinstance(lines[1], dict):
            raise RuntimeError(lines[1])
        return lines[1]

    def table_exists(self, schema: str, table: str) -> bool:
        try:
            self.query(f'SELECT * FROM "{self.catalog}"."{schema}"."{table}" LIMIT 1')
            return True
        except RuntimeError:
            return False


@pytest.fixture(scope="session")
def server():
    try:
        process = ServerProcess(users=((USER, PASSWORD),), catalogs=(CATALOG,))
    except (FileNotFoundError, RuntimeError) as e:
        pytest.fail(str(e))
    host, port = process.addr
    yield Server(host, port, process.data)
    process.stop()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith(("ALTERTABLE_", "DESTINATION__", "LOAD__", "NORMALIZE__")):
            monkeypatch.delenv(key)
    # no retries delay surprises: dlt retries jobs immediately in the load loop
    monkeypatch.setenv("RUNTIME__LOG_LEVEL", "WARNING")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def dataset() -> str:
    return "ds_" + uuid.uuid4().hex[:10]


def make_destination(srv, dataset_name: str, host: str = None, port: int = None, **kw):
    return altertable(
        host=host or srv.host,
        port=port or srv.port,
        tls=False,
        catalog=srv.catalog,
        dataset_name=dataset_name,
        username=srv.user,
        password=srv.password,
        **{"retry_backoff": 0.0, **kw},
    )


@pytest.fixture
def make_pipeline(server, dataset, tmp_path):
    def _make(name: str = None, destination=None, pipelines_dir: str = None, **dest_kw):
        return dlt.pipeline(
            pipeline_name=name or "p_" + uuid.uuid4().hex[:8],
            pipelines_dir=pipelines_dir or str(tmp_path / "pipelines"),
            destination=destination or make_destination(server, dataset, **dest_kw),
        )

    return _make


@pytest.fixture
def proxy(server):
    from proxy import FaultProxy

    p = FaultProxy(server.url)
    yield p
    p.close()


def fq(srv, dataset_name: str, table: str) -> str:
    return f'"{srv.catalog}"."{dataset_name}"."{table}"'
