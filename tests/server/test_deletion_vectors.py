"""Deletion vectors through a real `deltalite serve --deletion-vectors on`.

Tables the server creates get `delta.enableDeletionVectors=true`; an `/upsert` that
changes a few rows of a file gives the file a vector instead of rewriting it; the
server's SQL (counts included: `numRecords` counts the vector's rows too), delta-rs
(`deltalake`) and polars read the same rows; SQL `DELETE` and `UPDATE` mark files the same
way, checked against the same statements on a table without vectors; `ALTER TABLE … SET TBLPROPERTIES` switches a table the server made
without vectors over, protocol upgrade included.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from pathlib import Path

import deltalake
import polars as pl
import pyarrow as pa
import pytest
from conftest import Client, ServerProcess, SqlError
from delta_log import deletion_vectors


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("lake")
    with ServerProcess(
        data=data, args=["--deletion-vectors", "on", "--maintenance", "off"]
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client(server) -> Client:
    return Client(server)


def upsert(server, table: str, rows: list[dict], extra: str = "") -> dict:
    query = f"catalog=lakehouse&schema=main&table={table}&primary_key=id{extra}"
    status, body = Client(server).upsert(query, rows)
    assert status == 200, body
    return body


def path_of(server, name: str) -> Path:
    return Path(server.data) / "lakehouse" / "main" / name


def vectors(path) -> list[int]:
    """Cardinalities of the active files' deletion vectors, from the log itself."""
    return deletion_vectors(Path(path))


def protocol(server, name: str) -> tuple[int, int, list[str]]:
    p = deltalake.DeltaTable(path_of(server, name)).protocol()
    return p.min_reader_version, p.min_writer_version, sorted(p.writer_features or [])


def read_by_others(server, name: str) -> tuple[list[tuple], list[tuple]]:
    path = path_of(server, name)
    # deltalake's QueryBuilder is delta-rs's DataFusion scan, which applies vectors
    # (its pyarrow dataset refuses the deletionVectors reader feature).
    found = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    by_delta_rs = sorted(
        (r["id"], r["v"])
        for r in pa.table(found.execute("SELECT id, v FROM t").read_all()).to_pylist()
    )
    by_polars = sorted(
        (r["id"], r["v"]) for r in pl.read_delta(str(path)).iter_rows(named=True)
    )
    return by_delta_rs, by_polars


def check(server, client, name: str, model: dict[int, str]) -> None:
    expected = sorted(model.items())
    assert client.rows(f"SELECT id, v FROM {name} ORDER BY id") == expected
    assert client.count(f"SELECT count(*) FROM {name}") == len(model)
    assert read_by_others(server, name) == (expected, expected)


