"""Unsupported merge configurations, terminal vs transient errors, idempotent retries.

Faults come from a fault-injecting proxy in front of the real server; results are checked by
querying the server directly.
"""

import dlt
import pytest
from conftest import fq, make_destination
from dlt.common.destination.exceptions import (
    DestinationTerminalException,
)
from dlt.load.exceptions import LoadClientJobFailed, LoadClientJobRetry, LoadClientJobTerminalRetry
from dlt.pipeline.exceptions import PipelineStepFailed
from proxy import Rule

from dlt_altertable import UnsupportedMergeConfiguration


def _cause(ex: BaseException) -> BaseException:
    while getattr(ex, "exception", None) is not None and ex.exception is not ex:
        ex = ex.exception
    return ex


UNSUPPORTED = {
    "delete_insert": dict(
        write_disposition={"disposition": "merge", "strategy": "delete-insert"}, primary_key="id"
    ),
    "scd2": dict(write_disposition={"disposition": "merge", "strategy": "scd2"}),
    "merge_key": dict(write_disposition="merge", primary_key="id", merge_key="v"),
    # merged with SQL (hard_delete, nested tables) is supported: test_merge_paths.py
    "skip_unchanged_rows": dict(
        write_disposition={"disposition": "merge", "skip_unchanged_rows": True},
        primary_key="id",
    ),
    "no_primary_key": dict(write_disposition="merge"),
    "ascending_dedup_sort": dict(
        write_disposition="merge", primary_key="id", columns={"ts": {"dedup_sort": "asc"}}
    ),
    "comma_in_key": dict(write_disposition="merge", primary_key="a,b"),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_merge_fails_terminally_before_upload(
    case, server, dataset, make_pipeline, proxy, monkeypatch
):
    if case == "comma_in_key":
        # only a naming convention that keeps commas can produce such a column
        monkeypatch.setenv("SCHEMA__NAMING", "direct")

    @dlt.resource(name="bad", **UNSUPPORTED[case])
    def bad():
        yield {"id": 1, "v": "x", "ts": 1, "deleted": False, "a,b": 1}

    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(bad())
    cause = _cause(exc.value)
    assert isinstance(cause, UnsupportedMergeConfiguration), repr(cause)
    assert isinstance(cause, DestinationTerminalException)
    assert proxy.count("/upload") == 0 and proxy.count("/upsert") == 0
    assert not server.table_exists(dataset, "bad")


def _events(n=3):
    return [{"id": i, "v": f"v{i}"} for i in range(n)]


def _upload_rule(action, **kw):
    return Rule(lambda r: r.route == "/upload" and "table=ev" in r.path, action, **kw)


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 405])
def test_terminal_status_fails_job_after_one_attempt(status, server, dataset, make_pipeline, proxy):
    proxy.rules.append(_upload_rule("status", status=status))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(_events(), table_name="ev")
    # dlt 1.31 raises LoadClientJobTerminalRetry (older: LoadClientJobFailed), both terminal
    assert isinstance(exc.value.exception, (LoadClientJobFailed, LoadClientJobTerminalRetry))
    assert isinstance(exc.value.exception, DestinationTerminalException)
    assert proxy.count("/upload", "table=ev") == 1
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 0}]


def test_wrong_password_is_terminal(server, dataset, make_pipeline, proxy):
    dest = make_destination(server, dataset, port=proxy.port)
    dest.config_params["password"] = "wrong"
    p = make_pipeline(destination=dest)
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(_events(), table_name="ev")
    assert "401" in str(exc.value)
    # the very first request was refused, nothing else was attempted twice
    assert proxy.count("/upload") <= 1


@pytest.mark.parametrize("action,status", [("status", 503), ("status", 429), ("drop", None)])
def test_transient_until_max_retries(action, status, server, dataset, make_pipeline, proxy):
    proxy.rules.append(_upload_rule(action, status=status or 503))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(_events(), table_name="ev")
    assert isinstance(exc.value.exception, LoadClientJobRetry)
    # dlt's default `load.raise_on_max_retries` is 5 attempts
    assert proxy.count("/upload", "table=ev") == 5


@pytest.mark.parametrize(
    "action,status", [("status", 503), ("drop", None), ("status", 500), ("status", 418)]
)
def test_transient_then_success_loads_once(action, status, server, dataset, make_pipeline, proxy):
    proxy.rules.append(_upload_rule(action, status=status or 503, times=2))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(_events(), table_name="ev")
    assert proxy.count("/upload", "table=ev") == 3
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 3}]


def test_query_error_line_is_transient(server, dataset, make_pipeline, proxy):
    def is_sync_of_ev(r):
        return r.route == "/query" and b"DESCRIBE" in r.body and b'\\"ev\\"' in r.body

    proxy.rules.append(Rule(is_sync_of_ev, "error_line", times=2))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(_events(), table_name="ev")
    assert sum(1 for r in proxy.log if is_sync_of_ev(r)) == 3
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 3}]


