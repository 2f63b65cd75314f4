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

Usage: .venv/bin/python correctness/soak/soak.py --bin target/release/deltalite
       [--seconds 180] [--clients 8] [--keys 5000] [--mix all|query|append|upsert]
       [--prefill N] [--report-every 30] [--compact-every S] [--tombstone-retention I]
       [--malloc-stats[-lines]]

To separate what the server's RSS is made of, `--mix` restricts the timed phase to one kind
of work (`query` runs only queries, over tables filled by `--prefill` write requests first),
every `--report-every` seconds a line puts RSS next to each table's Delta version, active
file count and checkpoints (read from `_delta_log` by `harness/delta_log.py`),
`--compact-every` compacts both tables out of band (the `deltalite` Python module) so their
file counts stay small, `--tombstone-retention` shortens how long checkpoints keep the
tombstones of removed files (every upsert and compaction removes files), and
`--malloc-stats` asks glibc (through gdb) at the end how much of the RSS is live heap and
how much malloc holds freed, then trims it (`--malloc-stats-lines`: on every report line
too).
"""

import argparse
import collections
import io
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from delta_log import DeltaLogWatcher
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
# `--mix` keeps these kinds of MIX (with their weights) for the timed phase.
MIXES = {
    "all": {k for k, _ in MIX},
    "query": {"query-agg", "query-point"},
    "append": {"append-parquet", "append-csv"},
    "upsert": {"upsert"},
}


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
    mix: set[str],
    max_requests: int | None = None,
    seq_start: int = 0,
) -> None:
    # A prefill pass and the timed pass of one client use different seeds and id ranges
    # (`seq_start`), so appended ids stay unique per client.
    rng = random.Random(seed * 1000 + cid + seq_start)
    http = requests.Session()
    kinds = [k for k, _ in MIX if k in mix]
    weights = [w for k, w in MIX if k in mix]
    seq = seq_start
    upload = f"{base}/upload?catalog=lakehouse&schema=main&table=events&mode=append"
    upsert = f"{base}/upsert?catalog=lakehouse&schema=main&table=kv&primary_key=k"
    sent = 0
    while time.monotonic() < deadline and (max_requests is None or sent < max_requests):
        sent += 1
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


def table_state(watchers: dict[str, DeltaLogWatcher]) -> str:
    parts = []
    for name, w in watchers.items():
        st = w.poll()
        parts.append(
            f"{name} v{st['version']} {st['files']} files "
            f"ckpt {st['checkpoints']}/{st['checkpoint_actions']} actions"
        )
    return ", ".join(parts)


def server_state(base: str) -> str:
    """The server's own gauges of its long-lived state (query log, the query runtime's
    Parquet footer cache), from /metrics; empty for a server that does not publish them."""
    try:
        text = requests.get(f"{base}/metrics", auth=AUTH, timeout=30).text
    except requests.exceptions.RequestException:
        return ""
    gauges = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("deltalite_query_"):
            try:
                gauges[name] = float(value)
            except ValueError:
                pass
    if "deltalite_query_log_entries" not in gauges:
        return ""
    meta = gauges.get('deltalite_query_cache_bytes{cache="file_metadata"}', 0)
    return (
        f"qlog {gauges['deltalite_query_log_entries']:5.0f} "
        f"{gauges.get('deltalite_query_log_bytes', 0) / 2**20:4.1f} MB  "
        f"footers {meta / 2**20:4.1f} MB  "
    )


def malloc_totals(server: ServerProcess) -> tuple[float, float] | None:
    """glibc's own count, through gdb: (bytes malloc got from the system, bytes in use),
    in MB, or None when gdb is missing or the numbers cannot be read. `malloc_stats()`
    prints to the server's stderr, which the ServerProcess logs to a file."""
    before = server.log_path.stat().st_size
    try:
        subprocess.run(
            [
                "gdb",
                "-p",
                str(server.proc.pid),
                "-batch",
                "-nx",
                "-ex",
                "call (void)malloc_stats()",
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    time.sleep(0.2)
    with open(server.log_path, "rb") as f:
        f.seek(before)
        text = f.read().decode(errors="replace")
    total = text.rsplit("Total (incl. mmap):", 1)
    if len(total) != 2:
        return None
    system = re.search(r"system bytes\s*=\s*(\d+)", total[1])
    in_use = re.search(r"in use bytes\s*=\s*(\d+)", total[1])
    if not system or not in_use:
        return None
    return int(system.group(1)) / 2**20, int(in_use.group(1)) / 2**20


def heap_report(server: ServerProcess) -> str:
    """What the RSS is made of at the end: live heap, freed memory malloc keeps, and the
    RSS after `malloc_trim(0)` hands the free pages back."""
    rss = server.rss_mb()[0]
    anon_file = rss_split(server)
    totals = malloc_totals(server)
    if totals is None:
        return "malloc stats  unavailable (needs gdb and ptrace)"
    system, in_use = totals
    subprocess.run(
        [
            "gdb",
            "-p",
            str(server.proc.pid),
            "-batch",
            "-nx",
            "-ex",
            "call (int)malloc_trim(0)",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    time.sleep(0.5)
    after = rss_split(server)
    return (
        f"malloc stats  RSS {rss:.0f} MB ({anon_file}): malloc holds {system:.0f} MB "
        f"from the system, {in_use:.0f} MB of it in use (live heap), {system - in_use:.0f} MB "
        f"freed but kept\n"
        f"              RSS after malloc_trim(0) {server.rss_mb()[0]:.0f} MB ({after})"
    )


def rss_split(server: ServerProcess) -> str:
    """Anonymous (heap, stacks) vs file-backed (the binary's code) resident memory."""
    fields = {}
    try:
        for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) / 1024
    except OSError:
        return "?"
    return ", ".join(f"{k} {v:.0f} MB" for k, v in fields.items())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-limit-mb", type=float, default=1024)
    ap.add_argument("--mix", choices=sorted(MIXES), default="all")
    ap.add_argument(
        "--prefill",
        type=int,
        default=0,
        help="write requests (appends and upserts) sent before the timed phase",
    )
    ap.add_argument(
        "--report-every",
        type=float,
        default=30,
        help="seconds between RSS / table-state lines (0: none)",
    )
    ap.add_argument(
        "--compact-every",
        type=float,
        default=0,
        help="compact both tables out of band every S seconds (0: never)",
    )
    ap.add_argument(
        "--compact-via",
        choices=["python", "sql"],
        default="python",
        help="how --compact-every compacts: the `deltalite` module in this process, or "
        "`OPTIMIZE` statements through the server's /query",
    )
    ap.add_argument(
        "--tombstone-retention",
        default=None,
        help="set delta.deletedFileRetentionDuration on both tables (e.g. 'interval 2 "
        "minutes'): checkpoints keep remove tombstones that long (default a week)",
    )
    ap.add_argument(
        "--malloc-stats",
        action="store_true",
        help="at the end, ask glibc through gdb how much of the RSS is live heap",
    )
    ap.add_argument(
        "--malloc-stats-lines",
        action="store_true",
        help="also on every report line (pauses the server for about a second each)",
    )
    ap.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra `deltalite serve` argument, e.g. --server-arg=--malloc-trim-secs=0",
    )
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deltalite-soak-"))
    log = [] if any(x.startswith("--log") for x in a.server_arg) else ["--log", "warn"]
    server = ServerProcess(
        binary=a.bin,
        data=work / "lake",
        users=(AUTH,),
        log=work / "server.log",
        args=[*log, *a.server_arg],
    )
    shared = Shared()
    rss_samples: list[float] = []
    stop = threading.Event()
    ok = True
    tables_dir = work / "lake" / "lakehouse" / "main"
    watchers = {t: DeltaLogWatcher(tables_dir / t) for t in ("events", "kv")}
    compactions = collections.Counter()
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

        if a.tombstone_retention:
            # Out of band, as an operator would: a table property, so the engine's own
            # commits keep it.
            from deltalake import DeltaTable

            for name in ("events", "kv"):
                DeltaTable(str(tables_dir / name)).alter.set_table_properties(
                    {"delta.deletedFileRetentionDuration": a.tombstone_retention}
                )

        if a.prefill:
            t0 = time.monotonic()
            prefill = [
                threading.Thread(
                    target=client,
                    args=(c, server.base, shared, float("inf"), a.keys, a.seed),
                    kwargs={
                        "mix": MIXES["append"] | MIXES["upsert"],
                        "max_requests": -(-a.prefill // a.clients),
                        "seq_start": 10**9,
                    },
                )
                for c in range(a.clients)
            ]
            for t in prefill:
                t.start()
            for t in prefill:
                t.join()
            shared.latencies.clear()
            print(
                f"prefill       {a.prefill} write requests in {time.monotonic() - t0:.0f} s, "
                f"{table_state(watchers)}",
                flush=True,
            )

        report: list[str] = []

        def sample() -> None:
            next_report = time.monotonic()
            while not stop.is_set():
                rss, hwm = server.rss_mb()
                rss_samples.append(rss)
                now = time.monotonic()
                if a.report_every and now >= next_report:
                    next_report = now + a.report_every
                    with shared.lock:
                        done = sum(len(v) for v in shared.latencies.values())
                    heap = ""
                    if a.malloc_stats_lines:
                        # Pauses the server for about a second (gdb attaches).
                        totals = malloc_totals(server)
                        if totals is not None:
                            heap = f"heap {totals[1]:4.0f}/{totals[0]:4.0f} MB  "
                    line = (
                        f"{now - started:6.0f} s  RSS {rss:5.0f} MB  HWM {hwm:5.0f} MB  "
                        f"{heap}{server_state(server.base)}requests {done:6d}  "
                        f"{table_state(watchers)}"
                    )
                    report.append(line)
                    print(line, flush=True)
                time.sleep(0.5)

        def compact() -> None:
            # Out of band, as an operator's maintenance job would: a second writer process
            # (here the `deltalite` module in this process) racing the server's commits.
            while not stop.wait(a.compact_every):
                for name in ("events", "kv"):
                    try:
                        if a.compact_via == "sql":
                            (removed, *_rest) = check_query(
                                requests.post(
                                    f"{server.base}/query",
                                    json={"statement": f"OPTIMIZE {name}"},
                                    auth=AUTH,
                                    timeout=600,
                                ),
                                f"OPTIMIZE {name}",
                            )[0]
                        else:
                            import deltalite

                            t = deltalite.DeltaLiteTable.open(str(tables_dir / name))
                            st = t.compact(primary_keys="k" if name == "kv" else None)
                            removed = st.files_removed
                        compactions[name] += 1
                        compactions[f"{name} files removed"] += removed
                    except Exception as e:  # noqa: BLE001 (a lost race is reported, not fatal)
                        compactions[f"{name} failed"] += 1
                        print(f"compaction of {name} failed: {e}", flush=True)

        started = time.monotonic()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        compactor = None
        if a.compact_every:
            compactor = threading.Thread(target=compact, daemon=True)
            compactor.start()
        deadline = started + a.seconds
        threads = [
            threading.Thread(
                target=client,
                args=(c, server.base, shared, deadline, a.keys, a.seed),
                kwargs={"mix": MIXES[a.mix]},
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
        if compactor is not None:
            compactor.join()
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
        print(f"binary        {a.bin} {' '.join(a.server_arg)}".rstrip())
        print(f"clients       {a.clients}, {wall:.0f} s, key space {a.keys}")
        print(
            f"workload      mix {a.mix}, prefill {a.prefill} writes, "
            f"compaction {f'every {a.compact_every:.0f} s ({a.compact_via})' if a.compact_every else 'none'}, "
            f"tombstone retention {a.tombstone_retention or 'default (1 week)'}"
        )
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
        print(f"table state   {table_state(watchers)}")
        if a.compact_every:
            print(f"compactions   {dict(sorted(compactions.items()))}")
        maintenance = [
            line
            for line in http.get(
                f"{server.base}/metrics", auth=AUTH, timeout=60
            ).text.splitlines()
            if line.startswith("deltalite_maintenance_")
        ]
        if maintenance:
            print(f"maintainer    {'; '.join(maintenance)}")
        print(f"verification  {'ok' if not mismatches else 'FAILED'}")
        for m in mismatches:
            print(f"  {m}")
        if report:
            print("RSS over time (every line: seconds into the timed phase)")
            for line in report:
                print(f"  {line}")
        if a.malloc_stats:
            print(heap_report(server))
        ok = not shared.errors and not mismatches and hwm < a.rss_limit_mb
    finally:
        stop.set()
        server.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
