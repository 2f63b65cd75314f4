"""`deltalite serve` on an Azure Blob Storage data root (`az://`), against Azurite
(harness/azurite.py): SQL and HTTP writes, reads, and two servers on one root committing
to one table at once; every acknowledged write is in the table once."""

from __future__ import annotations

import base64
import json
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient
from conftest import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from azurite import Azurite
from server_process import ServerProcess

CONTAINER = "lake"
AUTH = "Basic " + base64.b64encode(b"alice:secret").decode()


@pytest.fixture(scope="module")
def azurite():
    with Azurite() as emulator:
        BlobServiceClient.from_connection_string(
            emulator.connection_string()
        ).create_container(CONTAINER)
        yield emulator


def serve(azurite: Azurite, root: str, args: list[str] | None = None) -> ServerProcess:
    return ServerProcess(
        data=f"az://{CONTAINER}/{root}",
        storage_options=Azurite.storage_options(),
        env=azurite.env(),
        args=args,
    )


def upsert(server: ServerProcess, table: str, csv: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{server.base}/upsert?catalog=lakehouse&schema=main&table={table}&primary_key=id",
        data=csv.encode(),
        headers={"Authorization": AUTH, "Content-Type": "text/csv"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_sql_and_upserts_on_an_azure_root(azurite):
    with serve(azurite, "sql") as server:
        client = Client(server)
        client.query("CREATE TABLE lakehouse.main.t AS SELECT 1 AS id, 'x' AS v")
        assert upsert(server, "t", "id,v\n1,y\n2,z\n") == (
            200,
            {
                "ok": True,
                "version": 1,
                "rows": 2,
                "created": False,
                "idempotent_replay": False,
            },
        )
        client.query("DELETE FROM lakehouse.main.t WHERE id = 2")
        assert client.rows("SELECT id, v FROM lakehouse.main.t ORDER BY id") == [
            (1, "y")
        ]
        assert client.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ) == [("t",)]
    # What a restarted server sees is what the store holds.
    with serve(azurite, "sql") as server:
        assert Client(server).rows("SELECT id, v FROM lakehouse.main.t") == [(1, "y")]


def test_two_servers_race_commits_to_one_table_and_lose_nothing(azurite):
    with serve(azurite, "race") as first, serve(azurite, "race") as second:
        Client(first).query("CREATE TABLE lakehouse.main.r (id BIGINT, w VARCHAR)")
        acked: list[tuple[int, int]] = []
        failures: list[tuple[int, dict]] = []
        lock = threading.Lock()

        def writer(n: int) -> None:
            server = (first, second)[n % 2]
            for i in range(6):
                key = n * 100 + i
                # A lost race is a 503 to retry, never a silent loss.
                for _ in range(20):
                    status, body = upsert(server, "r", f"id,w\n{key},w{n}\n")
                    if status != 503:
                        break
                with lock:
                    if status == 200:
                        acked.append((key, body["version"]))
                    else:
                        failures.append((status, body))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert len(acked) == 24
        # One commit per acknowledged write: no two writes got the same version.
        assert sorted(v for _, v in acked) == list(range(1, 25))
        client = Client(second)
        assert client.rows("SELECT id FROM lakehouse.main.r ORDER BY id") == [
            (k,) for k in sorted(k for k, _ in acked)
        ]
        _, history = client.query("DESCRIBE HISTORY lakehouse.main.r")
        assert len(history) == 25
        # The servers did race: a commit lost to the other server's and was re-planned
        # (each server serializes its own writes to a table, so only the other can win).
        logs = first.log_text() + second.log_text()
        assert "concurrent commit touched read partitions; re-planning" in logs


def test_tables_with_deletion_vectors_are_read_from_the_store(azurite):
    """Upserts and a DELETE mark rows in vectors on the store; the server's scan of files
    with vectors (`sql/vector_scan.rs`, each vector a row selection) reads them through
    the session's store and sees exactly the live rows, selective or whole."""
    with serve(azurite, "dv", ["--deletion-vectors", "on"]) as server:
        client = Client(server)
        rows = "".join(f"{i},a\n" for i in range(2000))
        assert upsert(server, "t", "id,v\n" + rows)[0] == 200
        assert (
            upsert(
                server, "t", "id,v\n" + "".join(f"{i},b\n" for i in range(0, 2000, 50))
            )[0]
            == 200
        )
        client.query("DELETE FROM lakehouse.main.t WHERE id % 7 = 3")
        model = {i: ("b" if i % 50 == 0 else "a") for i in range(2000) if i % 7 != 3}
        every = client.rows("SELECT id, v FROM lakehouse.main.t ORDER BY id")
        assert every == sorted(model.items())
        selective = "SELECT id, v FROM lakehouse.main.t WHERE id IN (3, 50, 51, 1999) ORDER BY id"
        assert client.rows(selective) == [(50, "b"), (51, "a"), (1999, "a")]
        scans = client.scans(selective)
        assert any("__delta_rs" not in line for line in scans), scans
