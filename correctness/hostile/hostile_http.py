"""Hostile input against a real `deltalite serve` process.

Starts the binary on an ephemeral port with a temporary data root, then for a bounded
number of iterations sends malformed and adversarial requests: mutated and random bodies
to /upload (every mode), /upsert and /append under assorted Content-Types; stacked SQL,
file-access SQL; table names with path tricks; huge headers; oversized bodies. A side
thread meanwhile drips bodies and headers slowly over raw sockets.

Every answer must be a 4xx (or a 2xx for a harmless valid case), never a 5xx; the server
must keep answering /healthz, its RSS must stay under a bound, and the tables written with
valid data must stay readable (a corrupt body must never be stored). Prints totals and
exits non-zero when any of that fails.

Usage: .venv/bin/python correctness/hostile/hostile_http.py --bin target/debug/deltalite
       [--iterations 2000] [--seed 1] [--rss-limit-mb 1024]
"""

import argparse
import base64
import collections
import io
import json
import os
import random
import re
import select
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from server_process import ServerProcess

USER, PASSWORD = "alice", "secret"
AUTH = (USER, PASSWORD)
MAX_BODY = 4 * 1024 * 1024
IDLE_TIMEOUT_S = 2


def parquet_bytes(table: pa.Table, row_group_size: int = 50) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group_size)
    return buf.getvalue()


def seed_table(rng: random.Random, n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": pa.array(
                [f"n{rng.randrange(1000)}" if i % 5 else None for i in range(n)]
            ),
            "v": pa.array([rng.random() * 100 for _ in range(n)], pa.float64()),
        }
    )


def csv_body(t: pa.Table) -> bytes:
    out = ["id,name,v"]
    for i, n, v in zip(*(t.column(c).to_pylist() for c in ("id", "name", "v"))):
        out.append(f"{i},{'' if n is None else n},{v}")
    return ("\n".join(out) + "\n").encode()


def json_body(t: pa.Table) -> bytes:
    return json.dumps(t.to_pylist()).encode()


def ndjson_body(t: pa.Table) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in t.to_pylist())


def mutate(rng: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    for _ in range(rng.randint(1, 6)):
        if not b:
            break
        op = rng.randrange(8)
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= rng.randint(1, 255)
        elif op == 1:  # near the end: Parquet footers, closing brackets
            j = max(0, len(b) - 1 - rng.randrange(min(64, len(b))))
            b[j] ^= rng.randint(1, 255)
        elif op == 2:
            del b[rng.randrange(len(b) + 1) :]
        elif op == 3:
            del b[i : i + rng.randint(1, 64)]
        elif op == 4:
            b[i:i] = os.urandom(rng.randint(1, 32))
        elif op == 5:
            j, n = rng.randrange(len(b)), rng.randint(1, 256)
            chunk = b[j : j + n]
            b[i : i + len(chunk)] = chunk
        elif op == 6:
            v = rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, rng.getrandbits(32)])
            b[i : i + 4] = v.to_bytes(4, "little")
        else:
            b[i:i] = rng.choice(
                [b'"', b"\n", b",", b"[", b"{", b"\xff", b"\x00", b"\\"]
            )
    return bytes(b)


CONTENT_TYPES = [
    "application/parquet",
    "application/vnd.apache.parquet",
    "text/csv",
    "text/csv; charset=latin1",
    "application/json",
    "application/x-ndjson",
    "application/octet-stream",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "image/png",
    "application/vnd.foo+json",
    "",
    ";;;",
    "text/csv" + ";x" * 200,
]

