"""Deletion vectors through the Python package, read back by other engines.

Our upserts into tables with ``delta.enableDeletionVectors=true`` (created by us, or by
delta-rs) mark the few changed rows of a file in a deletion vector; the deltalake package
(delta-rs) and polars read the same rows as a model of the calls, and as delta-rs's own
MERGE produced on a copy without vectors. delta-rs keeps writing to such a table
(its DELETE rewrites files around our vectors) and we keep upserting after it, from
a checkpoint too.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from deltalite import DeltaLiteTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from delta_log import deletion_vectors  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("gone", pa.bool_())])
DV = {"delta.enableDeletionVectors": "true"}


def batch(ids, v: str, gone: bool = False) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [v] * len(ids), "gone": [gone] * len(ids)}, schema=SCHEMA)


def vectors(path) -> list[int]:
    """Cardinalities of the active files' deletion vectors, from the log itself."""
    return deletion_vectors(Path(path))


def by_deltalake(path: str) -> dict[int, str]:
    """Through delta-rs's DataFusion scan (QueryBuilder), which applies vectors; the
    pyarrow dataset refuses the deletionVectors reader feature."""
    found = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT id, v FROM t")
    return {r["id"]: r["v"] for r in pa.table(found.read_all()).to_pylist()}


def by_polars(path: str) -> dict[int, str]:
    return {r["id"]: r["v"] for r in pl.read_delta(path).iter_rows(named=True)}


def apply(model: dict[int, str], rows: pa.Table) -> None:
    for r in rows.to_pylist():
        if r["gone"]:
            model.pop(r["id"], None)
        else:
            model[r["id"]] = r["v"]


def merge_by_delta_rs(path: str, rows: pa.Table) -> None:
    """The same upsert as delta-rs's MERGE: the differential peer."""
    (
        DeltaTable(path)
        .merge(rows, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete("s.gone")
        .when_matched_update_all("NOT s.gone")
        .when_not_matched_insert_all("NOT s.gone")
        .execute()
    )


def test_random_upserts_agree_with_delta_rs_merge_and_readers(tmp_path):
    ours = str(tmp_path / "ours")
    peer = str(tmp_path / "peer")
    table = DeltaLiteTable.create(ours, SCHEMA, configuration=DV)
    write_deltalake(peer, batch([], "x"), mode="overwrite")
    rng = random.Random(5)
    model: dict[int, str] = {}
    marked = 0
    for step in range(25):
        ids = sorted(set(rng.randrange(0, 3000) for _ in range(rng.randrange(1, 200))))
        gone = [rng.random() < 0.25 for _ in ids]
        rows = pa.table({"id": ids, "v": [f"s{step}"] * len(ids), "gone": gone}, schema=SCHEMA)
        if step == 0:
            rows = batch(range(3000), "s0")
        stats = table.upsert(rows, "id", delete_column="gone", target_file_size=16 * 1024)
        marked += stats.files_marked
        merge_by_delta_rs(peer, rows)
        apply(model, rows)
        assert by_deltalake(ours) == model
    assert marked > 10, marked
    assert vectors(ours), "some files still carry a vector"
    assert by_deltalake(peer) == model
    assert by_polars(ours) == model


def test_a_table_delta_rs_made_takes_our_vectors_and_its_writes(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, batch(range(1000), "a"), configuration=DV)
    protocol = DeltaTable(path).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    table = DeltaLiteTable.open(path)
    model = {i: "a" for i in range(1000)}

    rows = pa.concat_tables([batch(range(20), "b"), batch(range(500, 510), "", True)])
    stats = table.upsert(rows, "id", delete_column="gone")
    apply(model, rows)
    assert (stats.files_marked, stats.files_removed, stats.rows_copied) == (1, 1, 0)
    assert vectors(path) == [30]
    assert by_deltalake(path) == model == by_polars(path)

    # delta-rs deletes around our vector (it rewrites the file without the rows).
    DeltaTable(path).delete("id < 5")
    for i in range(5):
        model.pop(i)
    assert by_deltalake(path) == model
    table.reload()
    rows = batch([5, 6, 700], "c")
    table.upsert(rows, "id", delete_column="gone")
    apply(model, rows)
    assert by_deltalake(path) == model == by_polars(path)

    # From a checkpoint: the vectors come from its Parquet, not the JSON commits.
    DeltaTable(path).create_checkpoint()
    reopened = DeltaLiteTable.open(path)
    rows = batch([7, 8, 701], "d")
    stats = reopened.upsert(rows, "id", delete_column="gone")
    apply(model, rows)
    assert stats.files_marked >= 1
    assert by_deltalake(path) == model == by_polars(path)

    # Compaction purges every vector.
    reopened.compact()
    assert vectors(path) == []
    assert by_deltalake(path) == model


Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """ZeroMQ's base-85 (the Delta protocol's inline vector encoding); len % 4 == 0."""
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(Z85[digit])
        out.extend(reversed(chunk))
    return "".join(out)


def test_an_inline_vector_another_writer_left_is_honoured(tmp_path):
    """A commit written by hand, as an engine that stores small vectors inline would:
    the file's vector moves from its `u` file into the log (`i`), same rows. delta-rs
    reads it; our next upsert merges its own rows into it."""
    path = tmp_path / "t"
    table = DeltaLiteTable.create(str(path), SCHEMA, configuration=DV)
    table.upsert(batch(range(100), "a"), "id", delete_column="gone")
    table.upsert(batch([3, 4, 5], "", True), "id", delete_column="gone")
    model = {i: "a" for i in range(100) if i not in (3, 4, 5)}
    log = path / "_delta_log"
    last = max(int(p.stem) for p in log.glob("*.json"))
    add = next(
        json.loads(line)["add"]
        for line in (log / f"{last:020d}.json").read_text().splitlines()
        if "add" in json.loads(line) and json.loads(line)["add"].get("deletionVector")
    )
    dv = add["deletionVector"]
    # The stored vector: a version byte, then at `offset` a big-endian size, the magic
    # and bitmap (`size` bytes), a checksum. Inline is the magic and bitmap, z85.
    stored = next(path.glob("deletion_vector_*.bin")).read_bytes()
    body = stored[dv["offset"] + 4 : dv["offset"] + 4 + dv["sizeInBytes"]]
    padded = body + b"\0" * (-len(body) % 4)
    inline = {
        "storageType": "i",
        "pathOrInlineDv": z85(padded),
        "sizeInBytes": len(body),
        "cardinality": dv["cardinality"],
    }
    remove = {
        "path": add["path"],
        "deletionTimestamp": add["modificationTime"],
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add["partitionValues"],
        "size": add["size"],
        "deletionVector": dv,
    }
    commit = [
        {"commitInfo": {"operation": "WRITE", "engineInfo": "hand-written inline vector"}},
        {"remove": remove},
        {"add": {**add, "deletionVector": inline}},
    ]
    (log / f"{last + 1:020d}.json").write_text("\n".join(json.dumps(a) for a in commit))
    for leftover in path.glob("deletion_vector_*.bin"):
        leftover.unlink()  # nothing may still read the file-stored copy
    assert by_deltalake(str(path)) == model == by_polars(str(path))

    reopened = DeltaLiteTable.open(str(path))
    rows = pa.concat_tables([batch([10], "b"), batch([3, 11], "", True)])
    stats = reopened.upsert(rows, "id", delete_column="gone")
    apply(model, rows)
    assert stats.files_marked == 1
    assert vectors(path) == [5]  # 3, 4, 5 from the inline vector, then 10 and 11
    assert by_deltalake(str(path)) == model == by_polars(str(path))
