"""SQL writes whose subqueries name a staged batch hold the batch's keys in memory, not the
target's rows (`crates/server/src/sql/physical/join_order.rs`).

The shape is dlt's child-table delete, as the real `dlt-altertable` 0.2.2 sends it after a
nested merge: `DELETE FROM child WHERE "_dlt_root_id" IN (SELECT "_dlt_id" FROM staged
roots) AND "_dlt_id" NOT IN (SELECT "_dlt_id" FROM staged children)`. Built on the target
side, the hash tables held every column of every child row and the statement failed with
"Resources exhausted" (2M roots in the default 1 GiB pool; here 250,000 roots in a 128 MiB
pool, where the old plan asked for more and this one needs under half). Built on the
subqueries' side, it runs in the same pool.
"""

from __future__ import annotations

import pytest
from conftest import Client, SqlError
from server_process import ServerProcess

ROOTS = 250_000
POOL_MB = 128
# children j = 2 .. 2 * ROOTS + 1, two per root; the staged batch lacks those with
# j % 10 = 3, which the statement must delete
CHILDREN = 2 * ROOTS
MISSING = sum(1 for j in range(2, CHILDREN + 2) if j % 10 == 3)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    data = tmp_path_factory.mktemp("lake")
    with ServerProcess(data=data, args=["--query-memory-mb", str(POOL_MB)]) as server:
        client = Client(server)
        client.query("CREATE SCHEMA staging")
        client.query(
            "CREATE TABLE events AS SELECT substr(md5(CAST(i AS VARCHAR)), 1, 14) AS"
            f" _dlt_id, i AS id FROM generate_series(1, {ROOTS}) AS t(i)"
        )
        client.query(
            "CREATE TABLE tags AS SELECT 'k' || CAST(j % 7 AS VARCHAR) AS k, j AS v,"
            " substr(md5(CAST(j / 2 AS VARCHAR)), 1, 14) AS _dlt_root_id,"
            " substr(md5(CAST(j / 2 AS VARCHAR)), 1, 14) AS _dlt_parent_id,"
            " j % 2 AS _dlt_list_idx,"
            " substr(md5('c' || CAST(j AS VARCHAR)), 1, 14) AS _dlt_id"
            f" FROM generate_series(2, {CHILDREN + 1}) AS t(j)"
        )
        client.query("CREATE TABLE staging.events AS SELECT * FROM events")
        client.query(
            "CREATE TABLE staging.tags AS SELECT * FROM tags WHERE v % 10 <> 3"
        )
        yield client


def history(client: Client, table: str) -> list[tuple[int, str]]:
    """(version, operation) of every commit, newest first."""
    return [(r[0], r[2]) for r in client.rows(f"DESCRIBE HISTORY {table}")]


def test_child_table_delete_runs_in_a_pool_the_target_does_not_fit(lake):
    predicate = (
        '"_dlt_root_id" IN (SELECT "_dlt_id" FROM staging.events)'
        ' AND "_dlt_id" NOT IN (SELECT "_dlt_id" FROM staging.tags)'
    )
    # the read of the same predicate first: a query plans its joins the same way
    assert lake.count(f"SELECT count(*) FROM tags WHERE {predicate}") == MISSING
    before = history(lake, "tags")

    assert lake.rows(f"DELETE FROM tags WHERE {predicate}") == [(MISSING,)]

    after = history(lake, "tags")
    assert after[1:] == before
    assert after[0] == (before[0][0] + 1, "DELETE")
    assert lake.rows("SELECT count(*), count(DISTINCT _dlt_id) FROM tags") == [
        (CHILDREN - MISSING, CHILDREN - MISSING)
    ]
    assert lake.count("SELECT count(*) FROM tags WHERE v % 10 = 3") == 0
    assert lake.count(
        "SELECT count(*) FROM tags t JOIN staging.tags s ON t._dlt_id = s._dlt_id"
    ) == (CHILDREN - MISSING)


def test_a_delete_from_an_empty_table_does_not_run_its_subqueries(lake):
    """dlt's first load deletes the nested rows of every staged key from a table that has
    none yet: with no row to match, the predicate's subqueries (here far larger than the
    pool) are planned, for errors, but not run, and nothing is committed."""
    lake.query("CREATE TABLE empty_tags AS SELECT * FROM tags WHERE FALSE")
    before = history(lake, "empty_tags")
    big = "(SELECT md5(CAST(value AS VARCHAR)) FROM range(20000000))"
    assert lake.rows(f'DELETE FROM empty_tags WHERE "_dlt_id" IN {big}') == [(0,)]
    assert lake.rows(f'UPDATE empty_tags SET v = 1 WHERE "_dlt_id" IN {big}') == [(0,)]
    assert history(lake, "empty_tags") == before
    # Planning still reports a wrong name.
    with pytest.raises(SqlError) as wrong:
        lake.query(f"DELETE FROM empty_tags WHERE nope IN {big}")
    assert wrong.value.message.startswith("Binder Error: No field named nope."), (
        wrong.value
    )
    assert wrong.value.status == 200
    # The same predicate on the full table runs out of the pool: the subquery is real.
    stored = lake.count("SELECT count(*) FROM tags")
    with pytest.raises(SqlError) as exhausted:
        lake.query(f'DELETE FROM tags WHERE "_dlt_id" IN {big}')
    assert exhausted.value.message.startswith("Resources exhausted: "), exhausted.value
    assert lake.count("SELECT count(*) FROM tags") == stored
