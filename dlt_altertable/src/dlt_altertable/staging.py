"""The staged merge path: files of a staged table chain go to a per-load staging schema
(`<dataset>_dlt_staging_<16 hex of sha256(load_id)>`, one table `_dlt_file_<32 hex>` per
file, the names dlt-altertable 0.2.2 uses); `complete_load` merges them with SQL, records
the load, then drops the staging schema.

Progress lives in the load package's destination state (`staged_files`), committed to disk,
so a load that failed in `complete_load` resumes from the staged files on the next run.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from dlt.common import logger
from dlt.common.libs.pyarrow import get_py_arrow_datatype
from dlt.common.storages.exceptions import CurrentLoadPackageStateNotAvailable
from dlt.common.storages.load_package import commit_load_package_state, destination_state

from dlt_altertable.exceptions import AltertableTerminalError
from dlt_altertable.merge import SEQ_COLUMN
from dlt_altertable.types import quote_ident

if TYPE_CHECKING:
    from dlt_altertable.job_client import AltertableJobClient

STATE_KEY = "staged_files"


def staging_schema_name(dataset_name: str, load_id: str) -> str:
    suffix = hashlib.sha256(load_id.encode()).hexdigest()[:16]
    return f"{dataset_name}_dlt_staging_{suffix}"


def staging_file_table(file_id: str) -> str:
    return "_dlt_file_" + hashlib.sha256(file_id.encode()).hexdigest()[:32]


def staged_files() -> dict[str, dict[str, dict[str, Any]]]:
    """table -> staging file table -> {"seq": ordinal, "done": bool} of the current package."""
    return destination_state().setdefault(STATE_KEY, {})


def completed_staged_files() -> dict[str, list[str]]:
    """table -> its uploaded staging file tables in staging order; {} outside a package or
    when nothing was staged. Refuses a load whose staging is incomplete."""
    try:
        state = staged_files()
    except CurrentLoadPackageStateNotAvailable:
        return {}
    if not all(entry.get("done") for files in state.values() for entry in files.values()):
        raise AltertableTerminalError("Cannot merge a load with incomplete staging uploads.")
    return {
        table: [name for name, _ in sorted(files.items(), key=lambda kv: kv[1]["seq"])]
        for table, files in state.items()
    }


def stage_file(
    client: AltertableJobClient,
    load_id: str,
    table: Any,
    file_path: str,
    file_id: str,
    file_schema: pa.Schema,
) -> None:
    """Upload one load file of a staged chain to its own staging table (mode=overwrite, so a
    retry simply replaces it), padded to the table's dlt columns, with the order column."""
    name = table["name"]
    state = staged_files()
    files = state.setdefault(name, {})
    staging_table = staging_file_table(file_id)
    if staging_table not in files:
        files[staging_table] = {"seq": len(files), "done": False}
        commit_load_package_state()
    ordinal = int(files[staging_table]["seq"])
    schema_name = staging_schema_name(client.dataset_name, load_id)
    client.ensure_staging_schema(schema_name)
    path = _staging_file(client, table, file_path, file_schema, ordinal)
    try:
        params = {"catalog": str(client.config.catalog), "schema": schema_name}
        params.update(table=staging_table, mode="overwrite")
        client.http.post_file("/upload", params, path, None)
    finally:
        os.unlink(path)
    files[staging_table]["done"] = True
    commit_load_package_state()


def _staging_file(
    client: AltertableJobClient,
    table: Any,
    file_path: str,
    file_schema: pa.Schema,
    ordinal: int,
) -> str:
    """The load file with every typed dlt column (typed NULLs where the file has none) and
    `SEQ_COLUMN` = (ordinal << 32) + row number, the tie-break of the root's dedup."""
    columns = client.typed_columns(table)
    caps = client.capabilities
    fields = []
    for col in columns:
        if col["name"] in file_schema.names:
            fields.append(file_schema.field(col["name"]))
        else:
            fields.append(pa.field(col["name"], get_py_arrow_datatype(col, caps, "UTC")))
    listed = {c["name"] for c in columns}
    fields += [f for f in file_schema if f.name not in listed and f.name != SEQ_COLUMN]
    fields.append(pa.field(SEQ_COLUMN, pa.int64(), nullable=False))
    target = pa.schema(fields)
    fd, out_path = tempfile.mkstemp(prefix="dlt-altertable-stage-", suffix=".parquet")
    os.close(fd)
    row = ordinal << 32
    try:
        source = pq.ParquetFile(file_path)
        with pq.ParquetWriter(out_path, target) as writer:
            wrote = False
            for batch in source.iter_batches():
                arrays = []
                for f in target:
                    if f.name == SEQ_COLUMN:
                        arrays.append(pa.array(range(row, row + batch.num_rows), pa.int64()))
                    elif f.name in batch.schema.names:
                        arrays.append(batch.column(f.name))
                    else:
                        arrays.append(pa.nulls(batch.num_rows, type=f.type))
                row += batch.num_rows
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=target))
                wrote = True
            if not wrote:
                writer.write_table(target.empty_table())
    except BaseException:
        os.unlink(out_path)
        raise
    return out_path


def drop_staging_schema(client: AltertableJobClient, load_id: str) -> None:
    schema_name = staging_schema_name(client.dataset_name, load_id)
    client.query(
        "DROP SCHEMA IF EXISTS"
        f" {quote_ident(str(client.config.catalog))}.{quote_ident(schema_name)} CASCADE"
    )
    logger.info(f"altertable: dropped staging schema {schema_name}")


def staging_qualified(client: AltertableJobClient, load_id: str, table_name: str) -> str:
    return ".".join(
        quote_ident(p)
        for p in (
            str(client.config.catalog),
            staging_schema_name(client.dataset_name, load_id),
            table_name,
        )
    )