def test_query_error_line_until_max_retries(server, dataset, make_pipeline, proxy):
    def is_sync_of_ev(r):
        return r.route == "/query" and b"DESCRIBE" in r.body and b'\\"ev\\"' in r.body

    proxy.rules.append(Rule(is_sync_of_ev, "error_line"))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(_events(), table_name="ev")
    assert isinstance(exc.value.exception, LoadClientJobRetry)
    assert sum(1 for r in proxy.log if is_sync_of_ev(r)) == 5
    assert proxy.count("/upload", "table=ev") == 0


@pytest.mark.parametrize("disposition", ["append", "replace"])
def test_lost_response_is_not_duplicated(disposition, server, dataset, make_pipeline, proxy):
    """The server commits the upload, the response is lost, dlt retries with the same
    Idempotency-Key, and the rows land once."""
    proxy.rules.append(_upload_rule("forward_then_drop", times=1))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(_events(5), table_name="ev", write_disposition=disposition)
    uploads = [r for r in proxy.log if r.route == "/upload" and "table=ev" in r.path]
    assert len(uploads) == 2
    assert all(u.headers.get("Idempotency-Key") for u in uploads)
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 5}]


def test_lost_response_on_upsert_is_harmless(server, dataset, make_pipeline, proxy):
    proxy.rules.append(
        Rule(lambda r: r.route == "/upsert" and "table=m" in r.path, "forward_then_drop", times=1)
    )

    @dlt.resource(name="m", write_disposition="merge", primary_key="id")
    def m():
        yield _events(4)

    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(m())
    assert proxy.count("/upsert", "table=m") == 2
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'm')}") == [{"n": 4}]


def test_parallelism_override_is_refused(server, dataset, make_pipeline, monkeypatch, proxy):
    from dlt_altertable import AltertableConfigurationError, altertable

    with pytest.raises(AltertableConfigurationError):
        altertable(loader_parallelism_strategy="parallel")
    monkeypatch.setenv("LOAD__PARALLELISM_STRATEGY", "parallel")
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    with pytest.raises(PipelineStepFailed) as exc:
        p.run(_events(), table_name="ev")
    assert "table-sequential" in str(exc.value)
    assert proxy.count("/upload") == 0


def test_read_timeout_is_transient_and_idempotent(server, dataset, make_pipeline, proxy):
    """The upload commits but answers after the client's read timeout; the retry carries the
    same Idempotency-Key and the rows land once."""
    proxy.rules.append(_upload_rule("slow", delay=3.0, times=1))
    dest = make_destination(server, dataset, port=proxy.port, upload_timeout=1.0)
    p = make_pipeline(destination=dest)
    p.run(_events(5), table_name="ev")
    assert proxy.count("/upload", "table=ev") == 2
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 5}]


def test_retry_after_is_honoured(server, dataset, make_pipeline, proxy):
    proxy.rules.append(_upload_rule("status", status=429, headers={"Retry-After": "2"}, times=1))
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(_events(2), table_name="ev")
    attempts = [r.at for r in proxy.log if r.route == "/upload" and "table=ev" in r.path]
    assert len(attempts) == 2
    assert attempts[1] - attempts[0] >= 1.9
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 2}]


def test_retried_jobs_back_off(server, dataset, make_pipeline, proxy):
    proxy.rules.append(_upload_rule("status", status=503, times=2))
    dest = make_destination(server, dataset, port=proxy.port, retry_backoff=0.5)
    p = make_pipeline(destination=dest)
    p.run(_events(2), table_name="ev")
    attempts = [r.at for r in proxy.log if r.route == "/upload" and "table=ev" in r.path]
    assert len(attempts) == 3
    # first retry waits 0.5 s, the second 1 s
    assert attempts[1] - attempts[0] >= 0.45
    assert attempts[2] - attempts[1] >= 0.95
    assert server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, 'ev')}") == [{"n": 2}]


def test_replace_retries_across_files_keep_every_row(
    server, dataset, make_pipeline, proxy, monkeypatch
):
    """A replace load of several files where every other upload (overwrite and appends) commits
    but loses its response: every row lands exactly once."""
    monkeypatch.setenv("DATA_WRITER__FILE_MAX_ITEMS", "4")
    p = make_pipeline(destination=make_destination(server, dataset, port=proxy.port))
    p.run(_events(4), table_name="ev", write_disposition="replace")
    hits = {"n": 0}

    def odd_uploads(r):
        if r.route == "/upload" and "table=ev" in r.path:
            hits["n"] += 1
            return hits["n"] % 2 == 1
        return False

    proxy.rules.append(Rule(odd_uploads, "forward_then_drop"))
    p.run(_events(13), table_name="ev", write_disposition="replace")
    assert hits["n"] >= 8, "4 files, each losing its first response"
    rows = server.query(f"SELECT id FROM {fq(server, dataset, 'ev')} ORDER BY id")
    assert [r["id"] for r in rows] == list(range(13))
