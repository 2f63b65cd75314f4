"""Bounded soak: concurrent clients appending, upserting and querying one server.

Starts `deltalite serve` (`--bin`) on an ephemeral port with a temporary data root, then
runs `--clients` threads for `--seconds`, each looping over a weighted mix of:

- append-parquet: /upload?mode=append of a small Parquet file into `events`
- append-csv:     /upload?mode=append of a small CSV body into `events`
- upsert:         /upsert of rows with keys drawn from a small key space (so concurrent
                  upserts overlap) into `kv`
- query-agg:      aggregates over `events` and `kv`
- query-point:    point lookups by id / key

Every request's latency is recorded; the server's RSS is sampled every 0.5 s. At the end
it prints requests/s, p50/p99/max latency per kind, the error count (must be 0) and peak
RSS, then checks the tables against what the clients sent: every appended row exactly once,
one row per upserted key holding the values of the upsert with the highest committed
version. Exits non-zero on any error or mismatch.

Usage: .venv/bin/python bench/soak/soak.py --bin target/release/deltalite
       [--seconds 180] [--clients 8] [--keys 5000]
"""

import argparse
import collections
import io
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from server_process import ServerProcess

AUTH = ("soak", "soak")
EVENTS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("client", pa.int64()),
        ("v", pa.float64()),
        ("s", pa.string()),
    ]
)
KV_SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("writer", pa.int64()),
        ("seq", pa.int64()),
        ("v", pa.float64()),
    ]
)
MIX = [  # (kind, weight)
    ("append-parquet", 2),
    ("append-csv", 1),
    ("upsert", 3),
    ("query-agg", 2),
    ("query-point", 4),
]


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


