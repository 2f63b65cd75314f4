"""Every write path of `deltalite serve` stores Delta tables that independent readers read.

Each case writes one table through one server write path (`/upload` in each mode,
`/upsert`, `/append`, `CREATE TABLE … AS`, `INSERT`, `DELETE`, `UPDATE`, both `MERGE`
paths, and compaction through our Python package), unpartitioned (`flat`) and, where the
path writes into an existing table, partitioned by `region`. Two column families: `scalar`
(ints, bigints, doubles, strings, booleans, dates, zoned timestamps, two decimals, binary,
NULLs everywhere) and `nested` (a list of strings, a struct of a string and bytes). The
table is then read by:

- the server itself (`SELECT * … ORDER BY k`, answered as Parquet, so types are exact);
- delta-rs (`deltalake.DeltaTable(path).to_pyarrow_table()`);
- polars (`polars.read_delta`: its own Parquet reader over delta-rs' log replay);
- DuckDB (`read_parquet` over exactly the active files; partition values from the path);

and every reader must return exactly the rows computed here in Python (timestamps to the
microsecond, decimals to the last digit and scale, NULLs, empty strings and bytes). Every
active Parquet file must carry no Arrow view type (`string_view`, `binary_view`, list
views, nested ones too), neither in the schema Arrow derives from it nor in its raw
`ARROW:schema` metadata, since readers that trust the embedded schema refuse view types;
and its columns must have the types the Delta schema says.

An upload's body is a Parquet file written by pyarrow with plain types (`plain`) or with
view types (`view-body`: what DataFusion, arrow-rs and recent pyarrow users produce); the
server must not store the latter as it is.
"""

from __future__ import annotations

import base64
import decimal
import io
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import deltalite
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import ipc

CATALOG = "lakehouse"
SCHEMA = "interop"
PARTITION = "region"

Row = dict[str, Any]


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def to_view(t: pa.DataType) -> pa.DataType:
    """`t` with a view type wherever Arrow has one, nested ones included."""
    if t == pa.string():
        return pa.string_view()
    if t == pa.binary():
        return pa.binary_view()
    if pa.types.is_list(t):
        return pa.list_(to_view(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(f.name, to_view(f.type)) for f in t])
    return t


def sql_cast_type(t: pa.DataType) -> str:
    """The SQL name of a scalar Arrow type, as a cast spells it."""
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE"
    return {
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE",
        pa.string(): "VARCHAR",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
        pa.binary(): "BYTEA",
    }[t]


def ddl_type(t: pa.DataType) -> str:
    """The SQL name of a scalar Arrow type in `CREATE TABLE` (DuckDB's names)."""
    return "BLOB" if t == pa.binary() else sql_cast_type(t)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def fq(table: str) -> str:
    return f"{CATALOG}.{SCHEMA}.{quote(table)}"


def literal(value: Any, t: pa.DataType) -> str:
    """`value` as a SQL expression of the exact scalar type `t`."""
    if value is None:
        return f"CAST(NULL AS {sql_cast_type(t)})"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        text = value.isoformat()
    elif isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, Decimal):
        text = f"{value:f}"
    else:
        text = str(value)
    return f"CAST('{text}' AS {sql_cast_type(t)})"


# ---------------------------------------------------------------------------------------
# Column families: schema, rows, and what the SQL write paths do to them
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    schema: pa.Schema
    base: list[Row]
    new: list[Row]
    changed: Callable[[Row, str], Row]
    # `CREATE TABLE` can spell every column (else the package creates empty tables)
    ddl: bool
    # `SELECT` list of `CREATE TABLE … AS SELECT`, and what it does to a row
    ctas_select: str
    ctas_row: Callable[[Row], Row]
    # `SELECT` list of `INSERT … SELECT`, and what it does to a row
    insert_select: str
    insert_row: Callable[[Row], Row]
    # `DELETE` predicate and the keys it deletes
    delete_where: str
    deleted: tuple[int, ...]
    # `UPDATE` assignments, the keys they apply to, and what they do to a row
    update_set: str
    updated: tuple[int, ...]
    update_row: Callable[[Row], Row]
    # columns the general `MERGE` updates
    merge_updates: tuple[str, ...]

    @property
    def names(self) -> list[str]:
        return self.schema.names

    @property
    def view_schema(self) -> pa.Schema:
        return pa.schema([(f.name, to_view(f.type)) for f in self.schema])

    @property
    def types(self) -> dict[str, pa.DataType]:
        return {f.name: f.type for f in self.schema}

    def values_sql(self, rows: list[Row]) -> str:
        """`(VALUES …) AS v(<columns>)`, every value typed exactly (scalar columns only)."""
        return f"(VALUES {self.tuples_sql(rows)}) AS v({', '.join(map(quote, self.names))})"

    def tuples_sql(self, rows: list[Row]) -> str:
        types = self.types
        return ", ".join(
            "(" + ", ".join(literal(r[n], types[n]) for n in self.names) + ")"
            for r in rows
        )