def test_upserts_mark_files_and_every_reader_agrees(server, client):
    model = {i: "a" for i in range(2000)}
    upsert(server, "u", [{"id": i, "v": "a", "gone": False} for i in range(2000)])
    reader, writer, features = protocol(server, "u")
    assert (reader, writer) == (3, 7)
    assert "deletionVectors" in features
    assert vectors(path_of(server, "u")) == []
    # 40 updates, 10 deletes, 5 inserts: one vector of 50 rows, no rewrite.
    batch = [{"id": i, "v": "b", "gone": False} for i in range(40)]
    batch += [{"id": i, "v": None, "gone": True} for i in range(100, 110)]
    batch += [{"id": i, "v": "new", "gone": False} for i in range(5000, 5005)]
    upsert(server, "u", batch, "&delete_column=gone")
    for i in range(40):
        model[i] = "b"
    for i in range(100, 110):
        del model[i]
    for i in range(5000, 5005):
        model[i] = "new"
    assert vectors(path_of(server, "u")) == [50]
    check(server, client, "u", model)
    request = urllib.request.Request(
        f"{server.base}/metrics", headers={"Authorization": client.auth}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    assert "deltalite_files_marked_total 1\n" in text
    # The probe cache (keys of files the upserts read) is published too.
    limit = 'deltalite_query_cache_limit_bytes{cache="probe_keys"} 134217728\n'
    assert limit in text
    assert 'deltalite_probe_cache_events_total{event="miss"}' in text


def counters(server) -> dict[str, float]:
    """The server's `/metrics` samples, by their full name (labels included)."""
    request = urllib.request.Request(
        f"{server.base}/metrics", headers={"Authorization": Client(server).auth}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return {
        name: float(value)
        for name, value in (
            line.rsplit(" ", 1) for line in text.splitlines() if line[:1] not in "#"
        )
    }


def test_the_key_cache_answers_a_repeated_upsert_without_probing(tmp_path):
    """A file the first upsert of a fresh process probed in part (a few of its key pages)
    is read whole in the background into the key cache; the next upsert decides it from
    the cache (no probe, a vector all the same), and every reader sees the model's rows.
    With `--key-cache-fill off` the file is probed every time."""
    data = tmp_path / "lake"
    for fill in ("on", "off"):
        name = f"hot_{fill}"
        args = ["--deletion-vectors", "on", "--key-cache-mb", "64"]
        args += ["--key-cache-fill", fill]
        with ServerProcess(data=data, args=args) as s:
            upsert(s, name, [{"id": i, "v": "a"} for i in range(30_000)])
        # A new process: its cache starts empty.
        with ServerProcess(data=data, args=args) as s:
            model = {i: "a" for i in range(30_000)}
            before = counters(s)
            limit = 'deltalite_query_cache_limit_bytes{cache="probe_keys"}'
            assert before[limit] == 64 * 1024 * 1024
            upsert(s, name, [{"id": i, "v": "b"} for i in (5, 12_345, 29_999)])
            model.update({5: "b", 12_345: "b", 29_999: "b"})
            first = counters(s)
            probed = "deltalite_files_probed_total"
            cached = "deltalite_files_probe_cached_total"
            assert first[probed] == 1
            assert first.get(cached, 0) == 0
            fill_event = 'deltalite_probe_cache_events_total{event="fill"}'
            if fill == "on":
                deadline = time.monotonic() + 30
                while counters(s).get(fill_event, 0) < 1:
                    assert time.monotonic() < deadline, "the fill never ran"
                    time.sleep(0.1)
            upsert(s, name, [{"id": i, "v": "c"} for i in (6, 20_000, 29_999)])
            model.update({6: "c", 20_000: "c", 29_999: "c"})
            second = counters(s)
            # The first call's own file (5, 12,345, 29,999) is cached by its writer
            # either way; the big file only by the background fill.
            if fill == "on":
                assert second[probed] == first[probed]
                assert second[cached] == 2
            else:
                assert second[probed] == first[probed] + 1
                assert second[cached] == 1
                assert second.get(fill_event, 0) == 0
            assert sorted(vectors(path_of(s, name))) == [1, 5]
            check(s, Client(s), name, model)


def test_sql_writes_on_a_table_with_vectors_stay_correct(server, client):
    upsert(server, "w", [{"id": i, "v": "a"} for i in range(1000)])
    upsert(server, "w", [{"id": i, "v": "b"} for i in range(10)])
    assert vectors(path_of(server, "w")) == [10]
    model = {i: ("b" if i < 10 else "a") for i in range(1000)}
    check(server, client, "w", model)

    # Two files now: the first 1,000 rows (10 of them in its vector) and the upsert's
    # 10. The DELETE marks both: 5 more rows of the big file, half of the small one
    # (0.5, the default `deletion_vector_max_share`, is still marked).
    client.query("DELETE FROM w WHERE id BETWEEN 5 AND 14")
    for i in range(5, 15):
        model.pop(i)
    assert sorted(vectors(path_of(server, "w"))) == [5, 15]
    check(server, client, "w", model)

    # The UPDATE would leave the small file 7 of 10 rows deleted: rewritten (its 3 rows
    # left, 2 of them updated, in a new file); id 500 is marked in the big one.
    client.query("UPDATE w SET v = 'c' WHERE id IN (0, 1, 500)")
    for i in (0, 1, 500):
        model[i] = "c"
    assert sorted(vectors(path_of(server, "w"))) == [16]
    check(server, client, "w", model)
    history = deltalake.DeltaTable(path_of(server, "w")).history(1)[0]
    assert history["operation"] == "UPDATE"

    client.query(
        "MERGE INTO w USING (SELECT 2 AS id, 'm' AS v UNION ALL SELECT 3000, 'n') AS s "
        "ON w.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
    )
    model[2] = "m"
    model[3000] = "n"
    # This MERGE is an upsert by key (the engine's path): the rewritten small file holds
    # id 2 (1 of 3 rows: marked).
    assert sorted(vectors(path_of(server, "w"))) == [1, 16]
    check(server, client, "w", model)


def test_optimize_purges_vectors(server, client):
    upsert(server, "o", [{"id": i, "v": "a"} for i in range(300)])
    upsert(server, "o", [{"id": i, "v": "b"} for i in range(3)])
    assert vectors(path_of(server, "o")) == [3]
    model = {i: ("b" if i < 3 else "a") for i in range(300)}
    client.query("OPTIMIZE o")
    assert vectors(path_of(server, "o")) == []
    check(server, client, "o", model)


def test_alter_table_switches_an_existing_table_over(tmp_path):
    with ServerProcess(data=tmp_path, args=["--maintenance", "off"]) as plain:
        client = Client(plain)
        upsert(plain, "t", [{"id": i, "v": "a"} for i in range(100)])
        assert protocol(plain, "t")[0] < 3
        upsert(plain, "t", [{"id": 1, "v": "b"}])
        assert vectors(path_of(plain, "t")) == []
        client.query(
            "ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )
        reader, writer, features = protocol(plain, "t")
        assert (reader, writer) == (3, 7)
        assert "deletionVectors" in features
        upsert(plain, "t", [{"id": 50, "v": "c"}, {"id": 51, "v": "c"}])
        assert vectors(path_of(plain, "t")) == [2]
        model = {i: "a" for i in range(100)}
        model.update({1: "b", 50: "c", 51: "c"})
        check(plain, client, "t", model)
        with pytest.raises(SqlError) as refused:
            client.query(
                "ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'maybe')"
            )
        assert refused.value.message == (
            "Not implemented Error: ALTER TABLE SET TBLPROPERTIES "
            "('delta.enableDeletionVectors' = 'maybe') is not supported"
        )


def twin_tables(server, client, dv: str, cow: str) -> None:
    """The same 3,000 rows in three files in `dv` (writes vectors) and `cow` (does not)."""
    for name in (dv, cow):
        for chunk in range(3):
            rows = [
                {"id": i, "v": f"a{i}"} for i in range(chunk * 1000, (chunk + 1) * 1000)
            ]
            upsert(server, name, rows)
    client.query(
        f"ALTER TABLE {cow} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )


def test_sql_delete_and_update_mark_files_like_rewrites_would(server, client):
    """Random DELETE and UPDATE statements (ranges, modulo, subqueries) on a table that
    writes vectors and on one that does not: the same rows after every statement, and
    delta-rs and polars read the marked table's rows too."""
    import random

    rng = random.Random(17)
    twin_tables(server, client, "dv", "cow")
    client.query(
        "CREATE TABLE picks AS SELECT * FROM (VALUES (7), (1500), (2999)) AS t(id)"
    )
    marked = 0
    for step in range(24):
        lo = rng.randrange(0, 3000)
        hi = lo + rng.choice([1, 3, 20, 300])
        m = rng.choice([1, 7, 50])
        where = rng.choice(
            [
                f"id BETWEEN {lo} AND {hi}",
                f"id % {m} = {lo % m} AND id < {hi}",
                f"id IN (SELECT id + {step} FROM picks)",
                f"EXISTS (SELECT 1 FROM picks p WHERE p.id = t.id - {lo % 5})",
            ]
        )
        statement = rng.choice(
            [
                "DELETE FROM {t} AS t WHERE {w}",
                "UPDATE {t} AS t SET v = v || '-{s}' WHERE {w}",
            ]
        )
        for name in ("dv", "cow"):
            client.query(statement.format(t=name, w=where, s=step))
        assert client.rows("SELECT id, v FROM dv ORDER BY id") == client.rows(
            "SELECT id, v FROM cow ORDER BY id"
        ), (step, statement, where)
        marked = max(marked, len(vectors(path_of(server, "dv"))))
    assert vectors(path_of(server, "cow")) == []
    assert marked > 0
    expected = client.rows("SELECT id, v FROM cow ORDER BY id")
    assert read_by_others(server, "dv") == (expected, expected)


def test_general_merges_mark_files_like_rewrites_would(server, client):
    """Random MERGE statements the upsert path does not take (conditional and DELETE
    clauses, DO NOTHING, NOT MATCHED BY SOURCE) on a table that writes vectors and on one
    that does not: the same rows after every statement, vectors written by the MERGEs,
    and delta-rs and polars read the marked table's rows too."""
    import random

    rng = random.Random(23)
    twin_tables(server, client, "mdv", "mcow")
    statements = [
        # matched rows deleted or updated by a condition, new keys inserted
        (
            "MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
            "WHEN MATCHED AND s.k = 0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET v = t.v || '-{n}' "
            "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, 'new-{n}')"
        ),
        # some matched rows left alone
        (
            "MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
            "WHEN MATCHED AND s.k = 1 THEN DO NOTHING "
            "WHEN MATCHED THEN UPDATE SET v = CAST(s.id AS VARCHAR) || '-{n}'"
        ),
        # target rows no source row matches, within a range
        (
            "MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = 'm-{n}' "
            "WHEN NOT MATCHED BY SOURCE AND t.id BETWEEN {lo} AND {hi} AND t.id % 3 = 0 "
            "THEN DELETE "
            "WHEN NOT MATCHED BY SOURCE AND t.id BETWEEN {lo} AND {hi} "
            "THEN UPDATE SET v = t.v || '-b{n}'"
        ),
        "MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id WHEN MATCHED THEN DELETE",
    ]
    marked = 0
    for step in range(16):
        keys = sorted(rng.sample(range(3200), rng.choice([1, 5, 40, 400])))
        source = "(VALUES {}) AS s(id, k)".format(
            ", ".join(f"({k}, {rng.randrange(3)})" for k in keys)
        )
        lo = rng.randrange(0, 3000)
        statement = rng.choice(statements)
        for name in ("mdv", "mcow"):
            client.query(
                statement.format(
                    t=name, s=f"(SELECT * FROM {source})", n=step, lo=lo, hi=lo + 30
                )
            )
        assert client.rows("SELECT id, v FROM mdv ORDER BY id") == client.rows(
            "SELECT id, v FROM mcow ORDER BY id"
        ), (step, statement)
        marked = max(marked, len(vectors(path_of(server, "mdv"))))
    history = deltalake.DeltaTable(path_of(server, "mdv")).history(1)[0]
    assert history["operation"] == "MERGE"
    assert vectors(path_of(server, "mcow")) == []
    assert marked > 0
    expected = client.rows("SELECT id, v FROM mcow ORDER BY id")
    assert read_by_others(server, "mdv") == (expected, expected)


def test_sql_delete_marks_the_right_rows_of_a_large_file(server, client):
    """A file large enough that DataFusion would split or repartition its scan (1M rows,
    ~39 MB of incompressible payload, several row groups): the rows a DELETE and an
    UPDATE mark are the ones their predicates match, found in the file's own order.
    The file is written in `id` order: unordered, `range`'s batches reach the writer
    interleaved as the threads run, so how many pages the page index keeps varied from
    run to run (6 of 50 once, under load, against the 10x the test asks)."""
    client.query(
        "CREATE TABLE big AS SELECT range AS id, digest(CAST(range AS VARCHAR), 'sha256') AS payload "
        "FROM range(1000000) ORDER BY id"
    )
    client.query("DELETE FROM big WHERE id % 1000 = 7")
    assert vectors(path_of(server, "big")) == [1000]
    assert client.rows(
        "SELECT count(*), count(*) FILTER (WHERE id % 1000 = 7), sum(id) FROM big"
    ) == [(999_000, 0, 499_999_500_000 - sum(range(7, 1_000_000, 1000)))]
    client.query("UPDATE big SET payload = 'new' WHERE id % 100000 = 99")
    assert vectors(path_of(server, "big")) == [1010]
    assert client.rows("SELECT id FROM big WHERE payload = 'new' ORDER BY id") == [
        (i,) for i in range(99, 1_000_000, 100_000)
    ]
    assert client.count("SELECT count(*) FROM big") == 999_000

    # A selective read of the file with a vector (`sql/vector_scan.rs`): its pages are
    # pruned by the page index, and the rows are exactly the live ones (7 is deleted,
    # 99's new version is in the UPDATE's file, 123,456 is untouched).
    selective = "SELECT id, payload FROM big WHERE id IN (7, 99, 123456) ORDER BY id"
    assert [r[0] for r in client.rows(selective)] == [99, 123_456]
    assert client.rows(selective)[0][1] == "bmV3", "b'new', a BLOB in base64"
    _, plan = client.query(f"EXPLAIN ANALYZE {selective}")
    physical = "\n".join(str(cell) for row in plan for cell in row)
    scans = [line for line in physical.splitlines() if "DataSourceExec" in line]
    vector_scan = [line for line in scans if "__delta_rs" not in line]
    assert len(vector_scan) == 1, physical
    pruned = re.search(
        r"page_index_pages_pruned=(\d+) total \u2192 (\d+) matched", vector_scan[0]
    )
    assert pruned, vector_scan[0]
    total, matched = int(pruned[1]), int(pruned[2])
    assert total >= 10 * matched > 0, vector_scan[0]


def test_a_table_with_vectors_is_scanned_in_parallel_groups(server, client):
    """delta-rs reads a table with vectors in one stream; the server unions one scan per
    group of files instead (`sql/scan.rs`). Partition values that need escaping in paths
    must still select their files, and every query must see each live row once."""
    values = ["plain", "with space", "per%cent", "hash#tag", "ünï", "a=b", "q?x"]
    client.query("CREATE TABLE pv (id BIGINT, p VARCHAR, v VARCHAR) PARTITIONED BY (p)")
    rows = ", ".join(f"({i}, '{values[i % len(values)]}', 'a')" for i in range(2100))
    client.query(f"INSERT INTO pv VALUES {rows}")
    client.query("DELETE FROM pv WHERE id % 10 = 3")
    model = {i: values[i % len(values)] for i in range(2100) if i % 10 != 3}
    # Every partition's file got a vector (none rewritten); new rows go to files
    # without one.
    assert sorted(vectors(path_of(server, "pv"))) == [30] * len(values)
    client.query("INSERT INTO pv VALUES (5000, 'plain', 'n'), (5001, 'q?x', 'n')")
    model.update({5000: "plain", 5001: "q?x"})

    expected = sorted(
        (
            p,
            sum(1 for q in model.values() if q == p),
            sum(i for i, q in model.items() if q == p),
        )
        for p in values
    )
    grouped = "SELECT p, count(*), sum(id) FROM pv GROUP BY p ORDER BY p"
    assert client.rows(grouped) == expected
    assert client.rows("SELECT id FROM pv ORDER BY id") == [(i,) for i in sorted(model)]
    assert client.rows("SELECT count(*) FROM pv WHERE p = 'per%cent'") == [
        (sum(1 for q in model.values() if q == "per%cent"),)
    ]
    selective = "SELECT id FROM pv WHERE id IN (3, 4, 13, 2099, 5001) ORDER BY id"
    assert client.rows(selective) == [(4,), (2099,), (5001,)]
    assert client.rows("SELECT id FROM pv ORDER BY id LIMIT 3") == [(0,), (1,), (2,)]

    _, plan = client.query(f"EXPLAIN {grouped}")
    physical = "\n".join(str(cell) for row in plan for cell in row)
    if (os.cpu_count() or 1) > 1:
        assert "UnionExec" in physical, physical
    # The files without vectors are delta-rs's scan, into whose Parquet reader it pushes
    # the predicate; the files with vectors are one scan of ours (`sql/vector_scan.rs`,
    # no DeltaScanExec over it) that prunes with the predicate too.
    _, plan = client.query(f"EXPLAIN {selective}")
    physical = "\n".join(str(cell) for row in plan for cell in row)
    scans = [line for line in physical.splitlines() if "DataSourceExec" in line]
    vector_scan = [line for line in scans if "__delta_rs" not in line]
    assert len(vector_scan) == 1, physical
    assert vector_scan[0].count(".parquet") == len(values), vector_scan[0]
    assert all(" predicate=" in line for line in scans), physical
    # A table without vectors keeps delta-rs's own plan.
    client.query("OPTIMIZE pv")
    assert vectors(path_of(server, "pv")) == []
    _, plan = client.query(f"EXPLAIN {grouped}")
    assert "UnionExec" not in "\n".join(str(c) for row in plan for c in row)
    assert client.rows(grouped) == expected


def test_bounds_of_files_with_vectors_prune_but_answer_nothing(server, client):
    """The scan of files with vectors prunes whole files by the log's bounds, which also
    cover the rows the vectors delete: the largest and smallest ids deleted, `max`/`min`
    and range queries must still see only live rows."""
    upsert(server, "bounds", [{"id": i, "v": "a"} for i in range(100)])
    client.query("DELETE FROM bounds WHERE id IN (0, 99)")
    assert vectors(path_of(server, "bounds")) == [2]
    assert client.rows("SELECT min(id), max(id), count(*) FROM bounds") == [(1, 98, 98)]
    assert client.rows("SELECT id FROM bounds WHERE id > 96 ORDER BY id") == [
        (97,),
        (98,),
    ]
    assert client.rows("SELECT id FROM bounds WHERE id >= 99 OR id <= 0") == []
    assert client.rows("SELECT id FROM bounds WHERE id > 1000") == []


def test_lookups_skip_the_files_with_vectors_that_cannot_hold_their_keys(
    server, client
):
    """A query for given keys (`id = k`, `id IN (…)`) plans only the files with vectors
    whose log bounds and bloom filters may hold one (`sql/vector_scan.rs::Lookup`): the
    new row versions of merge-on-read upserts sit in files spanning every key, which a
    lookup would otherwise open one by one. Every answer stays the model's, including
    keys only a deleted row still holds and lookups that rule out every file."""
    model = {i: "a" for i in range(3000)}
    upsert(server, "lk", [{"id": i, "v": "a"} for i in range(3000)])
    for r in range(1, 7):
        # Five spread updates, the previous round's insert updated (so its file gets a
        # vector too), one insert: each round marks files and adds one spanning 0..10006.
        changed = {r * 10 + k * 500: f"r{r}" for k in range(5)}
        if r > 1:
            changed[10_000 + r - 1] = f"r{r}"
        changed[10_000 + r] = f"r{r}"
        upsert(server, "lk", [{"id": i, "v": v} for i, v in changed.items()])
        model.update(changed)
    cardinalities = vectors(path_of(server, "lk"))
    assert len(cardinalities) == 6, cardinalities

    def planned(where: str) -> int:
        scans = client.scans(f"SELECT id, v FROM lk WHERE {where}")
        lines = [line for line in scans if "__delta_rs" not in line]
        assert len(lines) == 1, scans
        # Distinct files: DataFusion may read one file as several byte ranges.
        return len(set(re.findall(r"[^\s\[,]+\.parquet", lines[0])))

    def answer(where: str) -> list[tuple]:
        return client.rows(f"SELECT id, v FROM lk WHERE {where} ORDER BY id")

    def expected(*keys: int) -> list[tuple]:
        return sorted((k, model[k]) for k in keys if k in model)

    # Updated in round 3: the base file (its old row, deleted) and round 3's file.
    assert answer("id = 530") == expected(530) == [(530, "r3")]
    assert planned("id = 530") == 2
    assert planned("530 = id") == 2
    # Never written but within every new file's bounds: their blooms rule them out.
    assert answer("id = 5000") == []
    assert planned("id = 5000") == 0
    assert client.count("SELECT count(*) FROM lk WHERE id IN (5000, 5001)") == 0
    # Outside every file's bounds.
    assert planned("id = 2000000") == 0
    # A short IN list, which DataFusion rewrites as ORs of equalities, and such ORs.
    assert answer("id IN (530, 5000)") == [(530, "r3")]
    assert planned("id IN (530, 5000)") == 2
    assert planned("id = 530 OR id = 5000 OR id = 2000000") == 2
    assert planned("id = 530 OR v = 'x'") == 6
    # Several keys: the files of each, once.
    keys = (7, 530, 1030, 5000, 10_003, 10_006)
    assert answer(f"id IN {keys}") == expected(*keys)
    # With another conjunct, and NULLs among the values (they match nothing).
    assert answer("id IN (530, NULL) AND v = 'r3'") == [(530, "r3")]
    assert answer("id IN (530, 1030) AND v = 'a'") == []
    # Not lookups: an expression of the column, a negation; every file is planned.
    assert answer("id * 2 = 1060") == [(530, "r3")]
    assert planned("id * 2 = 1060") == 6
    assert len(answer("id NOT IN (530)")) == len(model) - 1
    assert client.count("SELECT count(*) FROM lk") == len(model)
