"""What the destination needs from the server, beyond single statements: SQL precedence dlt's
null-safe comparisons rely on, and catalog lookups that survive another pipeline creating and
dropping its staging schema at the same time."""

import threading
import time
import uuid


def test_is_distinct_from_binds_tighter_than_and(server):
    assert server.query("SELECT 1 AS one WHERE 'a' IS DISTINCT FROM 'b' AND TRUE") == [{"one": 1}]
    assert server.query("SELECT 1 AS one WHERE 'a' IS NOT DISTINCT FROM 'a' AND NOT FALSE") == [
        {"one": 1}
    ]


def test_information_schema_lookup_survives_concurrent_drop_schema(server):
    stable, churn = "st_" + uuid.uuid4().hex[:8], "ch_" + uuid.uuid4().hex[:8]
    server.query(f'CREATE SCHEMA "{server.catalog}"."{stable}"')
    server.query(f'CREATE TABLE "{server.catalog}"."{stable}"."t" (id BIGINT)')
    stop = threading.Event()

    def churning():
        while not stop.is_set():
            server.query(f'CREATE SCHEMA IF NOT EXISTS "{server.catalog}"."{churn}"')
            for n in range(5):
                server.query(f'CREATE TABLE "{server.catalog}"."{churn}"."t{n}" (id BIGINT)')
            server.query(f'DROP SCHEMA IF EXISTS "{server.catalog}"."{churn}" CASCADE')

    thread = threading.Thread(target=churning, daemon=True)
    thread.start()
    failures = []
    deadline = time.monotonic() + 30
    lookups = 0
    try:
        # until the first failure, at most 200 lookups or 30 s (each lookup takes longer the
        # more tables the catalog holds)
        while not failures and lookups < 200 and time.monotonic() < deadline:
            lookups += 1
            try:
                rows = server.query(
                    "SELECT column_name FROM information_schema.columns WHERE table_catalog ="
                    f" '{server.catalog}' AND table_schema = '{stable}' AND table_name = 't'"
                )
                assert rows == [{"column_name": "id"}]
            except RuntimeError as ex:
                failures.append(str(ex))
    finally:
        stop.set()
        thread.join(timeout=60)
    assert failures == [], f"lookup {lookups} failed: {failures[0]}"