SCALAR_SCHEMA = pa.schema(
    [
        ("k", pa.int32()),
        ("big", pa.int64()),
        ("dbl", pa.float64()),
        ("s", pa.string()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(12, 3)),
        ("wide", pa.decimal128(38, 10)),
        ("raw", pa.binary()),
        ("note", pa.string()),
        (PARTITION, pa.string()),
    ]
)


def scalar_row(**values: Any) -> Row:
    assert set(values) <= set(SCALAR_SCHEMA.names), values
    return {n: values.get(n) for n in SCALAR_SCHEMA.names}


SCALAR_BASE: list[Row] = [
    scalar_row(
        k=1,
        big=2**62 + 1,
        dbl=0.1,
        s="plain",
        flag=True,
        day=date(2024, 2, 29),
        ts=ts("2024-02-29T23:59:59.999999+00:00"),
        amount=Decimal("123456789.678"),
        wide=Decimal("1234567890123456789012345678.0123456789"),
        raw=b"\x00\x01\xff",
        note=None,
        region="eu",
    ),
    scalar_row(
        k=2,
        big=-(2**63),
        dbl=-1.5e300,
        s="",
        flag=False,
        day=date(1969, 12, 31),
        ts=ts("1969-07-20T20:17:40.000001+00:00"),
        amount=Decimal("-0.001"),
        wide=Decimal("-0.0000000001"),
        raw=b"",
        note="second",
        region="us",
    ),
    # NULL in every nullable column
    scalar_row(k=3, region="eu"),
    scalar_row(
        k=4,
        big=2**63 - 1,
        dbl=5e-324,
        s='雪 é 🚀 it\'s "quoted"\nnewline',
        flag=True,
        day=date(1900, 3, 1),
        ts=ts("1900-01-01T00:00:00.000001+00:00"),
        amount=Decimal("999999999.999"),
        wide=Decimal("-9999999999999999999999999999.9999999999"),
        raw=bytes(range(256)),
        note="",
        region="apac",
    ),
    scalar_row(
        k=5,
        big=0,
        dbl=-0.0,
        s="five",
        flag=False,
        day=date(2000, 1, 1),
        ts=ts("2000-01-01T12:00:00+05:30"),
        amount=Decimal("0.000"),
        wide=Decimal("0E-10"),
        raw=b"five",
        note=None,
        region="us",
    ),
    scalar_row(
        k=6,
        big=-1,
        dbl=1.7976931348623157e308,
        s="x" * 300,
        flag=None,
        day=date(2199, 12, 31),
        ts=ts("2199-12-31T23:59:59.123456+00:00"),
        amount=None,
        wide=Decimal("0.5"),
        raw=b"\xde\xad\xbe\xef",
        note="six",
        region="eu",
    ),
    scalar_row(
        k=7,
        big=42,
        dbl=3.141592653589793,
        s="seven",
        flag=True,
        day=None,
        ts=None,
        amount=Decimal("-999999999.999"),
        wide=None,
        raw=None,
        note="seven",
        region="apac",
    ),
    scalar_row(
        k=8,
        big=8,
        dbl=None,
        s=None,
        flag=False,
        day=date(1970, 1, 1),
        ts=ts("1970-01-01T00:00:00+00:00"),
        amount=Decimal("1.001"),
        wide=Decimal("1.0000000001"),
        raw=b"\x08",
        note="eight",
        region="us",
    ),
]

SCALAR_NEW: list[Row] = [
    scalar_row(
        k=9,
        big=9,
        dbl=9.5,
        s="nine",
        flag=True,
        day=date(2025, 9, 9),
        ts=ts("2025-09-09T09:09:09.090909+00:00"),
        amount=Decimal("9.009"),
        wide=Decimal("9.0000000009"),
        raw=b"\x09",
        note=None,
        region="eu",
    ),
    scalar_row(
        k=10,
        big=None,
        dbl=-10.25,
        s="ten",
        flag=None,
        day=date(2010, 10, 10),
        ts=ts("2010-10-10T10:10:10.101010+00:00"),
        amount=Decimal("-10.010"),
        wide=None,
        raw=b"ten",
        note="ten",
        region="apac",
    ),
]


def scalar_changed(r: Row, tag: str) -> Row:
    """`r` with every non-key, non-partition column changed."""
    return r | {
        "big": (r["big"] or 0) // 2 + 7,
        "dbl": 2.5,
        "s": f"{tag}-{r['k']}",
        "flag": not r["flag"],
        "day": date(2030, 6, r["k"]),
        "ts": ts(f"2030-06-{r['k']:02d}T01:02:03.{r['k']:06d}+00:00"),
        "amount": Decimal(f"{r['k']}.{r['k']:03d}"),
        "wide": Decimal(f"-{r['k']}.0000000009"),
        "raw": f"{tag}{r['k']}".encode(),
        "note": None if r["note"] else tag,
    }


