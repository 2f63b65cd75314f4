"""Delta's table statements and time travel over `/query`, checked against delta-rs.

`OPTIMIZE`, `VACUUM`, `DESCRIBE HISTORY`, `RESTORE` and `SELECT … VERSION AS OF` /
`TIMESTAMP AS OF` / DuckDB's `AT (VERSION => …)` on a real server; what each leaves in
the table is read back with delta-rs (an independent reader), and every form stays inside
the caller's grants.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import deltalake
import pytest
from conftest import Client, ServerProcess, SqlError


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("lake")
    with ServerProcess(
        data=data,
        users=(("alice", "secret"), ("bob", "pw")),
        catalogs=("lakehouse", "other"),
        grants={"bob": ["other"]},
    ) as s:
        yield s


@pytest.fixture(scope="module")
def alice(server) -> Client:
    return Client(server)


@pytest.fixture(scope="module")
def bob(server) -> Client:
    return Client(server, "bob", "pw")


def table_path(server, name: str, catalog: str = "lakehouse") -> Path:
    return Path(server.data) / catalog / "main" / name


def sorted_rows(table: deltalake.DeltaTable) -> list[tuple]:
    columns = table.to_pyarrow_table().to_pylist()
    return sorted(tuple(r.values()) for r in columns)


def error(client: Client, statement: str) -> str:
    with pytest.raises(SqlError) as e:
        client.query(statement)
    return e.value.message


def make_versions(client: Client, name: str) -> None:
    """Version 0 creates; 1..4 insert one row each; 5 deletes one."""
    client.query(f"CREATE TABLE {name} (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
    for i, p in enumerate(["x", "y", "x", "x"], start=1):
        client.query(f"INSERT INTO {name} VALUES ('{p}', {i})")
    client.query(f"DELETE FROM {name} WHERE a = 2")


def test_every_version_reads_as_delta_rs_reads_it(server, alice):
    make_versions(alice, "tt")
    path = table_path(server, "tt")
    latest = deltalake.DeltaTable(path).version()
    assert latest == 5
    for v in range(latest + 1):
        expected = sorted_rows(deltalake.DeltaTable(path, version=v))
        for form in (f"VERSION AS OF {v}", f"AT (VERSION => {v})"):
            got = sorted(alice.rows(f"SELECT p, a FROM tt {form}"))
            assert got == expected, (v, form)
    # Qualified, aliased, and two versions of one table in one query.
    assert alice.rows(
        "SELECT count(*) FROM lakehouse.main.tt VERSION AS OF 4 AS old "
        "JOIN tt AT (VERSION => 2) new ON old.a = new.a"
    ) == [(2,)]
    assert alice.rows("SELECT tt.a FROM tt VERSION AS OF 1") == [(1,)]
    # Subqueries and CTEs see the old state too.
    assert alice.rows(
        "WITH o AS (SELECT a FROM tt VERSION AS OF 3) SELECT count(*) FROM tt WHERE a IN (SELECT a FROM o)"
    ) == [(2,)]


def test_timestamps_pick_the_latest_commit_at_or_before_them(server, alice):
    alice.query("CREATE TABLE ts (a INTEGER)")
    path = table_path(server, "ts")
    stamps = []
    for i in range(3):
        time.sleep(0.15)
        alice.query(f"INSERT INTO ts VALUES ({i})")
        time.sleep(0.15)
        history = deltalake.DeltaTable(path).history(1)
        stamps.append(history[0]["timestamp"])
    # Commits are >= 300 ms apart: half way between two is unambiguous, whichever clock
    # (commit info or the commit file's) a reader goes by.
    for i, ms in enumerate(stamps):
        between = datetime.fromtimestamp(ms / 1000, UTC) + timedelta(milliseconds=150)
        text = between.strftime("%Y-%m-%d %H:%M:%S.%f")
        rows = alice.rows(f"SELECT a FROM ts TIMESTAMP AS OF '{text}' ORDER BY a")
        assert rows == [(j,) for j in range(i + 1)], text
        rows = alice.rows(
            f"SELECT count(*) FROM ts AT (TIMESTAMP => '{between.isoformat()}')"
        )
        assert rows == [(i + 1,)], between
    first = datetime.fromtimestamp(
        deltalake.DeltaTable(path).history()[-1]["timestamp"] / 1000, UTC
    )
    message = error(alice, "SELECT * FROM ts TIMESTAMP AS OF '2020-01-01'")
    prefix = (
        'Invalid Input Error: table ts has no version as of "2020-01-01": its oldest '
        "readable version, 0, was written at "
    )
    assert message.startswith(prefix) and message.endswith(" UTC"), message
    written = datetime.strptime(
        message.removeprefix(prefix).removesuffix(" UTC"), "%Y-%m-%d %H:%M:%S.%f"
    ).replace(tzinfo=UTC)
    assert abs((written - first).total_seconds()) < 1, (written, first)
    assert error(alice, "SELECT * FROM ts TIMESTAMP AS OF 'soon'") == (
        'Conversion Error: invalid timestamp "soon" for TIMESTAMP AS OF: expected '
        "YYYY-MM-DD[ HH:MM:SS[.fff]] (UTC) or RFC 3339"
    )


def test_time_travel_errors_name_the_table_and_leave_it_alone(server, alice):
    make_versions(alice, "tte")
    assert (
        error(alice, "SELECT * FROM tte VERSION AS OF 6")
        == "Invalid Input Error: table tte has no version 6: its latest is 5"
    )
    assert (
        error(alice, "DELETE FROM tte VERSION AS OF 1")
        == "Binder Error: tte VERSION AS OF 1 can only be read: writes go to the table's latest version"
    )
    assert (
        error(alice, "INSERT INTO tte AT (VERSION => 1) VALUES ('x', 9)")
        == "Binder Error: tte VERSION AS OF 1 can only be read: writes go to the table's latest version"
    )
    alice.query("CREATE VIEW ttv AS SELECT * FROM tte")
    assert (
        error(alice, "SELECT * FROM ttv VERSION AS OF 1")
        == "Binder Error: VERSION AS OF 1 reads Delta tables; ttv is a view"
    )
    assert (
        error(alice, "SELECT * FROM missing VERSION AS OF 1")
        == "Catalog Error: Table with name missing does not exist!"
    )
    assert deltalake.DeltaTable(table_path(server, "tte")).version() == 5


def small_files(server, name: str) -> dict[str, int]:
    """Files per partition value, from delta-rs."""
    out: dict[str, int] = {}
    for f in deltalake.DeltaTable(table_path(server, name)).file_uris():
        part = Path(f).parent.name
        out[part] = out.get(part, 0) + 1
    return out


def test_optimize_compacts_the_chosen_partitions_and_changes_no_row(server, alice):
    alice.query("CREATE TABLE opt (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
    for i in range(6):
        alice.query(f"INSERT INTO opt VALUES ('x', {i}), ('y', {i}), ('z', {i})")
    path = table_path(server, "opt")
    before = sorted_rows(deltalake.DeltaTable(path))
    assert small_files(server, "opt") == {"p=x": 6, "p=y": 6, "p=z": 6}
    columns, rows = alice.query("OPTIMIZE opt WHERE p IN ('x', 'y')")
    assert columns == [
        "files_removed",
        "files_added",
        "partitions_compacted",
        "rows_rewritten",
        "version",
    ]
    assert rows == [[12, 2, 2, 12, 7]]
    assert small_files(server, "opt") == {"p=x": 1, "p=y": 1, "p=z": 6}
    table = deltalake.DeltaTable(path)
    assert sorted_rows(table) == before
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
    # Every partition; then nothing left to do (no commit).
    assert alice.rows("OPTIMIZE opt") == [(6, 1, 1, 6, 8)]
    assert alice.rows("OPTIMIZE TABLE opt") == [(0, 0, 0, 0, 8)]
    assert sorted_rows(deltalake.DeltaTable(path)) == before
    # Predicates on the partition column only, evaluated with its type.
    alice.query("CREATE TABLE optd (d DATE, a INTEGER) PARTITIONED BY (d)")
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        for a in range(2):
            alice.query(f"INSERT INTO optd VALUES (DATE '{day}', {a})")
    assert alice.rows("OPTIMIZE optd WHERE d >= DATE '2026-01-02'") == [(4, 2, 2, 4, 7)]
    assert small_files(server, "optd") == {
        "d=2026-01-01": 2,
        "d=2026-01-02": 1,
        "d=2026-01-03": 1,
    }


def test_optimize_refuses_what_it_cannot_do_and_commits_nothing(server, alice):
    alice.query("CREATE TABLE optbad (p VARCHAR, a INTEGER) PARTITIONED BY (p)")
    alice.query("CREATE TABLE optflat (a INTEGER)")
    alice.query("INSERT INTO optbad VALUES ('x', 1)")
    version = deltalake.DeltaTable(table_path(server, "optbad")).version()
    assert (
        error(alice, "OPTIMIZE optbad WHERE a = 1")
        == "Binder Error: OPTIMIZE optbad WHERE a = 1: the predicate may name only the partition column p"
    )
    assert (
        error(alice, "OPTIMIZE optbad WHERE p IN (SELECT p FROM optbad)")
        == "Binder Error: OPTIMIZE … WHERE takes a predicate on the partition column, without subqueries"
    )
    assert error(alice, "OPTIMIZE optbad ZORDER BY (a)") == (
        "Parser Error: OPTIMIZE … ZORDER BY is not supported: "
        "compaction keeps each file's row order"
    )
    assert error(alice, "OPTIMIZE optflat WHERE a = 1") == (
        "Not implemented Error: OPTIMIZE … WHERE needs a table partitioned by one column; "
        "optflat has none"
    )
    assert (
        error(alice, "OPTIMIZE nope")
        == "Catalog Error: Table with name nope does not exist!"
    )
    assert deltalake.DeltaTable(table_path(server, "optbad")).version() == version


def test_vacuum_keeps_the_retention_and_deletes_only_unread_files(server, alice):
    alice.query("CREATE TABLE vac (a INTEGER)")
    for i in range(3):
        alice.query(f"INSERT INTO vac VALUES ({i})")
    alice.query("OPTIMIZE vac")
    path = table_path(server, "vac")
    # A leftover of a write that never committed.
    orphan = path / "part-orphan.parquet"
    orphan.write_bytes(b"not a parquet file")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    assert error(alice, "VACUUM vac RETAIN 1 HOURS") == (
        "Invalid Input Error: VACUUM vac RETAIN 1 HOURS: a retention of 1 hours is below the "
        "table's delta.deletedFileRetentionDuration (168 hours): files younger than that may "
        "still be read by older versions or by writes in flight. Lower the property first "
        "(ALTER TABLE … SET TBLPROPERTIES) if you mean it"
    )
    # Within the default retention nothing is old enough.
    assert alice.rows("VACUUM vac") == []
    alice.query(
        "ALTER TABLE vac SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    assert len(deltalake.DeltaTable(path).file_uris()) == 1
    dry = [r[0] for r in alice.rows("VACUUM vac RETAIN 0 HOURS DRY RUN")]
    assert "part-orphan.parquet" in dry and len(dry) == 4, dry
    assert all((path / p).exists() for p in dry)
    done = [r[0] for r in alice.rows("VACUUM vac RETAIN 0 HOURS")]
    assert done == dry
    assert not any((path / p).exists() for p in dry)
    assert alice.rows("SELECT a FROM vac ORDER BY a") == [(0,), (1,), (2,)]
    assert sorted_rows(deltalake.DeltaTable(path)) == [(0,), (1,), (2,)]
    # The versions whose files are gone cannot be read any more, and say so.
    message = error(alice, "SELECT * FROM vac VERSION AS OF 2")
    prefix = "Invalid Input Error: table vac VERSION AS OF 2 cannot be read: its file "
    suffix = " was deleted by VACUUM (files removed longer ago than the retention are)"
    assert message.startswith(prefix) and message.endswith(suffix), message
    assert message.removeprefix(prefix).removesuffix(suffix) in done
    assert str(server.data) not in message
    # The latest version reads, and the current state as a version too.
    assert alice.rows("SELECT count(*) FROM vac VERSION AS OF 5") == [(3,)]


def test_history_lists_the_commits_newest_first(server, alice):
    make_versions(alice, "hist")
    alice.query("OPTIMIZE hist")
    columns, rows = alice.query("DESCRIBE HISTORY hist")
    assert columns == [
        "version",
        "timestamp",
        "operation",
        "operationParameters",
        "operationMetrics",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "engineInfo",
        "userMetadata",
    ]
    reference = deltalake.DeltaTable(table_path(server, "hist")).history()
    assert [r[0] for r in rows] == [6, 5, 4, 3, 2, 1, 0]
    assert [r[2] for r in rows] == [h["operation"] for h in reference]
    assert [r[2] for r in rows][:2] == ["OPTIMIZE", "DELETE"]
    metrics = json.loads(rows[0][4])
    assert metrics["numFilesRemoved"] >= 2
    assert json.loads(rows[0][9])["deltalite.source"] == "OPTIMIZE"
    assert [
        r[0] for r in alice.rows("DESCRIBE HISTORY lakehouse.main.hist LIMIT 2")
    ] == [6, 5]
    # `DESCRIBE history` alone still describes a table named history.
    assert (
        error(alice, "DESCRIBE history")
        == "Catalog Error: Table with name history does not exist!"
    )


def test_restore_makes_the_table_what_it_was(server, alice):
    make_versions(alice, "rest")
    path = table_path(server, "rest")
    expected = sorted_rows(deltalake.DeltaTable(path, version=2))
    columns, rows = alice.query("RESTORE TABLE rest TO VERSION AS OF 2")
    assert columns == ["version", "files_removed", "files_restored"]
    assert rows == [[6, 2, 1]]
    table = deltalake.DeltaTable(path)
    assert sorted_rows(table) == expected
    assert table.history(1)[0]["operation"] == "RESTORE"
    assert sorted(alice.rows("SELECT p, a FROM rest")) == expected
    # By time: the state after the fourth commit. TIMESTAMP AS OF goes by the commit
    # files' times (the protocol's, without in-commit timestamps), which on a loaded
    # machine can be milliseconds after the commit info's `timestamp` (a CI run restored
    # version 3 so): a time between version 4's file and version 5's.
    written = [
        (path / "_delta_log" / f"{v:020}.json").stat().st_mtime_ns // 1_000_000
        for v in (4, 5)
    ]
    ms = (written[0] + written[1]) // 2
    at = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    expected = sorted_rows(deltalake.DeltaTable(path, version=4))
    assert alice.rows(f"RESTORE rest TIMESTAMP AS OF '{at}'")[0][0] == 7
    assert sorted_rows(deltalake.DeltaTable(path)) == expected
    assert (
        error(alice, "RESTORE TABLE rest TO VERSION AS OF 40")
        == "Invalid Input Error: table rest has no version 40: its latest is 7"
    )
    assert error(alice, "RESTORE TABLE rest") == (
        "Parser Error: syntax error at end of input (Expected: VERSION AS OF n or "
        "TIMESTAMP AS OF '…', found: EOF)"
    )
    assert deltalake.DeltaTable(path).version() == 7


def test_scripts_mix_table_statements_with_sql(server, alice):
    alice.query("CREATE TABLE mix (a INTEGER)")
    rows = alice.rows(
        "INSERT INTO mix VALUES (1); INSERT INTO mix VALUES (2); OPTIMIZE mix; "
        "SELECT count(*) FROM mix VERSION AS OF 2"
    )
    assert rows == [(2,)]
    assert [r[2] for r in alice.rows("DESCRIBE HISTORY mix LIMIT 1")] == ["OPTIMIZE"]


def test_table_properties_for_maintenance_are_checked(server, alice):
    alice.query("CREATE TABLE props (a INTEGER)")
    alice.query("ALTER TABLE props SET TBLPROPERTIES ('deltalite.maintenance' = 'off')")
    alice.query(
        "ALTER TABLE props SET TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 30 days')"
    )
    config = deltalake.DeltaTable(table_path(server, "props")).metadata().configuration
    assert config["deltalite.maintenance"] == "off"
    assert config["delta.logRetentionDuration"] == "interval 30 days"
    assert error(
        alice,
        "ALTER TABLE props SET TBLPROPERTIES ('deltalite.maintenance' = 'sometimes')",
    ) == (
        "Invalid Input Error: table property deltalite.maintenance = 'sometimes': expected 'on' or 'off'"
    )
    assert error(
        alice,
        "ALTER TABLE props SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '7 days')",
    ) == (
        "Invalid Input Error: table property delta.deletedFileRetentionDuration = '7 days': "
        "expected an interval such as 'interval 7 days'"
    )
    assert error(
        alice, "ALTER TABLE props SET TBLPROPERTIES ('delta.appendOnly' = 'true')"
    ).startswith("Not implemented Error: ALTER TABLE SET TBLPROPERTIES")


@pytest.mark.parametrize(
    "statement",
    [
        "OPTIMIZE lakehouse.main.secret",
        "VACUUM lakehouse.main.secret DRY RUN",
        "DESCRIBE HISTORY lakehouse.main.secret",
        "RESTORE TABLE lakehouse.main.secret TO VERSION AS OF 0",
        "SELECT * FROM lakehouse.main.secret VERSION AS OF 0",
        "SELECT * FROM lakehouse.main.secret AT (TIMESTAMP => '2030-01-01')",
        "SELECT * FROM other.main.mine WHERE a IN (SELECT a FROM lakehouse.main.secret VERSION AS OF 1)",
        "WITH s AS (SELECT * FROM lakehouse.main.secret AT (VERSION => 1)) SELECT * FROM s",
        "SELECT 1; OPTIMIZE lakehouse.main.secret",
        # PIVOT reads its values by a query of its own when none are listed.
        "PIVOT lakehouse.main.secret ON a",
        "UNPIVOT lakehouse.main.secret ON a",
        "SELECT * FROM lakehouse.main.secret PIVOT (count(*) FOR a IN (1))",
        "SELECT * FROM other.main.mine PIVOT (count(*) FOR a IN (SELECT a FROM lakehouse.main.secret))",
        "WITH s AS (SELECT * FROM lakehouse.main.secret) PIVOT s ON a",
        "SELECT * FROM (PIVOT other.main.mine ON a) JOIN lakehouse.main.secret ON true",
        "SELECT * FROM lakehouse.main.secret USING SAMPLE 1",
        "SELECT * FROM other.main.mine, (FROM lakehouse.main.secret TABLESAMPLE 50%)",
        # COLUMNS(…) over a join, a subquery or a CTE plans its FROM to learn the columns.
        "SELECT COLUMNS(*) FROM other.main.mine JOIN lakehouse.main.secret USING (a)",
        "SELECT max(COLUMNS('a')) FROM (SELECT * FROM lakehouse.main.secret)",
        "WITH s AS (FROM lakehouse.main.secret) SELECT COLUMNS(*) FROM s",
        # `* RENAME` plans its FROM the same way to learn the columns.
        "SELECT * RENAME (a AS b) FROM lakehouse.main.secret",
        "SELECT * RENAME (a AS b) FROM other.main.mine JOIN lakehouse.main.secret USING (a)",
        "WITH s AS (FROM lakehouse.main.secret) SELECT * RENAME (a AS b) FROM s",
        "SELECT * RENAME (a AS b) FROM (SELECT * FROM lakehouse.main.secret)",
        "EXPLAIN SELECT * RENAME (a AS b) FROM lakehouse.main.secret",
        "SELECT 1; SELECT * EXCLUDE (a) RENAME (a AS b) FROM lakehouse.main.secret",
        # SUMMARIZE plans the query it summarizes on its own first.
        "SUMMARIZE lakehouse.main.secret",
        "SUMMARIZE SELECT * FROM other.main.mine JOIN lakehouse.main.secret USING (a)",
        # A correlated aggregate is computed over the outer query's values, joined back.
        "SELECT (SELECT count(*) FROM lakehouse.main.secret s WHERE s.a < m.a) FROM other.main.mine m",
        "SELECT * FROM other.main.mine m WHERE (SELECT max(s.a) FROM lakehouse.main.secret s WHERE s.a <> m.a) > 0",
        "EXPLAIN SELECT (SELECT count(*) FROM lakehouse.main.secret s WHERE s.a < m.a) FROM other.main.mine m",
        "WITH s AS (FROM lakehouse.main.secret) SELECT (SELECT count(*) FROM s WHERE s.a < m.a) FROM other.main.mine m",
        "SELECT 1; SELECT (SELECT max(s.a) FROM lakehouse.main.secret s WHERE s.a > m.a) FROM other.main.mine m",
        # ANY/ALL of a subquery, its column renamed; IN (VALUES …) beside one.
        "SELECT * FROM other.main.mine WHERE a > ALL (SELECT a FROM lakehouse.main.secret)",
        "SELECT a = ANY (SELECT a FROM lakehouse.main.secret) FROM other.main.mine",
        "SELECT * FROM other.main.mine WHERE a IN (VALUES (1)) OR a IN (SELECT a FROM lakehouse.main.secret)",
        # A lambda's list, a comprehension's, a reduction's initial value may be a
        # subquery (its body may not); GLOB and COLLATE are spliced and rewritten.
        "SELECT list_transform((SELECT list(a) FROM lakehouse.main.secret), lambda x: x + 1)",
        "SELECT [x FOR x IN (SELECT list(a) FROM lakehouse.main.secret) IF x > 0]",
        "EXPLAIN SELECT list_reduce([a], lambda s, x: s + x, (SELECT max(a) FROM lakehouse.main.secret)) FROM other.main.mine",
        "WITH s AS (SELECT list_filter([a], x -> x > 0) AS l FROM lakehouse.main.secret) SELECT * FROM s",
        "SELECT 1; SELECT [x * i FOR x, i IN [a] IF i > 0] FROM lakehouse.main.secret",
        "SELECT * FROM other.main.mine WHERE 'a' GLOB 'a*' AND a IN (SELECT a FROM lakehouse.main.secret)",
        "SELECT a FROM lakehouse.main.secret ORDER BY CAST(a AS VARCHAR) COLLATE NOCASE",
        # A view's comment is stored with the view.
        "COMMENT ON VIEW lakehouse.main.secret IS 'mine now'",
        "ALTER TABLE lakehouse.main.secret RENAME COLUMN a TO b",
    ],
)
def test_every_form_stays_inside_the_grants(server, alice, bob, statement):
    if not table_path(server, "secret").exists():
        alice.query("CREATE TABLE lakehouse.main.secret (a INTEGER)")
        alice.query("INSERT INTO lakehouse.main.secret VALUES (1), (2)")
        bob.query("CREATE TABLE other.main.mine (a INTEGER)")
    version = deltalake.DeltaTable(table_path(server, "secret")).version()
    assert (
        error(bob, statement)
        == "Catalog Error: Catalog with name lakehouse does not exist!"
    )
    assert deltalake.DeltaTable(table_path(server, "secret")).version() == version
