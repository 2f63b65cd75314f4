"""Concurrent writers must end in some serial order (issue #6).

Shared by `test_multiprocess.py`, `test_server_concurrency.py` and the stress bench
`correctness/stress/concurrent_writers.py`:

- `make_calls`: a contended workload of small upserts (overlapping keys, shared and
  private partitions, cursor and no-cursor calls, `null` and `keep` omitted columns,
  in-batch duplicates, NULL keys, the same key in several partitions);
- `run_python_writers`: N OS processes (this file run as a script) that open one table
  with `DeltaLiteTable.open`, wait at a common start line and upsert concurrently, each
  call tagged in its commit info (`commit_metadata`);
- `Model` and `verify`: a plain-Python model of `upsert-contract.md` fed with the
  committed calls in commit-version order, compared with the table as the `deltalake`
  package reads it, with the per-call statistics, and with the log (every committed call
  exactly once, nothing else).

Run as `python concurrency_model.py worker INPUT.json` it is one writer process.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("seq", pa.int64()),
        ("tag", pa.string()),
        ("note", pa.string()),
        ("n", pa.int64()),
    ]
)
KEYS = ["id"]
PARTITION = "p"
CURSOR = ["seq"]
# Columns a call may leave out (key, partition, cursor and tag are always carried).
OPTIONAL = ["note", "n"]
HOT_PARTITIONS = ["a", "b", "c"]
TAG_FIELD = "stress.tag"

HERE = Path(__file__).resolve()


# --------------------------------------------------------------------------- workload


def make_calls(worker: int, calls: int, seed: int, keys: int = 10) -> list[dict]:
    """The calls of one writer: small batches over a few hot partitions shared by all
    writers, sometimes a private partition (whose commits are disjoint from the others',
    so they rebase instead of re-planning), keys drawn from a small range so that they
    collide across writers and move between partitions."""
    rng = random.Random(seed * 1_000_003 + worker)
    out = []
    for c in range(calls):
        tag = f"w{worker}c{c}"
        pool = HOT_PARTITIONS if rng.random() < 0.8 else [f"own{worker}", "d"]
        parts = rng.sample(pool, k=min(len(pool), rng.choice([1, 1, 2])))
        mode = rng.choice(["plain", "cursor", "keep", "keep_cursor"])
        cursor = CURSOR if "cursor" in mode else []
        omitted = "keep" if mode.startswith("keep") else "null"
        dropped = set(rng.sample(OPTIONAL, k=rng.choice([0, 0, 1, 2])))
        carried = [n for n in SCHEMA.names if n not in dropped]
        rows = []
        for i in range(rng.randint(2, 6)):
            rows.append(
                {
                    "id": None if rng.random() < 0.04 else rng.randrange(keys),
                    "p": rng.choice(parts),
                    "seq": None if rng.random() < 0.1 else rng.randrange(30),
                    "tag": f"{tag}r{i}",
                    "note": rng.choice([None, "x", "y", f"{tag}"]),
                    "n": rng.randrange(1000),
                }
            )
        identities = [(r["id"], r["p"]) for r in rows if r["id"] is not None]
        has_duplicates = len(identities) != len(set(identities))
        # Without a cursor, duplicates need "last"; with a cursor the cursor decides
        # whatever on_duplicate says.
        on_duplicate = "last" if has_duplicates and not cursor else rng.choice(["error", "last"])
        out.append(
            {
                "tag": tag,
                "rows": [{k: r[k] for k in carried} for r in rows],
                "carried": carried,
                "cursor": cursor,
                "on_duplicate": on_duplicate,
                "omitted": omitted,
            }
        )
    return out


def batch_of(call: Mapping) -> pa.Table:
    schema = pa.schema([SCHEMA.field(c) for c in call["carried"]])
    return pa.Table.from_pylist(call["rows"], schema=schema)


def upsert_kwargs(call: Mapping) -> dict:
    return {
        "primary_keys": KEYS,
        "partition_key": PARTITION,
        "cursor_field": call["cursor"] or None,
        "on_duplicate": call["on_duplicate"],
        "omitted_columns": call["omitted"],
    }


# --------------------------------------------------------------------------- model


def cursor_rank(row: Mapping, cursor: list[str]) -> tuple:
    """NULL ranks lowest at every position."""
    return tuple((0,) if row[c] is None else (1, row[c]) for c in cursor)


class Model:
    """The upsert contract, row by row: identity = key tuple within its partition."""

    def __init__(self) -> None:
        self.keyed: dict[tuple, dict] = {}
        self.null_keyed: list[dict] = []

    def copy(self) -> Model:
        m = Model()
        m.keyed = dict(self.keyed)
        m.null_keyed = list(self.null_keyed)
        return m

    def state(self) -> tuple:
        return (sorted(self.keyed.items(), key=repr), sorted(self.null_keyed, key=repr))

    def apply(self, call: Mapping) -> dict[str, int]:
        """Apply one call; the counts the engine must report for it."""
        carried, cursor = call["carried"], call["cursor"]
        full = [{c: r.get(c) for c in SCHEMA.names} for r in call["rows"]]
        winners: dict[tuple, dict] = {}
        order: list[tuple] = []
        counts = Counter(rows_updated=0, rows_inserted=0, rows_dropped_by_cursor=0)
        counts["duplicates_resolved"] = 0
        for row in full:
            if any(row[k] is None for k in KEYS):
                self.null_keyed.append(row)
                counts["rows_inserted"] += 1
                continue
            ident = (*(row[k] for k in KEYS), row[PARTITION])
            if ident not in winners:
                winners[ident] = row
                order.append(ident)
                continue
            counts["duplicates_resolved"] += 1
            if not cursor and call["on_duplicate"] == "error":
                raise ValueError(f"{call['tag']}: duplicate key without cursor")
            if not cursor or cursor_rank(row, cursor) >= cursor_rank(winners[ident], cursor):
                winners[ident] = row
        for ident in order:
            row = winners[ident]
            stored = self.keyed.get(ident)
            if stored is None:
                self.keyed[ident] = row
                counts["rows_inserted"] += 1
            elif cursor and not cursor_rank(row, cursor) > cursor_rank(stored, cursor):
                counts["rows_dropped_by_cursor"] += 1
            else:
                counts["rows_updated"] += 1
                if call["omitted"] == "keep":
                    self.keyed[ident] = {**stored, **{c: row[c] for c in carried}}
                else:
                    self.keyed[ident] = row
        counts["rows_written"] = counts["rows_updated"] + counts["rows_inserted"]
        return dict(counts)

    def rows(self) -> list[dict]:
        return list(self.keyed.values()) + self.null_keyed


def _row_key(row: Mapping) -> tuple:
    return tuple(row.get(c) for c in SCHEMA.names)


def read_table(uri: str, storage_options: Mapping[str, str] | None = None) -> list[dict]:
    """The table's rows as the `deltalake` package reads them.

    Through deltalake's DataFusion `QueryBuilder` rather than `to_pyarrow_table()`: the
    latter scans through a Python filesystem handler with `pre_buffer=True`, and pyarrow
    I/O threads still releasing those buffers at interpreter exit abort the process
    ("terminate called without an active exception") in roughly one exit in ten
    (deltalake 1.6.6, pyarrow 26, CPython 3.11)."""
    from deltalake import DeltaTable, QueryBuilder

    dt = DeltaTable(uri, storage_options=dict(storage_options or {}))
    table = pa.table(QueryBuilder().register("t", dt).execute("SELECT * FROM t"))
    return table.to_pylist()


@dataclass
class Verdict:
    """What `verify` found; `mismatches` must be empty."""

    committed: int = 0
    noops: int = 0
    failed: int = 0
    rows: int = 0
    mismatches: list[str] = field(default_factory=list)


def verify(
    calls: Mapping[str, Mapping],
    log: Iterable[tuple[int, str | None]],
    results: Mapping[str, Mapping],
    table_rows: list[dict],
    first_version: int = 1,
    stats_checked: tuple[str, ...] = (
        "rows_updated",
        "rows_inserted",
        "rows_dropped_by_cursor",
        "duplicates_resolved",
    ),
) -> Verdict:
    """Feed the model the committed calls in commit-version order and compare.

    `log`: (version, tag) of every commit from `first_version` on (tag None: a commit
    that is none of ours). `results[tag]`: what the caller saw: `{"ok": True, "version":
    v, "committed": bool, **stats}` or `{"ok": False, "error": ...}`. A call that was ok
    but did not commit (nothing to write) is a read at its `version`; the model places it
    there and it must change nothing.
    """
    v = Verdict()
    bad = v.mismatches
    log = sorted(log)
    by_version: dict[int, str] = {}
    seen: Counter = Counter()
    for version, tag in log:
        if tag is None or tag not in calls:
            bad.append(f"version {version}: a commit of no known call ({tag!r})")
            continue
        by_version[version] = tag
        seen[tag] += 1
    for tag, n in seen.items():
        if n != 1:
            bad.append(f"{tag}: committed {n} times")
    expected_versions = list(range(first_version, first_version + len(log)))
    if [ver for ver, _ in log] != expected_versions:
        bad.append(f"log versions {[ver for ver, _ in log]} are not contiguous")

    noops_at: dict[int, list[str]] = {}
    for tag, res in results.items():
        if not res.get("ok"):
            v.failed += 1
            if seen[tag]:
                bad.append(f"{tag}: reported an error ({res.get('error')}) but is in the log")
            continue
        if res.get("committed", True):
            v.committed += 1
            if not seen[tag]:
                bad.append(f"{tag}: reported committed at {res.get('version')}, not in the log")
            elif res.get("version") is not None and by_version.get(res["version"]) != tag:
                bad.append(
                    f"{tag}: reported version {res['version']}, "
                    f"the log has {by_version.get(res['version'])!r} there"
                )
        else:
            v.noops += 1
            if seen[tag]:
                bad.append(f"{tag}: reported no commit but is in the log")
            noops_at.setdefault(res["version"], []).append(tag)
    for tag in seen:
        if tag not in results:
            bad.append(f"{tag}: in the log but no writer reported it")

    model = Model()

    def check_stats(tag: str, expected: Mapping[str, int]) -> None:
        res = results.get(tag) or {}
        for name in stats_checked:
            if name in res and res[name] != expected.get(name, 0):
                bad.append(f"{tag}: {name} = {res[name]}, the model says {expected.get(name, 0)}")

    def run_noops(version: int) -> None:
        for tag in noops_at.pop(version, []):
            after = model.copy()
            try:
                expected = after.apply(calls[tag])
            except ValueError as e:
                bad.append(str(e))
                continue
            if after.state() != model.state():
                bad.append(f"{tag}: wrote nothing at version {version}, the model changes rows")
            check_stats(tag, expected)

    run_noops(first_version - 1)
    for version, tag in log:
        if tag in calls:
            try:
                check_stats(tag, model.apply(calls[tag]))
            except ValueError as e:
                bad.append(str(e))
        run_noops(version)
    for version, tags in noops_at.items():
        bad.append(f"{tags}: no-op calls at version {version}, outside the log")

    want = Counter(_row_key(r) for r in model.rows())
    got = Counter(_row_key(r) for r in table_rows)
    v.rows = len(table_rows)
    missing = want - got
    extra = got - want
    for row in list(missing)[:10]:
        bad.append(f"row missing from the table: {row}")
    for row in list(extra)[:10]:
        bad.append(f"row in the table but not in the model: {row}")
    if len(missing) + len(extra) > 20:
        bad.append(f"... {len(missing)} missing and {len(extra)} extra rows in all")
    identities = Counter(
        (*(r[k] for k in KEYS), r[PARTITION])
        for r in table_rows
        if all(r[k] is not None for k in KEYS)
    )
    for ident, n in identities.items():
        if n > 1:
            bad.append(f"key {ident} is in the table {n} times")
    return v


def commit_log(
    uri: str, storage_options: Mapping[str, str] | None = None
) -> list[tuple[int, str | None]]:
    """(version, commit tag) of every commit after the table's creation, from the
    commitInfo of the Delta log (read through `deltalake`)."""
    from deltalake import DeltaTable

    history = DeltaTable(uri, storage_options=dict(storage_options or {})).history()
    return sorted((h["version"], h.get(TAG_FIELD)) for h in history if h["version"] > 0)


# --------------------------------------------------------------------------- writers


@dataclass
class RunReport:
    """A run of concurrent writers, verified."""

    processes: int
    calls: int
    verdict: Verdict
    commit_retries: int
    replans: int
    conflict_calls: int
    wall_seconds: float
    errors: list[str]

    def summary(self) -> str:
        v = self.verdict
        return (
            f"processes={self.processes} calls={self.calls} committed={v.committed} "
            f"noop={v.noops} failed={v.failed} conflicts_retried={self.commit_retries} "
            f"replans={self.replans} calls_with_conflicts={self.conflict_calls} "
            f"rows={v.rows} mismatches={len(v.mismatches)} wall={self.wall_seconds:.1f}s"
        )


def create_table(uri: str, storage_options: Mapping[str, str] | None = None) -> None:
    from deltalite import DeltaLiteTable

    DeltaLiteTable.create(
        uri, SCHEMA, partition_by=PARTITION, storage_options=dict(storage_options or {})
    )


def run_python_writers(
    uri: str,
    storage_options: Mapping[str, str] | None,
    workdir: Path,
    processes: int = 4,
    calls: int = 10,
    seed: int = 6,
    timeout: float = 600.0,
    commit_max_retries: int = 100,
    keys: int = 10,
) -> RunReport:
    """Create the table, run `processes` writer processes of `calls` upserts each from
    a common start line, then verify the table against the model."""
    workdir.mkdir(parents=True, exist_ok=True)
    create_table(uri, storage_options)
    specs: dict[str, dict] = {}
    procs = []
    go = workdir / "go"
    for w in range(processes):
        worker_calls = make_calls(w, calls, seed, keys)
        specs.update((c["tag"], c) for c in worker_calls)
        inp = workdir / f"worker{w}.json"
        inp.write_text(
            json.dumps(
                {
                    "uri": uri,
                    "storage_options": dict(storage_options or {}),
                    "calls": worker_calls,
                    "ready": str(workdir / f"ready{w}"),
                    "go": str(go),
                    "out": str(workdir / f"result{w}.json"),
                    "commit_max_retries": commit_max_retries,
                }
            )
        )
        log = open(workdir / f"worker{w}.log", "wb")
        procs.append(
            (
                subprocess.Popen(
                    [sys.executable, str(HERE), "worker", str(inp)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        )
    started = time.monotonic()
    deadline = started + timeout
    try:
        while not all((workdir / f"ready{w}").exists() for w in range(processes)):
            dead = [p.args for p, _ in procs if p.poll() not in (None, 0)]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"writers did not get ready: {_logs(workdir, processes)}")
            time.sleep(0.02)
        go.touch()
        started = time.monotonic()
        for p, _ in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
    wall = time.monotonic() - started
    codes = [p.returncode for p, _ in procs]
    if any(codes):
        raise RuntimeError(f"writer exit codes {codes}: {_logs(workdir, processes)}")
    results: dict[str, dict] = {}
    for w in range(processes):
        results.update(json.loads((workdir / f"result{w}.json").read_text()))
    verdict = verify(
        specs, commit_log(uri, storage_options), results, read_table(uri, storage_options)
    )
    ok = [r for r in results.values() if r.get("ok")]
    return RunReport(
        processes=processes,
        calls=len(specs),
        verdict=verdict,
        commit_retries=sum(r["commit_retries"] for r in ok),
        replans=sum(r["replans"] for r in ok),
        conflict_calls=sum(1 for r in ok if r["commit_retries"]),
        wall_seconds=wall,
        errors=[f"{t}: {r['error']}" for t, r in results.items() if not r.get("ok")],
    )


def _logs(workdir: Path, processes: int) -> str:
    parts = []
    for w in range(processes):
        f = workdir / f"worker{w}.log"
        if f.exists() and f.stat().st_size:
            parts.append(f"--- worker {w}\n{f.read_text()[-3000:]}")
    return "\n".join(parts) or "(no output)"


def worker_main(input_path: str) -> None:
    """One writer process: open, say ready, wait for the start line, upsert each call."""
    from deltalite import DeltaLiteError, DeltaLiteTable

    spec = json.loads(Path(input_path).read_text())
    table = DeltaLiteTable.open(spec["uri"], spec["storage_options"])
    Path(spec["ready"]).touch()
    go = Path(spec["go"])
    while not go.exists():
        time.sleep(0.002)
    results = {}
    for call in spec["calls"]:
        tag = call["tag"]
        try:
            stats = table.upsert(
                batch_of(call),
                **upsert_kwargs(call),
                commit_max_retries=spec["commit_max_retries"],
                commit_metadata={TAG_FIELD: tag},
            )
        except DeltaLiteError as e:
            results[tag] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            continue
        d = stats.to_dict()
        d.pop("timings", None)
        # Every batch carries a non-key column, so a call commits iff it writes a file;
        # when every row lost to the cursor rule there is no commit and `version` is the
        # snapshot the call read.
        d["committed"] = d["files_added"] + d["files_removed"] > 0
        d["ok"] = True
        results[tag] = d
    Path(spec["out"]).write_text(json.dumps(results))


# --------------------------------------------------------------------------- S3 (moto)


def s3_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }


def moto_binary() -> str | None:
    for candidate in (
        os.environ.get("MOTO_SERVER"),
        str(Path(sys.executable).parent / "moto_server"),
        str(HERE.parents[2] / ".venv" / "bin" / "moto_server"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto(bucket: str = "lake") -> tuple[subprocess.Popen, str]:
    """Start moto's S3 server on a free loopback port and create `bucket`, as
    scripts/lib/moto.sh does. The caller terminates the process."""
    binary = moto_binary()
    if binary is None:
        raise RuntimeError(
            "moto_server not found (pip install -r requirements-s3.txt into .venv, "
            "or set DELTALITE_TEST_S3_ENDPOINT / MOTO_SERVER)"
        )
    port = free_port()
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        create_bucket(endpoint, bucket)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, endpoint


@contextmanager
def s3_endpoint_for_tests(bucket: str = "lake") -> Iterator[str]:
    """The tests' S3 endpoint: `DELTALITE_TEST_S3_ENDPOINT` (scripts/test.sh starts moto
    and creates bucket `lake`), else a moto_server started here for the duration."""
    endpoint = os.environ.get("DELTALITE_TEST_S3_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    proc, endpoint = start_moto(bucket)
    try:
        yield endpoint
    finally:
        proc.terminate()
        proc.wait()


def create_bucket(endpoint: str, bucket: str = "lake") -> None:
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    for _ in range(200):
        try:
            s3.create_bucket(Bucket=bucket)
            return
        except s3.exceptions.BucketAlreadyOwnedByYou:
            return
        except Exception:
            time.sleep(0.05)
    raise RuntimeError(f"S3 server at {endpoint} did not come up")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker_main(sys.argv[2])
    else:
        raise SystemExit(f"usage: {sys.argv[0]} worker INPUT.json")