def scalar_updated(r: Row) -> Row:
    return r | {
        "s": None if r["s"] is None else r["s"] + "-upd",
        "amount": None if r["amount"] is None else r["amount"] - Decimal("0.001"),
        "ts": ts("2031-01-02T03:04:05.654321+00:00"),
        "wide": Decimal("7.7777777777"),
        "raw": b"\xab",
        "note": f"n{r['k']}",
        "flag": None if r["flag"] is None else not r["flag"],
        "day": date(2031, 1, 2),
    }


SCALAR = Family(
    name="scalar",
    schema=SCALAR_SCHEMA,
    base=SCALAR_BASE,
    new=SCALAR_NEW,
    changed=scalar_changed,
    ddl=True,
    # Expressions, not only columns: casts and string functions are where DataFusion
    # likes to produce view types.
    ctas_select=", ".join(
        "s || '' AS s"
        if f.name == "s"
        else f"CAST({quote(f.name)} AS {sql_cast_type(f.type)}) AS {quote(f.name)}"
        for f in SCALAR_SCHEMA
    ),
    ctas_row=lambda r: r,
    insert_select=", ".join(
        "upper(s) AS s"
        if n == "s"
        else "CAST(note AS VARCHAR) AS note"
        if n == "note"
        else quote(n)
        for n in SCALAR_SCHEMA.names
    ),
    insert_row=lambda r: r | {"s": None if r["s"] is None else r["s"].upper()},
    delete_where="k IN (2, 7) OR s = 'five'",
    deleted=(2, 5, 7),
    update_set=(
        "s = s || '-upd', amount = amount - CAST('0.001' AS DECIMAL(12,3)), "
        "ts = CAST('2031-01-02T03:04:05.654321Z' AS TIMESTAMP WITH TIME ZONE), "
        "wide = CAST('7.7777777777' AS DECIMAL(38,10)), raw = X'ab', "
        "note = 'n' || CAST(k AS VARCHAR), flag = NOT flag, day = DATE '2031-01-02'"
    ),
    updated=(1, 3, 4, 8),
    update_row=scalar_updated,
    merge_updates=("s", "ts", "amount", "wide", "raw", "note"),
)

NESTED_SCHEMA = pa.schema(
    [
        ("k", pa.int32()),
        ("tags", pa.list_(pa.string())),
        ("attrs", pa.struct([("name", pa.string()), ("blob", pa.binary())])),
        (PARTITION, pa.string()),
    ]
)


def nested_row(k: int, tags, attrs, region: str) -> Row:
    return {"k": k, "tags": tags, "attrs": attrs, "region": region}


NESTED_BASE = [
    nested_row(1, ["a", "b"], {"name": "one", "blob": b"\x00"}, "eu"),
    nested_row(2, [], {"name": None, "blob": None}, "us"),
    nested_row(3, None, None, "eu"),
    nested_row(4, [None, "雪", ""], {"name": "", "blob": b""}, "apac"),
    nested_row(5, ["x" * 100], {"name": "five", "blob": bytes(range(256))}, "us"),
    nested_row(6, ["six"], {"name": "six", "blob": None}, "apac"),
]
NESTED_NEW = [
    nested_row(7, ["seven", None], {"name": None, "blob": b"\x07"}, "eu"),
    nested_row(8, None, {"name": "eight", "blob": b"8"}, "apac"),
]


def nested_changed(r: Row, tag: str) -> Row:
    return r | {
        "tags": (r["tags"] or []) + [tag],
        "attrs": {"name": f"{tag}-{r['k']}", "blob": tag.encode()},
    }


NESTED = Family(
    name="nested",
    schema=NESTED_SCHEMA,
    base=NESTED_BASE,
    new=NESTED_NEW,
    changed=nested_changed,
    ddl=False,
    ctas_select=(
        "k, tags, CASE WHEN attrs IS NULL THEN NULL ELSE named_struct("
        "'name', CAST(attrs['name'] AS VARCHAR), 'blob', attrs['blob']) END AS attrs, region"
    ),
    ctas_row=lambda r: r,
    insert_select="k, tags, attrs, region",
    insert_row=lambda r: r,
    delete_where="k = 2 OR attrs['name'] = 'five'",
    deleted=(2, 5),
    update_set=(
        "tags = make_array('upd', CAST(k AS VARCHAR)), "
        "attrs = named_struct('name', 'upd' || CAST(k AS VARCHAR), 'blob', X'ab')"
    ),
    updated=(1, 3, 4),
    update_row=lambda r: (
        r
        | {
            "tags": ["upd", str(r["k"])],
            "attrs": {"name": f"upd{r['k']}", "blob": b"\xab"},
        }
    ),
    merge_updates=("tags", "attrs"),
)

FAMILIES = {f.name: f for f in (SCALAR, NESTED)}


def by_key(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: r["k"])


def upserted(old: list[Row], new: list[Row]) -> list[Row]:
    keyed = {r["k"]: r for r in old}
    keyed.update({r["k"]: r for r in new})
    return by_key(list(keyed.values()))


# ---------------------------------------------------------------------------------------
# Talking to the server
# ---------------------------------------------------------------------------------------