class Shared:
    """What every client records: latencies, errors, rows sent, committed upserts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: list[str] = []
        self.appended = collections.Counter()  # client -> rows
        # key -> (commit version, seq) of the upsert that must win; seq identifies the row.
        self.upserted: dict[int, tuple[int, int, int, float]] = {}

    def done(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.latencies[kind].append(seconds)

    def error(self, msg: str) -> None:
        with self.lock:
            self.errors.append(msg)


def check_query(r: requests.Response, what: str) -> list:
    if r.status_code != 200:
        raise RuntimeError(f"{what}: HTTP {r.status_code} {r.text[:200]}")
    lines = [json.loads(line) for line in r.text.splitlines() if line]
    for line in lines:
        if isinstance(line, dict) and "error" in line:
            raise RuntimeError(f"{what}: {line['error']}")
    return lines[2:]


def client(
    cid: int,
    base: str,
    shared: Shared,
    deadline: float,
    keys: int,
    seed: int,
) -> None:
    rng = random.Random(seed * 1000 + cid)
    http = requests.Session()
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    seq = 0
    upload = f"{base}/upload?catalog=lakehouse&schema=main&table=events&mode=append"
    upsert = f"{base}/upsert?catalog=lakehouse&schema=main&table=kv&primary_key=k"
    while time.monotonic() < deadline:
        kind = rng.choices(kinds, weights)[0]
        try:
            if kind in ("append-parquet", "append-csv"):
                n = rng.randint(50, 400)
                ids = [cid * 10**12 + seq + i for i in range(n)]
                seq += n
                vs = [round(rng.random() * 100, 3) for _ in range(n)]
                ss = [f"c{cid}-{i}" for i in ids]
                if kind == "append-parquet":
                    t = pa.table([ids, [cid] * n, vs, ss], schema=EVENTS_SCHEMA)
                    body, ct = parquet_bytes(t), "application/parquet"
                else:
                    rows = "".join(
                        f"{i},{cid},{v:.3f},{s}\n"
                        for i, v, s in zip(ids, vs, ss, strict=True)
                    )
                    body, ct = ("id,client,v,s\n" + rows).encode(), "text/csv"
                start = time.monotonic()
                r = http.post(
                    upload,
                    data=body,
                    headers={"Content-Type": ct},
                    auth=AUTH,
                    timeout=120,
                )
                elapsed = time.monotonic() - start
                if r.status_code != 200 or json.loads(r.text)["rows"] != n:
                    raise RuntimeError(f"{kind}: HTTP {r.status_code} {r.text[:200]}")
                with shared.lock:
                    shared.appended[cid] += n
            elif kind == "upsert":
                n = rng.randint(20, 300)
                ks = rng.sample(range(keys), n)
                seqs = [seq + i for i in range(n)]
                seq += n
                vs = [round(rng.random() * 1000, 3) for _ in range(n)]
                t = pa.table([ks, [cid] * n, seqs, vs], schema=KV_SCHEMA)
                start = time.monotonic()
                r = http.post(
                    upsert,
                    data=parquet_bytes(t),
                    headers={"Content-Type": "application/parquet"},
                    auth=AUTH,
                    timeout=120,
                )
                elapsed = time.monotonic() - start
                if r.status_code != 200:
                    raise RuntimeError(f"upsert: HTTP {r.status_code} {r.text[:200]}")
                version = json.loads(r.text)["version"]
                with shared.lock:
                    for k, s, v in zip(ks, seqs, vs, strict=True):
                        old = shared.upserted.get(k)
                        if old is None or old[0] < version:
                            shared.upserted[k] = (version, cid, s, v)
            elif kind == "query-agg":
                stmt = rng.choice(
                    [
                        "SELECT count(*), sum(v), min(id), max(id) FROM events",
                        "SELECT client, count(*), avg(v) FROM events GROUP BY client ORDER BY client",
                        "SELECT count(*), count(DISTINCT k), max(seq) FROM kv",
                        "SELECT writer, count(*) FROM kv GROUP BY writer",
                    ]
                )
                start = time.monotonic()
                r = http.post(
                    f"{base}/query", json={"statement": stmt}, auth=AUTH, timeout=120
                )
                elapsed = time.monotonic() - start
                check_query(r, stmt)
            else:
                if rng.random() < 0.5:
                    stmt = f"SELECT * FROM kv WHERE k = {rng.randrange(keys)}"
                else:
                    other = rng.randrange(8)
                    stmt = f"SELECT * FROM events WHERE id = {other * 10**12 + rng.randrange(2000)}"
                start = time.monotonic()
                r = http.post(
                    f"{base}/query", json={"statement": stmt}, auth=AUTH, timeout=120
                )
                elapsed = time.monotonic() - start
                rows = check_query(r, stmt)
                if len(rows) > 1:
                    raise RuntimeError(f"{stmt}: {len(rows)} rows for one key")
            shared.done(kind, elapsed)
        except (
            RuntimeError,
            requests.exceptions.RequestException,
            ValueError,
            KeyError,
        ) as e:
            shared.error(f"client {cid} {kind}: {e}")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-limit-mb", type=float, default=1024)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deltalite-soak-"))
    server = ServerProcess(a.bin, work, AUTH, ["--log", "warn"])
    shared = Shared()
    rss_samples: list[float] = []
    stop = threading.Event()
    ok = True
    try:
        http = requests.Session()
        for table, schema, params in [
            ("events", EVENTS_SCHEMA, "mode=create"),
            ("kv", KV_SCHEMA, "mode=create"),
        ]:
            r = http.post(
                f"{server.base}/upload?catalog=lakehouse&schema=main&table={table}&{params}",
                data=parquet_bytes(schema.empty_table()),
                headers={"Content-Type": "application/parquet"},
                auth=AUTH,
                timeout=60,
            )
            if r.status_code != 200:
                raise SystemExit(f"setup {table}: {r.status_code} {r.text}")

        def sample() -> None:
            while not stop.is_set():
                rss_samples.append(server.rss_mb()[0])
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        deadline = started + a.seconds
        threads = [
            threading.Thread(
                target=client, args=(c, server.base, shared, deadline, a.keys, a.seed)
            )
            for c in range(a.clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
        hwm = server.rss_mb()[1]

        # Verify the tables against what the clients sent.
        mismatches: list[str] = []
        rows = check_query(
            http.post(
                f"{server.base}/query",
                json={
                    "statement": "SELECT client, count(*), count(DISTINCT id) FROM events GROUP BY client"
                },
                auth=AUTH,
                timeout=300,
            ),
            "verify events",
        )
        got = {int(c): (int(n), int(d)) for c, n, d in rows}
        for cid in range(a.clients):
            n, d = got.get(cid, (0, 0))
            if n != shared.appended[cid] or d != n:
                mismatches.append(
                    f"events client {cid}: {n} rows ({d} distinct), sent {shared.appended[cid]}"
                )
        r = http.post(
            f"{server.base}/query",
            json={"statement": "SELECT k, writer, seq, v FROM kv", "format": "jsonl"},
            auth=AUTH,
            timeout=300,
        )
        kv = [json.loads(line) for line in r.text.splitlines() if line]
        seen = collections.Counter(row["k"] for row in kv)
        dupes = sum(1 for n in seen.values() if n > 1)
        if dupes:
            mismatches.append(f"kv: {dupes} keys appear more than once")
        if len(seen) != len(shared.upserted):
            mismatches.append(
                f"kv: {len(seen)} keys, clients upserted {len(shared.upserted)}"
            )
        wrong = 0
        for row in kv:
            want = shared.upserted.get(row["k"])
            if want is None or (row["writer"], row["seq"]) != (want[1], want[2]):
                wrong += 1
        if wrong:
            mismatches.append(
                f"kv: {wrong} keys do not hold the last committed upsert's row"
            )

        total = sum(len(v) for v in shared.latencies.values())
        peak = max(rss_samples, default=0.0)
        print(f"binary        {a.bin}")
        print(f"clients       {a.clients}, {wall:.0f} s, key space {a.keys}")
        print(f"requests      {total} ({total / wall:.1f}/s)")
        print(
            f"{'kind':16} {'count':>7} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        )
        for kind, _ in MIX:
            lat = shared.latencies.get(kind, [])
            print(
                f"{kind:16} {len(lat):7d} {len(lat) / wall:7.1f} {pct(lat, 50) * 1000:8.1f} "
                f"{pct(lat, 99) * 1000:8.1f} {max(lat, default=0) * 1000:8.1f}"
            )
        allv = [x for v in shared.latencies.values() for x in v]
        print(
            f"{'all':16} {len(allv):7d} {len(allv) / wall:7.1f} {pct(allv, 50) * 1000:8.1f} {pct(allv, 99) * 1000:8.1f} {max(allv, default=0) * 1000:8.1f}"
        )
        print(f"errors        {len(shared.errors)}")
        for e in shared.errors[:10]:
            print(f"  {e}")
        n = len(rss_samples)
        first = sum(rss_samples[: max(1, n // 10)]) / max(
            1, len(rss_samples[: max(1, n // 10)])
        )
        last = sum(rss_samples[-max(1, n // 10) :]) / max(
            1, len(rss_samples[-max(1, n // 10) :])
        )
        print(
            f"server RSS    peak {peak:.0f} MB (VmHWM {hwm:.0f} MB), first 10% avg {first:.0f} MB, "
            f"last 10% avg {last:.0f} MB, {n} samples"
        )
        print(
            f"tables        events {sum(shared.appended.values())} rows appended, "
            f"kv {len(shared.upserted)} keys upserted"
        )
        print(f"verification  {'ok' if not mismatches else 'FAILED'}")
        for m in mismatches:
            print(f"  {m}")
        ok = not shared.errors and not mismatches and hwm < a.rss_limit_mb
    finally:
        stop.set()
        server.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