STACKED_AND_FILE_SQL = [
    "SELECT 1; DROP TABLE victim",
    "SELECT 1; DROP TABLE lakehouse.main.victim;",
    "DROP TABLE victim; SELECT 1",
    "SELECT * FROM victim; DELETE FROM victim",
    "SELECT 1;;;;",
    ";",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_json('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    'SELECT * FROM "/etc/passwd"',
    "SELECT * FROM 'file:///etc/passwd'",
    "SELECT * FROM '../../../../etc/passwd'",
    "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
    "CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION 'file:///'",
    "COPY (SELECT 1) TO '/tmp/deltalite-hostile-copy.csv'",
    "COPY victim TO '/tmp/deltalite-hostile-copy.parquet' STORED AS PARQUET",
    "ATTACH '/tmp/x.db' AS x",
    "ATTACH DATABASE '/etc/passwd' AS p",
    "INSTALL httpfs; LOAD httpfs",
    "SET datafusion.catalog.location = '/etc'",
    "SET datafusion.execution.target_partitions = 100000",
    "CREATE TABLE '../escape' (a INT)",
    'CREATE TABLE "../escape" (a INT)',
    'CREATE TABLE "a/b" (a INT)',
    'CREATE SCHEMA "../../x"',
    'CREATE TABLE lakehouse."..".x (a INT)',
    "SELECT * FROM information_schema.df_settings",
    "EXPLAIN ANALYZE SELECT * FROM '/etc/passwd'",
    "PREPARE p AS SELECT $1; EXECUTE p(1)",
    "SELECT repeat('x', 1000000000)",
    "SELECT * FROM generate_series(1, 100000000000) LIMIT 1",
    "SELECT count(*) FROM generate_series(1, 2000000000)",
    "SELECT " + "(" * 5000 + "1" + ")" * 5000,
    "SELECT " + " + ".join(["1"] * 20000),
    "SELECT 1 UNION ALL " * 3000 + "SELECT 1",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
    "SELECT '\x00'",
    "SELECT '\ud7ff\ue000\U0010ffff'",
    "SELECT 1e999999, 99999999999999999999999999999999999999999",
    "SELECT CAST('9999999999999999999999' AS BIGINT)",
    "SELECT 1/0",
    "SELECT * FROM victim WHERE id = 1 OR 1=1 --",
    "SELECT pg_sleep(100)",
    "DELETE FROM victim WHERE id IN (SELECT id FROM victim)",
    # Forbidden statements inside every wrapper (server trust issue): each must be refused.
    "EXPLAIN COPY (SELECT 1) TO '/tmp/deltalite-hostile-copy.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/deltalite-hostile-copy.csv'",
    "EXPLAIN ANALYZE VERBOSE COPY victim TO '/tmp/deltalite-hostile-copy.csv'",
    "EXPLAIN FORMAT TREE COPY (SELECT 1) TO '/tmp/deltalite-hostile-copy.csv'",
    "EXPLAIN ANALYZE INSERT INTO victim VALUES (1)",
    "EXPLAIN ANALYZE DELETE FROM victim",
    "EXPLAIN CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
    "WITH x AS (SELECT 1 AS id) INSERT INTO victim SELECT id FROM x",
    "SELECT 1; EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/deltalite-hostile-copy.csv'",
    # Forms that used to panic the server (500): now a result or a clear error.
    "DELETE FROM victim WHERE EXISTS (SELECT 1 FROM victim v WHERE v.id = victim.id AND v.id < 0)",
    "DELETE FROM victim WHERE (id, id) IN (SELECT id, id FROM victim WHERE id < 0)",
    "UPDATE victim SET id = id WHERE id IN (SELECT max(id) FROM victim WHERE id < 0)",
    "SELECT (SELECT FROM victim)",
    "EXPLAIN ANALYZE SELECT (SELECT FROM victim)",
    "\x00\x01\x02",
    "",
    "   ",
]

NAME_TRICKS = [
    "..",
    "../x",
    "../../etc",
    "a/b",
    "a\\b",
    "%2e%2e",
    "%2E%2E%2Fx",
    "x\x00y",
    ".",
    ".hidden",
    "_delta_log",
    "x" * 300,
    "x" * 100_000,
    "é",
    "表",
    "\u202e",
    "a b",
    "a;b",
    "a'b",
    'a"b',
    "CON",
    "-x",
    "x\n",
    "\t",
    "${HOME}",
    "~",
    "*",
    "?",
]


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executions = 0
        self.statuses: collections.Counter = collections.Counter()
        self.by_kind: dict = collections.defaultdict(collections.Counter)
        self.failures: list[str] = []
        self.closed: list[str] = []

    def record(self, kind: str, status, detail: str = "") -> None:
        with self.lock:
            self.executions += 1
            self.statuses[status] += 1
            self.by_kind[kind][status] += 1
            bad = isinstance(status, int) and status >= 500
            if bad or status == "no-answer":
                self.failures.append(f"{kind} -> {status}: {detail[:300]}")
            elif status == "conn-closed":
                self.closed.append(f"{kind}: {detail[:200]}")

    def fail(self, msg: str) -> None:
        with self.lock:
            self.failures.append(msg)


class Client:
    def __init__(self, server: ServerProcess, stats: Stats):
        self.server = server
        self.stats = stats
        self.http = requests.Session()

    def send(self, kind: str, method: str, path: str, **kw) -> requests.Response | None:
        kw.setdefault("timeout", 60)
        kw.setdefault("auth", AUTH)
        try:
            r = self.http.request(method, self.server.base + path, **kw)
        except requests.exceptions.ConnectionError as e:
            # The server may close a connection it will not read (huge headers): that is
            # an answer too, as long as it keeps serving others.
            self.stats.record(kind, "conn-closed", str(e))
            self.http = requests.Session()
            return None
        except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL):
            return None  # refused by the client library: nothing was sent
        except requests.exceptions.Timeout as e:
            self.stats.record(kind, "no-answer", str(e))
            return None
        self.stats.record(kind, r.status_code, f"{path[:200]} {r.text[:300]}")
        return r

    def query_lines(self, statement: str) -> list:
        r = self.http.post(
            self.server.base + "/query",
            json={"statement": statement},
            auth=AUTH,
            timeout=60,
        )
        if r.status_code != 200:
            raise RuntimeError(f"{statement}: HTTP {r.status_code} {r.text[:200]}")
        return [json.loads(line) for line in r.text.splitlines() if line]


BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def raw_request(
    server: ServerProcess, stats: Stats, kind: str, data: bytes, expect=None
) -> None:
    """Send bytes as they are and read the status line (the body may stay incomplete)."""
    s = socket.create_connection(server.addr, timeout=IDLE_TIMEOUT_S * 10)
    try:
        s.sendall(data)
        answer = s.recv(4096)
    except (ConnectionError, TimeoutError) as e:
        stats.record(kind, "conn-closed", str(e))
        return
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.1 (\d{3})", answer)
    status = int(m.group(1)) if m else "conn-closed"
    stats.record(kind, status, answer[:300].decode(errors="replace"))
    if expect is not None and status != expect:
        stats.fail(f"{kind}: expected {expect}, got {status}")


def q(**params) -> str:
    return "&".join(
        f"{k}={requests.utils.quote(str(v), safe='')}" for k, v in params.items()
    )


def slow_cases(server: ServerProcess, stats: Stats, stop: threading.Event) -> None:
    """Bodies and headers dripped over raw sockets, in a loop until `stop`."""
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    def exchange(kind: str, head: bytes, drip: bytes, pause: float, deadline: float):
        s = socket.create_connection(server.addr, timeout=deadline)
        start = time.monotonic()
        try:
            s.sendall(head)
            for i in range(len(drip)):
                if select.select([s], [], [], 0)[0]:
                    break  # answered before the body was complete
                s.sendall(drip[i : i + 1])
                time.sleep(pause)
            s.settimeout(deadline)
            data = s.recv(4096)
        except (ConnectionError, BrokenPipeError):
            data = b""
        except TimeoutError:
            data = None
        finally:
            s.close()
        elapsed = time.monotonic() - start
        if data is None:
            stats.record(kind, "no-answer", f"after {elapsed:.1f}s")
            return None, elapsed
        m = re.match(rb"HTTP/1\.1 (\d{3})", data)
        status = int(m.group(1)) if m else "conn-closed"
        stats.record(kind, status, data[:300].decode(errors="replace"))
        return status, elapsed

    body = b"id,v\n1,2\n"
    i = 0
    while not stop.is_set():
        i += 1
        path = f"/upload?{q(catalog='lakehouse', schema='slow', table=f's{i}', mode='create')}"
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n"
            f"Content-Type: text/csv\r\nContent-Length: {len(body) + 100}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        # Body slower than the idle timeout and never complete: answered (400) within
        # about the timeout.
        status, elapsed = exchange(
            "slow-drip-body", head, body, IDLE_TIMEOUT_S + 1.0, IDLE_TIMEOUT_S * 10
        )
        if status is not None and elapsed > IDLE_TIMEOUT_S * 6:
            stats.fail(f"slow-drip body answered only after {elapsed:.1f}s")
        if stop.is_set():
            break
        # A body that drips faster than the timeout, and completes: accepted.
        head_ok = head.replace(
            f"Content-Length: {len(body) + 100}".encode(),
            f"Content-Length: {len(body)}".encode(),
        )
        exchange("drip-within-timeout", head_ok, body, IDLE_TIMEOUT_S / 8, 30)
        # /query body that stops arriving.
        qhead = (
            f"POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n"
            'Connection: close\r\n\r\n{"statement": "SEL'
        ).encode()
        exchange("stalled-query-body", qhead, b"", 0, IDLE_TIMEOUT_S * 10)


