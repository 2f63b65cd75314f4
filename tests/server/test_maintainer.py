"""The background maintainer of a real `deltalite serve`, with a one-second interval.

It compacts partitions that hold many small files, leaves tables below the threshold and
tables that opted out alone, vacuums files no version within the retention reads, shows
up in `DESCRIBE HISTORY` and `/metrics`, and loses no write that races it: upserts
running the whole time end with exactly the rows a model of them holds (delta-rs reads
the table).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.request
from pathlib import Path

import deltalake
import pytest
from conftest import Client, ServerProcess

ARGS = [
    "--maintenance",
    "on",
    "--maintenance-interval-secs",
    "1",
    "--maintenance-min-small-files",
    "4",
    "--maintenance-vacuum-interval-secs",
    "1",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("lake")
    with ServerProcess(data=data, args=ARGS) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> Client:
    return Client(server)


def path_of(server, name: str) -> Path:
    return Path(server.data) / "lakehouse" / "main" / name


def files_per_partition(server, name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in deltalake.DeltaTable(path_of(server, name)).file_uris():
        part = Path(f).parent.name
        out[part] = out.get(part, 0) + 1
    return out


def rows(server, name: str) -> list[tuple]:
    table = deltalake.DeltaTable(path_of(server, name)).to_pyarrow_table()
    return sorted(tuple(r.values()) for r in table.to_pylist())


def maintainer_commits(client: Client, name: str) -> list[dict]:
    out = []
    for row in client.rows(f"DESCRIBE HISTORY {name}"):
        meta = json.loads(row[9]) if row[9] else {}
        if meta.get("deltalite.maintainer") == "compact":
            out.append({"version": row[0], "operation": row[2]})
    return out


def wait_for(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def metrics(server) -> str:
    request = urllib.request.Request(
        f"{server.base}/metrics",
        headers={"Authorization": Client(server).auth},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_small_files_are_compacted_and_opted_out_tables_are_not(server, client):
    client.query("CREATE TABLE quiet (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
    client.query(
        "ALTER TABLE quiet SET TBLPROPERTIES ('deltalite.maintenance' = 'off')"
    )
    client.query("CREATE TABLE few (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
    client.query("CREATE TABLE busy (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
    for i in range(6):
        client.query(f"INSERT INTO quiet VALUES ('x', {i})")
        client.query(f"INSERT INTO busy VALUES ('x', {i}), ('y', {i})")
    for i in range(3):
        client.query(f"INSERT INTO few VALUES ('x', {i})")
    before = rows(server, "busy")
    # Passes may land between the inserts too: what holds is that no partition keeps
    # the threshold's worth of small files.
    wait_for(
        lambda: (
            maintainer_commits(client, "busy")
            and max(files_per_partition(server, "busy").values()) < 4
        )
    )
    assert set(files_per_partition(server, "busy")) == {"p=x", "p=y"}
    assert rows(server, "busy") == before
    commits = maintainer_commits(client, "busy")
    assert commits and {c["operation"] for c in commits} == {"OPTIMIZE"}
    # Two more passes: nothing else happens to the others.
    passes = metric(metrics(server), "deltalite_maintenance_passes_total")
    wait_for(
        lambda: (
            metric(metrics(server), "deltalite_maintenance_passes_total") >= passes + 2
        )
    )
    assert files_per_partition(server, "quiet") == {"p=x": 6}
    assert deltalake.DeltaTable(path_of(server, "quiet")).version() == 7
    assert files_per_partition(server, "few") == {"p=x": 3}
    assert deltalake.DeltaTable(path_of(server, "few")).version() == 3
    text = metrics(server)
    # Each of busy's partitions got 6 files; a pass may have merged the first 4 before
    # the last 2 arrived (leaving 3, below the threshold): at least 4 per partition.
    assert metric(text, "deltalite_maintenance_files_compacted_total") >= 8
    assert metric(text, "deltalite_maintenance_tables") >= 3
    log = server.log_text()
    assert re.search(r"maintenance: compacted table=lakehouse\.main\.busy", log), log[
        -2000:
    ]


def test_vacuum_removes_unread_files_after_the_retention_only(server, client):
    client.query("CREATE TABLE keep (a INTEGER)")
    client.query("CREATE TABLE sweep (a INTEGER)")
    client.query(
        "ALTER TABLE sweep SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 hours')"
    )
    for name in ("keep", "sweep"):
        for i in range(5):
            client.query(f"INSERT INTO {name} VALUES ({i})")
    # Orphans two hours old: past sweep's retention, within keep's 7 days.
    two_hours_ago = time.time() - 2 * 3600
    for name in ("keep", "sweep"):
        orphan = path_of(server, name) / "part-orphan.parquet"
        orphan.write_bytes(b"left by a crashed write")
        os.utime(orphan, (two_hours_ago, two_hours_ago))
    wait_for(lambda: not (path_of(server, "sweep") / "part-orphan.parquet").exists())
    # The compacted-away files are younger than the hour: still there.
    wait_for(lambda: maintainer_commits(client, "sweep"))
    # Every file a commit added is still there: the ones compaction removed are younger
    # than the hour.
    added = set()
    for commit in sorted((path_of(server, "sweep") / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added.add(action["add"]["path"])
    on_disk = {p.name for p in path_of(server, "sweep").glob("*.parquet")}
    assert on_disk == added and len(added) > 5, (on_disk, added)
    assert (path_of(server, "keep") / "part-orphan.parquet").exists()
    assert rows(server, "sweep") == [(i,) for i in range(5)]
    assert metric(metrics(server), "deltalite_maintenance_files_vacuumed_total") >= 1


def test_upserts_racing_the_maintainer_lose_nothing_and_resurrect_nothing(
    server, client
):
    client.query(
        "CREATE TABLE race (p VARCHAR, k INTEGER, v INTEGER) PARTITIONED BY (p)"
    )
    model: dict[tuple[str, int], int] = {}
    lock = threading.Lock()
    failures: list[str] = []

    def writer(w: int) -> None:
        c = Client(server)
        for i in range(20):
            p = "ab"[i % 2]
            keys = [(p, (w * 7 + i * 3 + j) % 20) for j in range(3)]
            values = ", ".join(f"('{kp}', {k}, {w * 1000 + i})" for kp, k in keys)
            statement = (
                f"INSERT INTO race VALUES {values} "
                "ON CONFLICT (p, k) DO UPDATE SET v = excluded.v"
            )
            try:
                with lock:
                    # One writer at a time, so the model knows the order; the maintainer
                    # still races every one of them.
                    c.query(statement)
                    for key in keys:
                        model[key] = w * 1000 + i
                    if i % 5 == 4:
                        gone = keys[0]
                        c.query(
                            f"DELETE FROM race WHERE p = '{gone[0]}' AND k = {gone[1]}"
                        )
                        model.pop(gone, None)
            except Exception as e:  # noqa: BLE001 (reported below with the statement)
                failures.append(f"{statement}: {e}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    expected = sorted((p, k, v) for (p, k), v in model.items())
    assert rows(server, "race") == expected
    # The maintainer did run on this table while it was written, and after.
    wait_for(lambda: maintainer_commits(client, "race"))
    wait_for(lambda: max(files_per_partition(server, "race").values()) < 4)
    assert rows(server, "race") == expected
    assert sorted(client.rows("SELECT p, k, v FROM race")) == expected


def test_two_servers_on_one_root_compact_the_same_files_once(tmp_path):
    """Two maintainers see one partition's small files at the same moment (the table
    turns maintenance on after its writes): one commits the compaction, the other finds
    nothing left to do or loses the commit race. Never two OPTIMIZE commits over the same
    files, never duplicated rows."""
    data = tmp_path / "lake"
    with (
        ServerProcess(data=data, args=ARGS) as a,
        ServerProcess(data=data, args=ARGS) as b,
    ):
        ca, cb = Client(a), Client(b)
        ca.query("CREATE TABLE shared (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
        ca.query(
            "ALTER TABLE shared SET TBLPROPERTIES ('deltalite.maintenance' = 'off')"
        )
        for i in range(8):
            (ca if i % 2 else cb).query(f"INSERT INTO shared VALUES ('x', {i})")
        before = rows(a, "shared")
        passes = {
            s: metric(metrics(s), "deltalite_maintenance_passes_total") for s in (a, b)
        }
        cb.query(
            "ALTER TABLE shared SET TBLPROPERTIES ('deltalite.maintenance' = 'on')"
        )
        wait_for(lambda: files_per_partition(a, "shared") == {"p=x": 1})
        # Both maintainers ran at least twice more since: each saw the table after the
        # switch.
        for s in (a, b):
            wait_for(
                lambda s=s: (
                    metric(metrics(s), "deltalite_maintenance_passes_total")
                    >= passes[s] + 3
                )
            )
        commits = maintainer_commits(ca, "shared")
        assert commits == [{"version": 11, "operation": "OPTIMIZE"}], commits
        compacted = [
            metric(metrics(s), "deltalite_maintenance_files_compacted_total")
            for s in (a, b)
        ]
        assert sorted(compacted) == [0, 8], compacted
        assert rows(a, "shared") == before == [("x", i) for i in range(8)]
        assert sorted(cb.rows("SELECT p, a FROM shared")) == before
