"""The load job: one HTTP POST per load file (`/upload`, `/upsert`, or `/upload` into the
staging schema of a staged merge), with its idempotency key, retry backoff and the padding of
files written before dlt evolved the schema."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from typing import TYPE_CHECKING, Optional

import pyarrow as pa
import pyarrow.parquet as pq
from dlt.common import logger
from dlt.common.destination.client import RunnableLoadJob
from dlt.common.libs.pyarrow import get_py_arrow_datatype
from dlt.common.storages import ParsedLoadJobFileName
from dlt.common.storages.load_package import PackageStorage

from dlt_altertable.exceptions import AltertableTransientError
from dlt_altertable.merge import merge_spec
from dlt_altertable.staging import stage_file

if TYPE_CHECKING:
    from dlt_altertable.job_client import AltertableJobClient

MAX_BACKOFF = 30.0
# (load_id, table, file_id) -> Retry-After seconds of the last transient failure
_RETRY_AFTER: dict[tuple[str, str, str], float | None] = {}


def idempotency_key(*parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"dlt-{digest[:48]}"


class AltertableLoadJob(RunnableLoadJob):
    def __init__(self, file_path: str) -> None:
        super().__init__(file_path)
        self._job_client: AltertableJobClient = None  # type: ignore[assignment]

    def run(self) -> None:
        try:
            self._run()
        except AltertableTransientError as ex:
            # dlt re-queues the job at once: remember how long the retry should wait
            _RETRY_AFTER[self._retry_marker()] = ex.retry_after
            raise

    def _retry_marker(self) -> tuple[str, str, str]:
        parsed = ParsedLoadJobFileName.parse(self.file_name())
        return (self._load_id, parsed.table_name, parsed.file_id)

    def _backoff(self) -> None:
        retry = ParsedLoadJobFileName.parse(self.file_name()).retry_count
        if retry <= 0:
            return
        asked = _RETRY_AFTER.pop(self._retry_marker(), None)
        base = float(self._job_client.config.retry_backoff or 0.0)
        delay = asked if asked is not None else min(base * 2 ** (retry - 1), MAX_BACKOFF)
        if delay > 0:
            logger.info(f"altertable: retry {retry} of {self.file_name()} in {delay:.1f}s")
            time.sleep(delay)

    def _run(self) -> None:
        self._backoff()
        client = self._job_client
        table = self._load_table
        table_name = table["name"]
        disposition = table.get("write_disposition", "append")
        file_schema = pq.read_schema(self._file_path)
        client.sync_table(self._load_id, table, file_schema)
        parsed = ParsedLoadJobFileName.parse(self.file_name())
        params = client.table_params(table_name)

        if disposition == "merge" and client.is_staged(table_name):
            # nested tables, partitions outside the key: merged with SQL in
            # complete_load from a per-load staging schema
            stage_file(client, self._load_id, table, self._file_path, parsed.file_id, file_schema)
            return
        if disposition == "merge":
            spec = merge_spec(table, staged=False)
            params["primary_key"] = ",".join(spec.primary_key)
            if spec.cursor:
                params["cursor_field"] = ",".join(spec.cursor)
            if spec.hard_delete:
                params["delete_column"] = spec.hard_delete
            key = idempotency_key(self._load_id, table_name, parsed.file_id, "upsert")
            client.http.post_file("/upsert", params, self._file_path, key)
            return

        mode = "append"
        if disposition == "replace" and not self._completed_file_ids(table_name):
            # the first file of the table to run in this load overwrites, the others append
            mode = "overwrite"
        if mode == "overwrite":
            # re-applying an overwrite is harmless, replaying a stale one is not: once another
            # file of this load overwrote the table, a dedup on this file's key would drop its
            # rows. So each overwrite attempt has its own key.
            key = idempotency_key(
                self._load_id, table_name, parsed.file_id, mode, str(parsed.retry_count)
            )
        else:
            # appends happen only after some file of the table completed in this load, so no
            # overwrite can follow them: a committed append stays live and its retry must dedup
            key = idempotency_key(self._load_id, table_name, parsed.file_id, mode)
        params["mode"] = mode
        extra = (
            client.server_extra_columns(self._load_id, table_name) if mode == "overwrite" else {}
        )
        padded = self._pad_file(file_schema, extra)
        try:
            client.http.post_file("/upload", params, padded or self._file_path, key)
        finally:
            if padded:
                os.unlink(padded)
        if mode == "overwrite":
            # the server replaces the column metadata on overwrite: comments go with it
            client.apply_descriptions(table, None)

    def _completed_file_ids(self, table_name: str) -> set[str]:
        """File ids of this table's jobs already completed in this package. With
        table-sequential loading no other job of the table runs concurrently."""
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(self._file_path)))
        folder = os.path.join(package_dir, PackageStorage.COMPLETED_JOBS_FOLDER)
        done: set[str] = set()
        if not os.path.isdir(folder):
            return done
        for name in os.listdir(folder):
            try:
                parsed = ParsedLoadJobFileName.parse(name)
            except Exception:
                continue
            if parsed.table_name == table_name:
                done.add(parsed.file_id)
        return done

    def _pad_file(
        self, file_schema: pa.Schema, server_extra: Optional[dict[str, pa.DataType]] = None
    ) -> Optional[str]:
        """Pad a file written before dlt evolved the schema with typed NULL columns.

        `server_extra`: columns the server table has beyond dlt's schema; an overwrite keeps
        them (as NULL) so that removed columns stay."""
        columns = self._job_client.typed_columns(self._load_table)
        missing = [c for c in columns if c["name"] not in file_schema.names]
        extra = {
            name: type_
            for name, type_ in (server_extra or {}).items()
            if name not in file_schema.names
        }
        if not missing and not extra:
            return None
        caps = self._job_client.capabilities
        target_fields = []
        for col in columns:
            if col["name"] in file_schema.names:
                target_fields.append(file_schema.field(col["name"]))
            else:
                target_fields.append(
                    pa.field(col["name"], get_py_arrow_datatype(col, caps, "UTC"), nullable=True)
                )
        listed = {c["name"] for c in columns}
        target_fields += [f for f in file_schema if f.name not in listed]
        target_fields += [pa.field(name, type_, nullable=True) for name, type_ in extra.items()]
        target = pa.schema(target_fields)
        fd, out_path = tempfile.mkstemp(prefix="dlt-altertable-", suffix=".parquet")
        os.close(fd)
        try:
            source = pq.ParquetFile(self._file_path)
            with pq.ParquetWriter(out_path, target) as writer:
                wrote = False
                for batch in source.iter_batches():
                    arrays = []
                    for field in target:
                        if field.name in batch.schema.names:
                            arrays.append(batch.column(field.name))
                        else:
                            arrays.append(pa.nulls(batch.num_rows, type=field.type))
                    writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=target))
                    wrote = True
                if not wrote:
                    writer.write_table(target.empty_table())
        except BaseException:
            os.unlink(out_path)
            raise
        logger.info(
            f"altertable: padded {self.file_name()} with NULL columns"
            f" {[c['name'] for c in missing] + list(extra)}"
        )
        return out_path
