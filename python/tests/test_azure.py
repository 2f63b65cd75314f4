"""The Python package on Azure Blob Storage (`az://`), against Azurite (harness/azurite.py):
create, upserts read back by an independent reader (the `deltalake` package), and
contended writer processes checked against the contract model, as on S3
(test_multiprocess.py). Azurite enforces conditional writes (checked first), so commit
races are real here."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient
from concurrency_model import run_python_writers
from deltalake import DeltaTable
from test_multiprocess import CALLS, PROCESSES, check

from deltalite import DeltaLiteTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))
from azurite import Azurite  # noqa: E402

CONTAINER = "lake"


@pytest.fixture(scope="module")
def azurite() -> Iterator[Azurite]:
    with Azurite() as emulator:
        BlobServiceClient.from_connection_string(emulator.connection_string()).create_container(
            CONTAINER
        )
        yield emulator


@pytest.fixture
def az(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> Azurite:
    """The emulator's address in this process's environment (object_store reads it when
    a table is opened; writer processes inherit it)."""
    for name, value in azurite.env().items():
        monkeypatch.setenv(name, value)
    return azurite


def test_the_emulator_refuses_a_losing_conditional_write(az: Azurite) -> None:
    blob = BlobServiceClient.from_connection_string(az.connection_string()).get_blob_client(
        CONTAINER, f"probe-{uuid.uuid4().hex}"
    )
    blob.upload_blob(b"first")
    # overwrite=False sends If-None-Match: *, what a Delta commit's put does.
    with pytest.raises(ResourceExistsError):
        blob.upload_blob(b"second", overwrite=False)
    assert blob.download_blob().readall() == b"first"


def test_create_upsert_and_read_back_with_another_reader(az: Azurite) -> None:
    uri = f"az://{CONTAINER}/t-{uuid.uuid4().hex}"
    options = Azurite.storage_options()
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = DeltaLiteTable.create(uri, schema, storage_options=options)
    table.upsert(pa.table({"id": [1, 2], "name": ["ann", "bo"]}, schema=schema), "id")
    stats = table.upsert(pa.table({"id": [2, 3], "name": ["bob", "cy"]}, schema=schema), "id")
    assert (stats.rows_inserted, stats.rows_updated) == (1, 1)
    assert DeltaLiteTable.open(uri, storage_options=options).version() == 2
    read = DeltaTable(uri, storage_options=options).to_pyarrow_table().sort_by("id")
    assert read.to_pylist() == [
        {"id": 1, "name": "ann"},
        {"id": 2, "name": "bob"},
        {"id": 3, "name": "cy"},
    ]


def test_concurrent_processes_azure(
    tmp_path: Path, az: Azurite, capsys: pytest.CaptureFixture
) -> None:
    uri = f"az://{CONTAINER}/multiprocess-{uuid.uuid4().hex}"
    report = run_python_writers(
        uri,
        Azurite.storage_options(),
        tmp_path / "work",
        processes=PROCESSES,
        calls=CALLS,
    )
    check(report, capsys, "azure")
