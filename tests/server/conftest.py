"""A real `deltalite serve` per test module, and a minimal client for its `/query`."""

from __future__ import annotations

import base64
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess


class SqlError(Exception):
    """The server answered a SQL error line; `message` is its text."""

    def __init__(self, message: str, status: int = 200):
        super().__init__(message)
        self.message = message
        self.status = status


class Client:
    def __init__(
        self, server: ServerProcess, user: str = "alice", password: str = "secret"
    ):
        self.base = server.base
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.auth = f"Basic {token}"

    def query(self, statement: str, **fields) -> tuple[list[str], list[list]]:
        """Run `statement`; (column names, rows), or `SqlError`."""
        body = json.dumps({"statement": statement, **fields}).encode()
        request = urllib.request.Request(
            f"{self.base}/query",
            data=body,
            headers={"Authorization": self.auth, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                lines = [
                    json.loads(line) for line in response.read().splitlines() if line
                ]
        except urllib.error.HTTPError as e:
            raise SqlError(e.read().decode(errors="replace"), e.code) from None
        for line in lines:
            if isinstance(line, dict) and "error" in line:
                raise SqlError(str(line["error"]))
        columns = [c["name"] for c in lines[1]]
        return columns, [row for row in lines[2:]]

    def query_text(self, statement: str, **fields) -> str:
        """The body `/query` answers for `statement` (`fields`: `format`, …)."""
        body = json.dumps({"statement": statement, **fields}).encode()
        request = urllib.request.Request(
            f"{self.base}/query",
            data=body,
            headers={"Authorization": self.auth, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.read().decode()

    def upsert(self, query: str, rows: list[dict]) -> tuple[int, dict | str]:
        """POST `rows` as NDJSON to `/upsert?{query}`: (status, the JSON summary, or an
        error's text)."""
        body = "\n".join(json.dumps(r) for r in rows).encode()
        request = urllib.request.Request(
            f"{self.base}/upsert?{query}",
            data=body,
            headers={
                "Authorization": self.auth,
                "Content-Type": "application/x-ndjson",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def rows(self, statement: str) -> list[tuple]:
        return [tuple(r) for r in self.query(statement)[1]]

    def scans(self, statement: str) -> list[str]:
        """The `DataSourceExec` lines of `EXPLAIN statement`'s physical plan."""
        _, plan = self.query(f"EXPLAIN {statement}")
        return [
            line
            for row in plan
            for cell in row
            for line in str(cell).splitlines()
            if "DataSourceExec" in line
        ]

    def count(self, statement: str) -> int:
        (value,) = self.rows(statement)[0]
        return int(value)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("lake")
    with ServerProcess(data=data) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> Client:
    return Client(server)