def stalled_headers(server: ServerProcess, wait_s: float) -> str:
    """Send half a request line and headers, then nothing: does the server hang up?"""
    s = socket.create_connection(server.addr, timeout=wait_s)
    start = time.monotonic()
    try:
        s.sendall(b"POST /query HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        data = s.recv(4096)
        return f"closed after {time.monotonic() - start:.0f} s ({data[:40]!r})"
    except TimeoutError:
        return f"still open after {wait_s:.0f} s (no header read timeout)"
    except ConnectionError as e:
        return f"reset after {time.monotonic() - start:.0f} s ({e})"
    finally:
        s.close()


def check_tables(client: Client, stats: Stats, expected_rows: dict) -> None:
    """Tables written only with valid data stay readable, with the rows we wrote."""
    for table, rows in expected_rows.items():
        try:
            lines = client.query_lines(f"SELECT count(*) FROM {table}")
            errors = [
                line for line in lines if isinstance(line, dict) and "error" in line
            ]
            if errors:
                stats.fail(f"table {table} unreadable: {errors[0]}")
            elif lines[2][0] != rows:
                stats.fail(f"table {table}: {lines[2][0]} rows, expected {rows}")
            lines = client.query_lines(f"SELECT * FROM {table}")
            errors = [
                line for line in lines if isinstance(line, dict) and "error" in line
            ]
            if errors:
                stats.fail(f"table {table} unreadable: {errors[0]}")
        except (RuntimeError, requests.exceptions.RequestException) as e:
            stats.fail(f"table check {table}: {e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-limit-mb", type=float, default=1024)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="deltalite-hostile-"))
    server = ServerProcess(
        binary=a.bin,
        data=work / "lake",
        users=(AUTH,),
        log=work / "server.log",
        args=[
            "--max-body-bytes",
            str(MAX_BODY),
            "--body-idle-timeout-secs",
            str(IDLE_TIMEOUT_S),
            "--query-timeout-secs",
            "30",
        ],
    )
    stats = Stats()
    client = Client(server, stats)
    stop = threading.Event()
    peak_rss = 0.0
    headers_probe: list[str] = []
    started = time.monotonic()
    try:
        base = seed_table(rng, 200)
        seeds = {
            "parquet": parquet_bytes(base),
            "csv": csv_body(base),
            "json": json_body(base),
            "ndjson": ndjson_body(base),
        }
        # Tables that receive only hostile bodies besides these valid writes: what they
        # hold is known, and must stay readable.
        setup = Client(server, Stats())
        for table, body, ct in [
            ("t", seeds["parquet"], "application/parquet"),
            ("tc", seeds["csv"], "text/csv"),
            ("tj", seeds["json"], "application/json"),
            ("victim", seeds["csv"], "text/csv"),
        ]:
            r = setup.send(
                "setup",
                "POST",
                "/upload?"
                + q(catalog="lakehouse", schema="main", table=table, mode="create"),
                data=body,
                headers={"Content-Type": ct},
            )
            if r is None or r.status_code != 200:
                raise SystemExit(f"setup of {table} failed: {r and r.text}")
        expected = {"t": 200, "tc": 200, "tj": 200}

        slow = threading.Thread(
            target=slow_cases, args=(server, stats, stop), daemon=True
        )
        slow.start()
        probe = threading.Thread(
            target=lambda: headers_probe.append(stalled_headers(server, 45)),
            daemon=True,
        )
        probe.start()

        for it in range(a.iterations):
            case = rng.randrange(12)
            fmt = rng.choice(list(seeds))
            body = seeds[fmt]
            if case <= 2:  # /upload, mutated or random body, any mode and content type
                if rng.random() < 0.15:
                    body = os.urandom(rng.randrange(1, 4096))
                else:
                    body = mutate(rng, body)
                mode = rng.choice(
                    [
                        "create",
                        "append",
                        "create_append",
                        "overwrite",
                        "upsert",
                        "bogus",
                    ]
                )
                table = rng.choice(["t", "tc", "tj", "fresh", f"n{it}"])
                params = {
                    "catalog": "lakehouse",
                    "schema": "main",
                    "table": table,
                    "mode": mode,
                }
                if mode == "upsert":
                    params["primary_key"] = rng.choice(["id", "name", "nope", ""])
                if rng.random() < 0.2:
                    params["format"] = rng.choice(["parquet", "csv", "json", "xml"])
                r = client.send(
                    f"upload-{mode}",
                    "POST",
                    "/upload?" + q(**params),
                    data=body,
                    headers={"Content-Type": rng.choice(CONTENT_TYPES)},
                )
                if r is not None and r.status_code == 200 and table in expected:
                    # A mutated body that still decodes is valid data: it lands.
                    if mode == "overwrite":
                        expected[table] = json.loads(r.text)["rows"]
                    elif mode in ("append", "create_append"):
                        expected[table] += json.loads(r.text)["rows"]
                    else:
                        expected.pop(table)  # upsert: row count depends on the keys
            elif case == 3:  # /upsert
                body = mutate(rng, body)
                table = rng.choice(["fresh", "u", f"n{it}"])
                client.send(
                    "upsert",
                    "POST",
                    "/upsert?"
                    + q(
                        catalog="lakehouse",
                        schema="main",
                        table=table,
                        primary_key=rng.choice(["id", "id,name", "v", "missing"]),
                        cursor_field=rng.choice(["", "v", "id"]),
                    ),
                    data=body,
                    headers={"Content-Type": rng.choice(CONTENT_TYPES)},
                )
            elif case == 4:  # /append (JSON)
                body = mutate(rng, rng.choice([seeds["json"], seeds["ndjson"]]))
                client.send(
                    "append",
                    "POST",
                    "/append?"
                    + q(
                        catalog="lakehouse",
                        schema="main",
                        table=rng.choice(["ap", f"n{it}"]),
                    ),
                    data=body,
                    headers={"Content-Type": rng.choice(CONTENT_TYPES)},
                )
            elif case == 5:  # stacked and file-access SQL
                stmt = rng.choice(STACKED_AND_FILE_SQL)
                r = client.send(
                    "sql-hostile", "POST", "/query", json={"statement": stmt}
                )
                if r is not None and r.status_code == 200:
                    text = r.text
                    if (
                        "passwd" in stmt or "COPY" in stmt or "ATTACH" in stmt
                    ) and "root:" in text:
                        stats.fail(f"file contents leaked by {stmt!r}")
            elif case == 6:  # names with path tricks
                name = rng.choice(NAME_TRICKS)
                which = rng.choice(["catalog", "schema", "table"])
                params = {
                    "catalog": "lakehouse",
                    "schema": "main",
                    "table": "pt",
                    "mode": "create_append",
                }
                params[which] = name
                r = client.send(
                    "path-name",
                    "POST",
                    "/upload?" + q(**params),
                    data=seeds["csv"],
                    headers={"Content-Type": "text/csv"},
                )
                escapes = (
                    name in (".", "..", "_delta_log")
                    or name.startswith(".")
                    or len(name.encode()) > 255
                    or any(c in name for c in "/\\%")
                    or any(ord(c) < 32 for c in name)
                )
                if r is not None and r.status_code == 200 and escapes:
                    stats.fail(f"name {name!r} as {which} was accepted")
                if rng.random() < 0.3:
                    client.send(
                        "path-name-sql",
                        "POST",
                        "/query",
                        json={"statement": f'SELECT * FROM "{name}"', "schema": name},
                    )
            elif case == 7:  # huge headers
                size = rng.choice([64 * 1024, 512 * 1024, 1024 * 1024])
                hdr = rng.choice(
                    ["X-Filler", "Idempotency-Key", "Content-Type", "User-Agent"]
                )
                client.send(
                    "huge-header",
                    "POST",
                    "/upload?"
                    + q(
                        catalog="lakehouse",
                        schema="main",
                        table="hh",
                        mode="create_append",
                    ),
                    data=seeds["csv"],
                    headers={hdr: "x" * size},
                )
                if rng.random() < 0.5:
                    client.send(
                        "many-headers",
                        "GET",
                        "/healthz",
                        headers={
                            f"X-H{i}": "v" for i in range(rng.choice([50, 150, 500]))
                        },
                    )
            elif case == 8:  # oversized bodies
                big = b"a\n" + b"1\n" * (MAX_BODY // 2 + rng.randrange(1, 1000))
                if rng.random() < 0.5:
                    r = client.send(
                        "oversized",
                        "POST",
                        "/upload?"
                        + q(
                            catalog="lakehouse",
                            schema="main",
                            table="big",
                            mode="create",
                        ),
                        data=big,
                        headers={"Content-Type": "text/csv"},
                    )
                else:  # chunked: no Content-Length
                    r = client.send(
                        "oversized-chunked",
                        "POST",
                        "/upload?"
                        + q(
                            catalog="lakehouse",
                            schema="main",
                            table="big",
                            mode="create",
                        ),
                        data=(big[i : i + 65536] for i in range(0, len(big), 65536)),
                        headers={"Content-Type": "text/csv"},
                    )
                if r is not None and r.status_code != 413:
                    stats.fail(f"oversized body answered {r.status_code}")
                if rng.random() < 0.3:
                    client.send(
                        "oversized-query",
                        "POST",
                        "/query",
                        data=json.dumps(
                            {"statement": "SELECT '" + "x" * MAX_BODY + "'"}
                        ),
                        headers={"Content-Type": "application/json"},
                    )
            elif case == 9:  # lying Content-Length (raw socket: clients fix the header)
                declared = rng.choice([10**15, 2**64 - 1, 2**64, MAX_BODY + 1, 100])
                path = "/upload?" + q(
                    catalog="lakehouse", schema="main", table="cl", mode="create"
                )
                raw_request(
                    server,
                    stats,
                    "declared-length",
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {BASIC}\r\n"
                    f"Content-Type: text/csv\r\nContent-Length: {declared}\r\n"
                    "Connection: close\r\n\r\na\n1\n".encode(),
                    expect=413 if MAX_BODY < declared < 2**63 else None,
                )
            elif case == 10:  # malformed /query bodies and parameters
                body = rng.choice(
                    [
                        b"{not json",
                        b"",
                        b"[]",
                        b"null",
                        b'{"statement": 1}',
                        b'{"statement": "SELECT 1", "limit": -1, "offset": "x"}',
                        b'{"statement": "SELECT 1", "format": "xml"}',
                        b'{"statement": "SELECT 1", "query_id": {"a": 1}}',
                        b'{"statement": "SELECT 1", "catalog": "../x", "schema": "\\u0000"}',
                        b'{"statement": "SELECT 1", "limit": 1e400}',
                        b"[" * 100_000,
                        mutate(
                            rng,
                            b'{"statement": "SELECT count(*) FROM t", "format": "csv"}',
                        ),
                        os.urandom(256),
                    ]
                )
                client.send(
                    "query-malformed",
                    "POST",
                    rng.choice(["/query", "/validate"]),
                    data=body,
                    headers={
                        "Content-Type": rng.choice(
                            ["application/json", "text/plain", ""]
                        )
                    },
                )
            else:  # auth, routes and methods
                variant = rng.randrange(6)
                if variant == 0:
                    client.send("bad-auth", "GET", "/healthz", auth=("alice", "wrong"))
                elif variant == 1:
                    client.send(
                        "bad-auth",
                        "GET",
                        "/healthz",
                        auth=None,
                        headers={
                            "Authorization": rng.choice(
                                [
                                    "Basic !!!",
                                    "Bearer \xff",
                                    "Basic " + "A" * 10000,
                                    "Digest x",
                                ]
                            )
                        },
                    )
                elif variant == 2:
                    client.send(
                        "unknown-route",
                        rng.choice(["GET", "PUT", "DELETE", "PATCH"]),
                        rng.choice(
                            [
                                "/upload",
                                "/nope",
                                "/query/../../etc",
                                "/tasks/%00",
                                "/query/" + "x" * 5000,
                            ]
                        ),
                    )
                elif variant == 3:
                    client.send(
                        "cancel",
                        "DELETE",
                        "/query/"
                        + rng.choice(["x", "%2e%2e", "1" * 1000])
                        + "?session_id=%00",
                    )
                elif variant == 4:
                    client.send(
                        "idempotency-key",
                        "POST",
                        "/upload?"
                        + q(
                            catalog="lakehouse",
                            schema="main",
                            table="ik",
                            mode="create_append",
                        ),
                        data=seeds["csv"],
                        headers={
                            "Content-Type": "text/csv",
                            "Idempotency-Key": rng.choice(
                                [
                                    "x\ty",
                                    "k" * 8000,
                                    "é".encode().decode("latin1"),
                                    "a b c",
                                ]
                            ),
                        },
                    )
                else:
                    client.send("metrics", "GET", "/metrics")

            if it % 50 == 49:
                try:
                    ok = (
                        requests.get(
                            server.base + "/healthz", auth=AUTH, timeout=10
                        ).status_code
                        == 200
                    )
                except requests.exceptions.RequestException:
                    ok = False
                if not ok:
                    stats.fail(f"/healthz failed after iteration {it}")
                rss, hwm = server.rss_mb()
                peak_rss = max(peak_rss, hwm)
                if rss > a.rss_limit_mb:
                    stats.fail(f"RSS {rss:.0f} MB over the bound after iteration {it}")
            if it % 250 == 249:
                check_tables(client, stats, expected)
            if server.proc.poll() is not None:
                stats.fail(f"server exited with {server.proc.returncode}")
                break
        stop.set()
        slow.join(timeout=IDLE_TIMEOUT_S * 30)
        probe.join(timeout=60)
        check_tables(client, stats, expected)
        if Path("/tmp/deltalite-hostile-copy.csv").exists():
            stats.fail("COPY wrote a file")
        for stray in (work / "escape", work / "x", work.parent / "escape"):
            if stray.exists():
                stats.fail(f"a path trick created {stray}")
        rss, hwm = server.rss_mb()
        peak_rss = max(peak_rss, hwm)
    finally:
        stop.set()
        server.stop()
    elapsed = time.monotonic() - started
    log = server.log_path.read_text(errors="replace")
    caught = log.count("panicked at")

    fivexx = sum(
        n for s, n in stats.statuses.items() if isinstance(s, int) and s >= 500
    )
    print(f"binary            {a.bin}")
    print(f"iterations        {a.iterations} (seed {a.seed}), {elapsed:.0f} s")
    print(f"executions        {stats.executions}")
    hist = sorted(stats.statuses.items(), key=lambda kv: str(kv[0]))
    print("status histogram  " + ", ".join(f"{s}: {n}" for s, n in hist))
    print("by case:")
    for kind in sorted(stats.by_kind):
        counts = stats.by_kind[kind]
        print(
            f"  {kind:22} "
            + ", ".join(
                f"{s}: {n}"
                for s, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
            )
        )
    print(f"5xx               {fivexx}")
    print(
        f"stalled headers   {headers_probe[0] if headers_probe else 'probe did not finish'}"
    )
    print(f"reader panics caught and answered 400: {caught}")
    print(f"peak RSS          {peak_rss:.0f} MB (bound {a.rss_limit_mb:.0f} MB)")
    print(f"tables checked    {', '.join(f'{t}={n}' for t, n in expected.items())}")
    for c in stats.closed[:5]:
        print(f"  closed: {c}")
    print(f"failures          {len(stats.failures)}")
    for f in stats.failures[:20]:
        print(f"  {f}")
    sys.exit(1 if stats.failures or fivexx else 0)


if __name__ == "__main__":
    main()