def parquet_body(rows: list[Row], family: Family, flavor: str) -> bytes:
    schema = {"plain": family.schema, "view-body": family.view_schema}[flavor]
    table = pa.Table.from_pylist(rows, schema=family.schema).cast(schema)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


class Api:
    def __init__(self, server, client):
        self.server = server
        self.client = client
        self.data = Path(server.data)

    def post(self, route: str, params: dict[str, str], body: bytes, ctype: str) -> dict:
        url = f"{self.server.base}{route}?{urllib.parse.urlencode(params)}"
        headers = {"Authorization": self.client.auth, "Content-Type": ctype}
        request = urllib.request.Request(url, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(
                f"{route} {params} answered {e.code}: {e.read().decode(errors='replace')}"
            ) from None
        assert answer.get("ok") is True, f"{route} {params}: {answer}"
        return answer

    def upload(
        self, f: Family, table: str, rows, mode: str, body: str = "plain", **params
    ):
        params = {
            "catalog": CATALOG,
            "schema": SCHEMA,
            "table": table,
            "mode": mode,
        } | params
        self.post(
            "/upload",
            params,
            parquet_body(rows, f, body),
            "application/vnd.apache.parquet",
        )

    def upsert(self, f: Family, table: str, rows, keys: list[str], body: str = "plain"):
        params = {"catalog": CATALOG, "schema": SCHEMA, "table": table}
        params["primary_key"] = ",".join(keys)
        self.post(
            "/upsert",
            params,
            parquet_body(rows, f, body),
            "application/vnd.apache.parquet",
        )

    def append_json(self, table: str, objects: list[dict]):
        params = {"catalog": CATALOG, "schema": SCHEMA, "table": table}
        self.post("/append", params, json.dumps(objects).encode(), "application/json")

    def sql(self, statement: str) -> list[tuple]:
        return self.client.rows(statement)

    def select_parquet(self, statement: str) -> pa.Table:
        """`statement`'s answer with `format=parquet`: the server's exact Arrow types."""
        body = json.dumps({"statement": statement, "format": "parquet"}).encode()
        headers = {
            "Authorization": self.client.auth,
            "Content-Type": "application/json",
        }
        request = urllib.request.Request(
            f"{self.server.base}/query", data=body, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                payload = response.read()
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{statement}: {e.code} {e.read().decode()}") from None
        return pq.read_table(pa.BufferReader(payload))

    def path(self, table: str) -> Path:
        return self.data / CATALOG / SCHEMA / table

    def create_empty(self, f: Family, table: str, partitioned: bool):
        """An empty table: `CREATE TABLE` through the server, or, when the server cannot
        (partitioning, nested columns), through our Python package."""
        if partitioned or not f.ddl:
            deltalite.DeltaLiteTable.create(
                str(self.path(table)),
                f.schema,
                partition_by=PARTITION if partitioned else None,
            )
        else:
            columns = ", ".join(f"{quote(c.name)} {ddl_type(c.type)}" for c in f.schema)
            self.sql(f"CREATE TABLE {fq(table)} ({columns})")


# ---------------------------------------------------------------------------------------
# Write paths: each writes table `t` and answers the rows it must hold
# ---------------------------------------------------------------------------------------


def seed(api: Api, f: Family, t: str, partitioned: bool) -> list[Row]:
    """`t` holding `f.base`, in two upload commits (two files at least)."""
    api.create_empty(f, t, partitioned)
    half = len(f.base) // 2
    api.upload(f, t, f.base[:half], "append")
    api.upload(f, t, f.base[half:], "append")
    return by_key(f.base)


def w_upload_create(api: Api, f: Family, t: str, partitioned: bool, body: str):
    api.upload(f, t, f.base, "create", body)
    return by_key(f.base)


def w_upload_append(api: Api, f: Family, t: str, partitioned: bool, body: str):
    api.create_empty(f, t, partitioned)
    api.upload(f, t, f.base[:5], "append", body)
    api.upload(f, t, f.base[5:], "append", body)
    return by_key(f.base)


def w_upload_overwrite(api: Api, f: Family, t: str, partitioned: bool, body: str):
    seed(api, f, t, partitioned)
    rows = [f.changed(r, "over") for r in f.base[1:5]] + f.new
    api.upload(f, t, rows, "overwrite", body)
    return by_key(rows)


def w_upload_upsert(api: Api, f: Family, t: str, partitioned: bool, body: str):
    old = seed(api, f, t, partitioned)
    new = [f.changed(f.base[i], "ups") for i in (0, 2, 3, 5)] + f.new
    keys = f"k,{PARTITION}" if partitioned else "k"
    api.upload(f, t, new, "upsert", body, primary_key=keys)
    return upserted(old, new)


def w_upsert(api: Api, f: Family, t: str, partitioned: bool, body: str):
    old = seed(api, f, t, partitioned)
    new = [f.changed(f.base[i], "ups") for i in (1, 2, 5)] + f.new
    api.upsert(f, t, new, ["k", PARTITION] if partitioned else ["k"], body)
    return upserted(old, new)


def json_value(v: Any) -> Any:
    """`v` as `/append` takes it: decimals as strings (exact), timestamps as RFC 3339,
    bytes as text (a JSON string is stored as its UTF-8 bytes in a binary column)."""
    if isinstance(v, Decimal):
        return f"{v:f}"
    if isinstance(v, datetime):
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    return v


def hexed(v: Any) -> Any:
    """What `/append` stores for `v`: bytes as the UTF-8 bytes of their hex text."""
    if isinstance(v, bytes):
        return v.hex().encode()
    if isinstance(v, list):
        return [hexed(x) for x in v]
    if isinstance(v, dict):
        return {k: hexed(x) for k, x in v.items()}
    return v


def w_append_json(api: Api, f: Family, t: str, partitioned: bool):
    api.create_empty(f, t, partitioned)
    api.append_json(t, [json_value(r) for r in f.base[:3]])
    api.append_json(t, [json_value(r) for r in f.base[3:]])
    return by_key([hexed(r) for r in f.base])


def w_ctas_values(api: Api, f: Family, t: str, partitioned: bool):
    api.sql(f"CREATE TABLE {fq(t)} AS SELECT * FROM {f.values_sql(f.base)}")
    return by_key(f.base)


def w_ctas_select(api: Api, f: Family, t: str, partitioned: bool):
    api.upload(f, f"{t}_src", f.base, "create")
    api.sql(
        f"CREATE TABLE {fq(t)} AS SELECT {f.ctas_select} FROM {fq(t + '_src')} WHERE k <> 5"
    )
    return by_key([f.ctas_row(r) for r in f.base if r["k"] != 5])


def w_insert_values(api: Api, f: Family, t: str, partitioned: bool):
    api.create_empty(f, t, partitioned)
    api.sql(f"INSERT INTO {fq(t)} SELECT * FROM {f.values_sql(f.base[:5])}")
    api.sql(f"INSERT INTO {fq(t)} VALUES {f.tuples_sql(f.base[5:])}")
    return by_key(f.base)


def w_insert_select(api: Api, f: Family, t: str, partitioned: bool):
    api.create_empty(f, t, partitioned)
    api.upload(f, f"{t}_src", f.base, "create")
    columns = ", ".join(map(quote, f.names))
    api.sql(
        f"INSERT INTO {fq(t)} ({columns}) SELECT {f.insert_select} FROM {fq(t + '_src')}"
    )
    return by_key([f.insert_row(r) for r in f.base])


def w_delete(api: Api, f: Family, t: str, partitioned: bool):
    old = seed(api, f, t, partitioned)
    api.sql(f"DELETE FROM {fq(t)} WHERE {f.delete_where}")
    return [r for r in old if r["k"] not in f.deleted]


def w_update(api: Api, f: Family, t: str, partitioned: bool):
    old = seed(api, f, t, partitioned)
    keys = ", ".join(map(str, f.updated))
    api.sql(f"UPDATE {fq(t)} SET {f.update_set} WHERE k IN ({keys})")
    return [f.update_row(r) if r["k"] in f.updated else r for r in old]


def merge_source(f: Family) -> list[Row]:
    return [f.changed(f.base[i], "merge") for i in (1, 3, 5)] + f.new


def last_commit(path: Path) -> dict:
    return deltalake.DeltaTable(str(path)).history(1)[0]


def w_merge_upsert(api: Api, f: Family, t: str, partitioned: bool):
    """The shape dlt and dbt send; the server runs it as the engine's upsert."""
    old = seed(api, f, t, partitioned)
    source = merge_source(f)
    api.upload(f, f"{t}_src", source, "create")
    on = "d.k = s.k" + (f" AND d.{PARTITION} = s.{PARTITION}" if partitioned else "")
    keys = {"k", PARTITION} if partitioned else {"k"}
    sets = ", ".join(f"{quote(n)} = s.{quote(n)}" for n in f.names if n not in keys)
    columns = ", ".join(map(quote, f.names))
    values = ", ".join(f"s.{quote(n)}" for n in f.names)
    api.sql(
        f"MERGE INTO {fq(t)} AS d USING {fq(t + '_src')} AS s ON {on} "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED THEN INSERT ({columns}) VALUES ({values})"
    )
    commit = last_commit(api.path(t))
    assert commit.get("deltalite.operation") == "merge", (
        f"not run as an upsert: {commit}"
    )
    return upserted(old, source)


def w_merge_general(api: Api, f: Family, t: str, partitioned: bool):
    """A non-equality `ON` (the same matches): the general path."""
    old = seed(api, f, t, partitioned)
    source = merge_source(f)
    if f.ddl:
        using = f"(SELECT * FROM {f.values_sql(source)})"
    else:
        api.upload(f, f"{t}_src", source, "create")
        using = fq(t + "_src")
    sets = ", ".join(f"{quote(n)} = s.{quote(n)}" for n in f.merge_updates)
    columns = ", ".join(map(quote, f.names))
    values = ", ".join(f"s.{quote(n)}" for n in f.names)
    api.sql(
        f"MERGE INTO {fq(t)} AS d USING {using} AS s ON d.k <= s.k AND d.k >= s.k "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED THEN INSERT ({columns}) VALUES ({values})"
    )
    commit = last_commit(api.path(t))
    assert commit.get("operation") == "MERGE" and "deltalite.operation" not in commit, (
        commit
    )
    by_k = {r["k"]: r for r in source}
    out = [
        r | {n: by_k[r["k"]][n] for n in f.merge_updates} if r["k"] in by_k else r
        for r in old
    ]
    old_keys = {r["k"] for r in old}
    return by_key(out + [r for r in source if r["k"] not in old_keys])


def w_compact(api: Api, f: Family, t: str, partitioned: bool):
    api.create_empty(f, t, partitioned)
    for i in range(0, len(f.base), 2):
        api.upload(f, t, f.base[i : i + 2], "append")
    api.upload(f, t, f.new, "append", "view-body")
    before = len(deltalake.DeltaTable(str(api.path(t))).file_uris())
    stats = deltalite.DeltaLiteTable.open(str(api.path(t))).compact()
    after = len(deltalake.DeltaTable(str(api.path(t))).file_uris())
    assert stats.files_removed > 0 and after < before, (
        stats.files_removed,
        before,
        after,
    )
    return by_key(f.base + f.new)


BODIES = ("plain", "view-body")
BOTH = (False, True)
# id, writer, layouts (partitioned?), takes a body flavour, families
PATHS = [
    ("upload_create", w_upload_create, (False,), True, (SCALAR, NESTED)),
    ("upload_append", w_upload_append, BOTH, True, (SCALAR, NESTED)),
    ("upload_overwrite", w_upload_overwrite, BOTH, True, (SCALAR, NESTED)),
    ("upload_upsert", w_upload_upsert, BOTH, True, (SCALAR, NESTED)),
    ("upsert", w_upsert, BOTH, True, (SCALAR, NESTED)),
    ("append_json", w_append_json, BOTH, False, (SCALAR, NESTED)),
    ("ctas_values", w_ctas_values, (False,), False, (SCALAR,)),
    ("ctas_select", w_ctas_select, (False,), False, (SCALAR, NESTED)),
    ("insert_values", w_insert_values, BOTH, False, (SCALAR,)),
    ("insert_select", w_insert_select, BOTH, False, (SCALAR, NESTED)),
    ("delete", w_delete, BOTH, False, (SCALAR, NESTED)),
    ("update", w_update, BOTH, False, (SCALAR, NESTED)),
    ("merge_upsert", w_merge_upsert, BOTH, False, (SCALAR, NESTED)),
    ("merge_general", w_merge_general, BOTH, False, (SCALAR, NESTED)),
    ("compact", w_compact, BOTH, False, (SCALAR, NESTED)),
]
WRITERS = {name: writer for name, writer, *_ in PATHS}


@dataclass(frozen=True)
class Case:
    path: str
    family: str
    partitioned: bool
    body: str | None

    @property
    def id(self) -> str:
        parts = [self.path, self.family] + ([self.body] if self.body else [])
        return "-".join(parts + ["partitioned" if self.partitioned else "flat"])


CASES = [
    Case(name, f.name, partitioned, body)
    for name, _, layouts, takes_body, families in PATHS
    for f in families
    for partitioned in layouts
    for body in (BODIES if takes_body else (None,))
] + [Case("append_json_create", "json", False, None)]


@dataclass
class Written:
    path: Path
    table: str
    rows: list[Row]
    types: dict[str, pa.DataType]
    partitioned: bool


def w_append_json_create(api: Api, t: str) -> Written:
    """`/append` into a missing table: it is created with the types JSON has."""
    objects = [
        {"k": r["k"], "big": r["big"], "dbl": r["dbl"], "s": r["s"], "flag": r["flag"]}
        for r in SCALAR_BASE
    ]
    api.append_json(t, objects)
    types = {"k": pa.int64(), "big": pa.int64(), "dbl": pa.float64(), "s": pa.string()}
    types["flag"] = pa.bool_()
    return Written(api.path(t), t, by_key(objects), types, False)


@pytest.fixture(scope="module")
def api(server, client) -> Api:
    client.query(f"CREATE SCHEMA IF NOT EXISTS {CATALOG}.{SCHEMA}")
    return Api(server, client)


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.id)
def written(request, api) -> Written:
    case: Case = request.param
    table = case.id.replace("-", "_")
    if case.path == "append_json_create":
        return w_append_json_create(api, table)
    family = FAMILIES[case.family]
    args = (case.body,) if case.body else ()
    rows = WRITERS[case.path](api, family, table, case.partitioned, *args)
    partitions = deltalake.DeltaTable(str(api.path(table))).metadata().partition_columns
    if case.partitioned and case.path != "upload_overwrite":
        assert partitions == [PARTITION], f"partitioning lost: {partitions}"
    return Written(api.path(table), table, rows, family.types, bool(partitions))


# ---------------------------------------------------------------------------------------
# Reading back
# ---------------------------------------------------------------------------------------


def active_files(w: Written) -> list[str]:
    uris = deltalake.DeltaTable(str(w.path)).file_uris()
    assert uris, "the table has no active file"
    return [
        urllib.parse.unquote(urllib.parse.urlparse(u).path)
        if u.startswith("file://")
        else u
        for u in uris
    ]


def view_types(t: pa.DataType, where: str) -> list[str]:
    """Every view type in `t`, nested ones included, as `where: type`."""
    found = []
    if (
        pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        found.append(f"{where}: {t}")
    if isinstance(t, pa.DictionaryType):
        found += view_types(t.value_type, f"{where}.<value>")
    for i in range(t.num_fields):
        child = t.field(i)
        found += view_types(child.type, f"{where}.{child.name}")
    return found


def schema_view_types(schema: pa.Schema) -> list[str]:
    return [v for f in schema for v in view_types(f.type, f.name)]


def exact(t: pa.DataType) -> str:
    """A type, exactly, but for list item names and nullability (and dictionary
    encoding, which says nothing about the values)."""
    if pa.types.is_dictionary(t):
        return exact(t.value_type)
    if pa.types.is_list(t):
        return f"list<{exact(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{c.name}: {exact(c.type)}" for c in t) + ">"
    return str(t)


def kind(t: pa.DataType) -> str:
    """A type as a reader may legitimately return it: string flavours are one, as are
    binary and list ones; timestamps must be microsecond and zoned (any zone: the values
    are instants); decimals keep their scale."""
    if pa.types.is_dictionary(t):
        return kind(t.value_type)
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
    ):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
    ):
        return "binary"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, zoned={t.tz is not None}]"
    if pa.types.is_decimal(t):
        return f"decimal(scale={t.scale})"
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return f"list<{kind(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{c.name}: {kind(c.type)}" for c in t) + ">"
    return str(t)


