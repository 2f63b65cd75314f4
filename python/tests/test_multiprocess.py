"""Concurrent writer processes end in some serial order (issue #6), on local disk and on
S3 (moto): the table equals the contract model fed with the committed calls in
commit-version order, every call's statistics match the model at its place in that
order, every committed call is in the log exactly once, and no key is duplicated."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from concurrency_model import RunReport, run_python_writers, s3_endpoint_for_tests, s3_options

PROCESSES = 4
CALLS = 12


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """scripts/test.sh exports DELTALITE_TEST_S3_ENDPOINT (bucket `lake` exists); run
    standalone, this starts moto_server from .venv itself (and fails if there is none)."""
    try:
        with s3_endpoint_for_tests("lake") as endpoint:
            yield endpoint
    except RuntimeError as e:
        pytest.fail(f"no S3 server for the concurrency test: {e}")


def check(report: RunReport, capsys: pytest.CaptureFixture, label: str) -> None:
    with capsys.disabled():
        print(f"\n[concurrent writers, {label}] {report.summary()}")
    assert report.errors == []
    assert report.verdict.mismatches == []
    assert report.verdict.committed + report.verdict.noops == report.calls
    # The workload is contended on purpose: a run without a single lost race would prove
    # nothing about concurrency.
    assert report.commit_retries >= 1, "no commit conflict happened; the run proves nothing"


def test_concurrent_processes_local(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    report = run_python_writers(
        str(tmp_path / "table"), None, tmp_path / "work", processes=PROCESSES, calls=CALLS
    )
    check(report, capsys, "local")


def test_concurrent_processes_s3(
    tmp_path: Path, s3_endpoint: str, capsys: pytest.CaptureFixture
) -> None:
    uri = f"s3://lake/multiprocess-{uuid.uuid4().hex}"
    report = run_python_writers(
        uri, s3_options(s3_endpoint), tmp_path / "work", processes=PROCESSES, calls=CALLS
    )
    check(report, capsys, "s3")
