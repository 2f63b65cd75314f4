"""Differential parity with delta-rs MERGE (the `deltalake` package) on twin tables."""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
import tempfile

import pyarrow as pa
from conftest import read_delta, rows_of
from deltalake import DeltaTable, Field
from hypothesis import event, given
from hypothesis import strategies as st

from deltalite import DeltaLiteTable

KEY_KINDS = {
    "int": [("k", pa.int64())],
    "string": [("k", pa.string())],
    "composite": [("k1", pa.int32()), ("k2", pa.string())],
}
FLOATS = [0.0, -0.0, 1.5, float("nan"), float("inf"), float("-inf"), 1e308, None]
PAYLOADS = {
    "f": (pa.float64(), st.sampled_from(FLOATS)),
    "dec": (
        pa.decimal128(10, 2),
        st.one_of(
            st.none(),
            st.integers(-(10**9), 10**9).map(lambda i: decimal.Decimal(i).scaleb(-2)),
        ),
    ),
    "ts": (
        pa.timestamp("us", tz="UTC"),
        st.one_of(
            st.none(),
            st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)).map(
                lambda d: d.replace(tzinfo=dt.UTC)
            ),
        ),
    ),
    "d": (pa.date32(), st.one_of(st.none(), st.dates())),
    "flag": (pa.bool_(), st.one_of(st.none(), st.booleans())),
    "s": (pa.string(), st.one_of(st.none(), st.text(max_size=5))),
    "st": (
        pa.struct([("x", pa.int32()), ("y", pa.string())]),
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"x": st.one_of(st.none(), st.integers(-100, 100)), "y": st.text(max_size=3)}
            ),
        ),
    ),
    "l": (
        pa.list_(pa.int32()),
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-9, 9)), max_size=3)),
    ),
}
PARTITIONS = [f"p{i}" for i in range(6)]


def key_values(kind: str):
    if kind == "int":
        return st.fixed_dictionaries({"k": st.one_of(st.none(), st.integers(0, 12))})
    if kind == "string":
        return st.fixed_dictionaries({"k": st.one_of(st.none(), st.sampled_from("abcdefghij"))})
    return st.fixed_dictionaries(
        {"k1": st.one_of(st.none(), st.integers(0, 3)), "k2": st.sampled_from(["u", "v", "w"])}
    )


@st.composite
def scenarios(draw, min_batches: int = 1, evolution: bool = True):
    kind = draw(st.sampled_from(sorted(KEY_KINDS)))
    partitioned = draw(st.booleans())
    # Few partitions make key matches (updates) frequent; many spread the batch.
    partitions = PARTITIONS[: draw(st.integers(1, len(PARTITIONS)))]
    payload = draw(st.lists(st.sampled_from(sorted(PAYLOADS)), min_size=1, max_size=4, unique=True))
    n_batches = draw(st.integers(min_batches, 4))
    evolve_at = draw(st.one_of(st.none(), st.integers(1, 4))) if evolution else None
    batches = []
    for i in range(n_batches):
        columns = list(payload) + (["extra"] if evolve_at is not None and i >= evolve_at else [])
        row = st.fixed_dictionaries(
            {
                "key": key_values(kind),
                "p": st.sampled_from(partitions),
                "payload": st.fixed_dictionaries(
                    {c: (st.integers(0, 99) if c == "extra" else PAYLOADS[c][1]) for c in columns}
                ),
            }
        )
        raw = draw(st.lists(row, min_size=1, max_size=15))
        batches.append((columns, raw))
    return kind, partitioned, payload, batches


def arrow_schema(kind, partitioned, payload, extra=False) -> pa.Schema:
    fields = list(KEY_KINDS[kind])
    if partitioned:
        fields.append(("p", pa.string()))
    fields += [(c, PAYLOADS[c][0]) for c in payload]
    if extra:
        fields.append(("extra", pa.int64()))
    return pa.schema(fields)