def delta_shape_of_arrow(t: pa.DataType) -> Any:
    if pa.types.is_list(t):
        return {"array": delta_shape_of_arrow(t.value_type)}
    if pa.types.is_struct(t):
        return {"struct": [(c.name, delta_shape_of_arrow(c.type)) for c in t]}
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    return {
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.float64(): "double",
        pa.string(): "string",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.timestamp("us", tz="UTC"): "timestamp",
        pa.binary(): "binary",
    }[t]


def delta_shape(t: Any) -> Any:
    """A Delta schema type (its JSON), without nullability and metadata."""
    if isinstance(t, str):
        return t
    if t["type"] == "array":
        return {"array": delta_shape(t["elementType"])}
    if t["type"] == "struct":
        return {"struct": [(f["name"], delta_shape(f["type"])) for f in t["fields"]]}
    return t


def normalize(value: Any) -> Any:
    if isinstance(value, datetime):
        # A naive datetime stays naive, and then equals no expected (zoned) value.
        return value.astimezone(UTC) if value.tzinfo is not None else value
    return value


def rows_of(table: pa.Table, names: list[str]) -> list[Row]:
    assert sorted(table.column_names) == sorted(names), table.schema
    return by_key([{n: normalize(r[n]) for n in names} for r in table.to_pylist()])


