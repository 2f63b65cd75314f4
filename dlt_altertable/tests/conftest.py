"""Fixtures: a real `deltalite serve` process on a temp data root and an ephemeral port."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import dlt
import pytest
import requests

from dlt_altertable import altertable

REPO_ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD, CATALOG = "dlt", "s3cret", "lakehouse"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
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
    binary = os.environ.get("DELTALITE_BIN") or str(REPO_ROOT / "target" / "debug" / "deltalite")
    if not os.path.exists(binary):
        pytest.fail(
            f"server binary {binary} not found: run `cargo build -p deltalite-cli` or set"
            " DELTALITE_BIN"
        )
    data = tempfile.mkdtemp(prefix="dlt-altertable-lake-")
    port = _free_port()
    log = open(os.path.join(data, "server.log"), "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            binary,
            "serve",
            "--data",
            os.path.join(data, "root"),
            "--listen",
            f"127.0.0.1:{port}",
            "--users",
            f"{USER}:{PASSWORD}",
            "--catalogs",
            CATALOG,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    srv = Server("127.0.0.1", port)
    deadline = time.time() + 60
    while True:
        if proc.poll() is not None:
            log.flush()
            pytest.fail("deltalite serve exited: " + Path(data, "server.log").read_text()[-3000:])
        try:
            requests.get(srv.url + "/healthz", timeout=1)
            break
        except requests.RequestException:
            if time.time() > deadline:
                proc.kill()
                pytest.fail("deltalite serve did not start within 60 s")
            time.sleep(0.1)
    yield srv
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    shutil.rmtree(data, ignore_errors=True)


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