def to_table(kind, partitioned, payload, columns, raw) -> pa.Table:
    """Build the batch, deduplicated keep-last on (key, partition) as MERGE requires."""
    keys = [name for name, _ in KEY_KINDS[kind]]
    seen: dict[tuple, dict] = {}
    nulls = []
    for r in raw:
        row = {**r["key"], **r["payload"]}
        if partitioned:
            row["p"] = r["p"]
        if any(row[k] is None for k in keys):
            nulls.append(row)
            continue
        ident = tuple(row[k] for k in keys) + ((row["p"],) if partitioned else ())
        seen.pop(ident, None)
        seen[ident] = row
    schema = arrow_schema(kind, partitioned, payload, extra="extra" in columns)
    return pa.Table.from_pylist(list(seen.values()) + nulls, schema=schema)


def merge(path: str, data: pa.Table, on: list[str], evolve: bool) -> None:
    predicate = " AND ".join(f"t.{c} = s.{c}" for c in on)
    (
        DeltaTable(path)
        .merge(data, predicate, source_alias="s", target_alias="t", merge_schema=evolve)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


@given(scenarios())
def test_parity_with_merge(scenario):
    kind, partitioned, payload, batches = scenario
    keys = [name for name, _ in KEY_KINDS[kind]]
    on = keys + (["p"] if partitioned else [])
    partition_by = ["p"] if partitioned else None
    with tempfile.TemporaryDirectory() as tmp:
        merge_path, ours_path = f"{tmp}/merge", f"{tmp}/ours"
        schema = arrow_schema(kind, partitioned, payload)
        DeltaTable.create(merge_path, schema, partition_by=partition_by)
        ours = DeltaLiteTable.create(ours_path, schema, partition_by=partition_by)
        evolved = False
        for columns, raw in batches:
            data = to_table(kind, partitioned, payload, columns, raw)
            evolve = "extra" in columns and not evolved
            if evolve:
                # Our engine does not evolve schemas by itself (contract): evolve the twin
                # with deltalake, as a server would, then upsert.
                DeltaTable(ours_path).alter.add_columns(Field("extra", "long", nullable=True))
                ours.reload()
                evolved = True
            merge(merge_path, data, on, evolve)
            stats = ours.upsert(data, primary_keys=keys, partition_key="p" if partitioned else None)
            assert stats.source_rows == data.num_rows
            event(f"rows updated > 0: {stats.rows_updated > 0}")
            assert rows_of(read_delta(ours_path)) == rows_of(read_delta(merge_path))


def relative_files(path: str) -> set[str]:
    return {uri.split(path, 1)[1] for uri in DeltaTable(path).file_uris()}


@given(scenarios(min_batches=2, evolution=False))
def test_rewritten_files_subset_of_merge(scenario):
    """Twins copied from one deltalake-written table: for the same batch, every file we
    remove is one MERGE removes too (we never rewrite more than MERGE)."""
    kind, partitioned, payload, batches = scenario
    keys = [name for name, _ in KEY_KINDS[kind]]
    on = keys + (["p"] if partitioned else [])
    partition_by = ["p"] if partitioned else None
    with tempfile.TemporaryDirectory() as tmp:
        base = f"{tmp}/base"
        schema = arrow_schema(kind, partitioned, payload)
        DeltaTable.create(base, schema, partition_by=partition_by)
        plain = batches
        # Each commit adds files, so partitions hold several, some without the batch's keys.
        for columns, raw in plain[:-1]:
            merge(base, to_table(kind, partitioned, payload, columns, raw), on, False)
        merge_path, ours_path = f"{tmp}/merge", f"{tmp}/ours"
        shutil.copytree(base, merge_path)
        shutil.copytree(base, ours_path)
        before = relative_files(base)
        data = to_table(kind, partitioned, payload, *plain[-1])
        merge(merge_path, data, on, False)
        DeltaLiteTable.open(ours_path).upsert(
            data, primary_keys=keys, partition_key="p" if partitioned else None
        )
        assert rows_of(read_delta(ours_path)) == rows_of(read_delta(merge_path))
        removed_ours = before - relative_files(ours_path)
        removed_merge = before - relative_files(merge_path)
        assert removed_ours <= removed_merge, (removed_ours, removed_merge)
        event(f"files removed: ours {len(removed_ours)}, merge {len(removed_merge)}")