def same(a: Any, e: Any) -> bool:
    """Equal, with the value's type: `Decimal` and `float`, `bytes` and `str` never
    compare equal by accident; -0.0 is not 0.0; decimals keep their scale."""
    if isinstance(e, float) and isinstance(a, float):
        return a == e and str(a) == str(e)
    if isinstance(e, Decimal) and isinstance(a, Decimal):
        return a == e and a.as_tuple().exponent == e.as_tuple().exponent
    if isinstance(e, list) and isinstance(a, list):
        return len(a) == len(e) and all(same(x, y) for x, y in zip(a, e, strict=True))
    if isinstance(e, dict) and isinstance(a, dict):
        return a.keys() == e.keys() and all(same(a[n], e[n]) for n in e)
    return type(a) is type(e) and a == e


def assert_rows(actual: list[Row], expected: list[Row], reader: str):
    assert [r["k"] for r in actual] == [r["k"] for r in expected], (
        f"{reader}: wrong keys"
    )
    problems = [
        f"k={e['k']} {n}: got {a[n]!r}, expected {e[n]!r}"
        for a, e in zip(actual, expected, strict=True)
        for n in e
        if not same(a[n], e[n])
    ]
    assert not problems, f"{reader} read wrong values:\n" + "\n".join(problems[:20])


def stored(value: Any, t: pa.DataType) -> Any:
    """`value` as a column of type `t` holds it: decimals at the column's scale
    (Decimal("0.5") in a scale-10 column reads as 0.5000000000)."""
    if value is None:
        return None
    if pa.types.is_decimal(t):
        context = decimal.Context(prec=80)
        return value.quantize(Decimal(1).scaleb(-t.scale), context=context)
    if pa.types.is_list(t):
        return [stored(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {c.name: stored(value[c.name], c.type) for c in t}
    return value


def expected(w: Written) -> list[Row]:
    return [{n: stored(r[n], t) for n, t in w.types.items()} for r in w.rows]


def assert_kinds(schema: pa.Schema, w: Written, reader: str):
    got = {f.name: kind(f.type) for f in schema}
    wrong = {
        n: (got.get(n), kind(t)) for n, t in w.types.items() if got.get(n) != kind(t)
    }
    assert not wrong, f"{reader} returned types (got, expected): {wrong}"


# ---------------------------------------------------------------------------------------
# The checks, each one test per write path
# ---------------------------------------------------------------------------------------


def test_view_type_check_sees_view_types(tmp_path):
    """The check below is not vacuous: it finds view types, nested ones too, in both
    the derived schema and the raw `ARROW:schema`."""
    path = tmp_path / "views.parquet"
    rows = [nested_row(1, ["a"], {"name": "n", "blob": b"b"}, "eu")]
    path.write_bytes(parquet_body(rows, NESTED, "view-body"))
    w = Written(tmp_path, "views", rows, NESTED.types, False)
    found = file_view_types(w, str(path))
    assert "views.parquet: pq.read_schema: tags.element: string_view" in found
    assert "views.parquet: ARROW:schema: attrs.blob: binary_view" in found
    assert "views.parquet: ARROW:schema: region: string_view" in found


def file_view_types(w: Written, f: str) -> list[str]:
    name = Path(f).relative_to(w.path)
    offenders = [
        f"{name}: pq.read_schema: {v}" for v in schema_view_types(pq.read_schema(f))
    ]
    metadata = pq.read_metadata(f).metadata or {}
    if b"ARROW:schema" in metadata:
        embedded = ipc.read_schema(
            pa.py_buffer(base64.b64decode(metadata[b"ARROW:schema"]))
        )
        offenders += [f"{name}: ARROW:schema: {v}" for v in schema_view_types(embedded)]
    return offenders


def test_files_embed_no_view_types(written: Written):
    offenders = [v for f in active_files(written) for v in file_view_types(written, f)]
    assert not offenders, "view types in stored Parquet files:\n" + "\n".join(offenders)


def test_delta_schema(written: Written):
    dt = deltalake.DeltaTable(str(written.path))
    fields = {
        f["name"]: delta_shape(f["type"])
        for f in json.loads(dt.schema().to_json())["fields"]
    }
    assert fields == {n: delta_shape_of_arrow(t) for n, t in written.types.items()}


def test_file_types_match_delta_schema(written: Written):
    """Each file's columns (partition columns live in the path) have the Delta schema's
    types; string, binary and list flavours aside, which the view check covers."""
    wrong = []
    for f in active_files(written):
        schema = pq.read_schema(f)
        name = Path(f).relative_to(written.path)
        for n, t in written.types.items():
            if written.partitioned and n == PARTITION:
                if n in schema.names:
                    wrong.append(f"{name}: stores the partition column")
            elif n not in schema.names:
                wrong.append(f"{name}: {n}: missing")
            elif kind(schema.field(n).type) != kind(t):
                wrong.append(f"{name}: {n}: {schema.field(n).type}, expected {t}")
    assert not wrong, "\n".join(wrong)


def server_select(written: Written, api: Api) -> pa.Table:
    return api.select_parquet(f"SELECT * FROM {fq(written.table)} ORDER BY k")


def test_server_reads(written: Written, api: Api):
    table = server_select(written, api)
    assert_kinds(table.schema, written, "server")
    assert_rows(rows_of(table, list(written.types)), expected(written), "server")


def test_server_parquet_answer_has_exact_plain_types(written: Written, api: Api):
    """`format=parquet` promises exact Arrow types: the table's, with no view types (a
    client reading the answer trusts its `ARROW:schema` as much as a Delta reader)."""
    table = server_select(written, api)
    views = schema_view_types(table.schema)
    assert not views, "view types in the server's Parquet answer:\n" + "\n".join(views)
    got = {f.name: exact(f.type) for f in table.schema}
    assert got == {n: exact(t) for n, t in written.types.items()}


def test_deltalake_reads(written: Written):
    table = deltalake.DeltaTable(str(written.path)).to_pyarrow_table()
    assert_kinds(table.schema, written, "deltalake")
    assert_rows(rows_of(table, list(written.types)), expected(written), "deltalake")


def test_polars_reads(written: Written):
    table = pl.read_delta(str(written.path)).to_arrow()
    assert_kinds(table.schema, written, "polars")
    assert_rows(rows_of(table, list(written.types)), expected(written), "polars")


def test_duckdb_reads(written: Written):
    files = active_files(written)
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        options = ""
        if written.partitioned:
            options = (
                f", hive_partitioning = true, hive_types = {{'{PARTITION}': VARCHAR}}"
            )
        table = con.sql(
            f"SELECT * FROM read_parquet({files!r}, union_by_name = true{options})"
        ).to_arrow_table()
    finally:
        con.close()
    assert_kinds(table.schema, written, "duckdb")
    assert_rows(rows_of(table, list(written.types)), expected(written), "duckdb")
