"""Run one step of the differential source through the `dlt_altertable` importable here:
ours on the host (`.venv-dlt`, CPython 3.11) or the real dlt-altertable 0.2.2 in the
CPython 3.13 root (`/opt/clients`). Prints one JSON line with the outcome; exits 0 even
when the step failed (the caller asserts on the outcome).

    python load_side.py --side ours|real --step 1|2|3|read --host H --port P
        --catalog C --dataset D --user U --password W --pipelines-dir DIR

- `1`, `2`: load that step of the source.
- `3`: DIR must be new and empty: report the local state (none), restore the state and
  schemas from the destination (`pipeline.sync_destination()`, what `run` does first), report
  what came back, then load step 3 of the `feed` resource incrementally from the restored
  cursor.
- `read`: with DIR of step 3, read every data table through `pipeline.dataset()`: row
  counts (`arrow()`, `fetchall()`, `df()` when pandas is installed, `row_counts()`), a
  checksum of the values, `limit`, and a few `select` / `order_by` / `where` / `max`
  queries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
import time
import traceback
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", choices=("ours", "real"), required=True)
    ap.add_argument("--step", choices=("1", "2", "3", "read"), required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--pipelines-dir", required=True)
    args = ap.parse_args()

    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")
    import dlt
    from differential_source import differential_source

    import dlt_altertable
    from dlt_altertable import altertable

    common = {
        "host": args.host,
        "port": args.port,
        "tls": False,
        "catalog": args.catalog,
        "username": args.user,
        "password": args.password,
        # nested lists of dicts become nested tables (both packages default to 0: JSON)
        "max_table_nesting": 2,
    }
    if args.side == "ours":
        # ours takes the target schema from its own config; the pipeline's dataset_name is
        # not used
        destination = altertable(dataset_name=args.dataset, retry_backoff=0.0, **common)
    else:
        # 0.2.2 refuses dataset_name= and reads it from the pipeline
        destination = altertable(**common)
    pipeline = dlt.pipeline(
        pipeline_name=f"differential_{args.side}",
        pipelines_dir=args.pipelines_dir,
        destination=destination,
        dataset_name=args.dataset,
    )
    outcome: dict = {
        "side": args.side,
        "step": args.step,
        "package": getattr(dlt_altertable, "__file__", None),
        "python": sys.version.split()[0],
    }
    started = time.monotonic()
    try:
        if args.step == "read":
            outcome.update(_read(pipeline))
        elif args.step == "3":
            outcome.update(_restore_and_load(pipeline, differential_source))
        else:
            outcome.update(_load(pipeline, differential_source(int(args.step))))
        outcome["ok"] = True
    except Exception as ex:  # noqa: BLE001 - the caller reports any failure
        outcome["ok"] = False
        outcome["error"] = f"{type(ex).__name__}: {ex}"
        outcome["traceback"] = traceback.format_exc()[-6000:]
    outcome["seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(outcome, default=str))
    return 0


def _load(pipeline: Any, data: Any) -> dict:
    info = pipeline.run(data)
    return {
        "load_ids": list(info.loads_ids),
        "failed_jobs": [
            {"table": j.job_file_info.table_name, "error": j.failed_message}
            for package in info.load_packages
            for j in package.jobs.get("failed_jobs", [])
        ],
        "has_failed_jobs": info.has_failed_jobs,
    }


def _feed_state(pipeline: Any) -> dict | None:
    """The feed resource's state: the steps that ran and the incremental cursor."""
    source = pipeline.state.get("sources", {}).get("diff")
    if source is None:
        return None
    feed = source.get("resources", {}).get("feed", {})
    cursor = feed.get("incremental", {}).get("seq", {})
    return {
        "steps": feed.get("steps"),
        "last_value": cursor.get("last_value"),
        "unique_hashes": len(cursor.get("unique_hashes", [])),
    }


def _schemas(pipeline: Any) -> dict:
    return {
        name: {
            "version": schema.version,
            "tables": sorted(schema.data_table_names()),
        }
        for name, schema in pipeline.schemas.items()
    }


def _restore_and_load(pipeline: Any, differential_source: Any) -> dict:
    """Step 3 on an empty pipelines_dir: restore, report, then load incrementally."""
    before = {
        "first_run": pipeline.first_run,
        "schema_names": list(pipeline.schema_names),
        "feed": _feed_state(pipeline),
    }
    pipeline.sync_destination()
    restored = {
        "first_run": pipeline.first_run,
        "schema_names": list(pipeline.schema_names),
        "default_schema_name": pipeline.default_schema_name,
        "schemas": _schemas(pipeline),
        "feed": _feed_state(pipeline),
        "state_version": pipeline.state["_state_version"],
    }
    loaded = _load(pipeline, differential_source(3).with_resources("feed"))
    return {
        "before": before,
        "restored": restored,
        "after": {"feed": _feed_state(pipeline), "schemas": _schemas(pipeline)},
        **loaded,
    }


def _plain(value: Any) -> Any:
    """One canonical JSON-able form of a value read back (both sides, any Arrow type)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value.normalize())
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


DLT_IDS = {"_dlt_id", "_dlt_load_id", "_dlt_parent_id", "_dlt_root_id"}


def checksum(table: Any) -> str:
    """sha256 of the sorted rows without dlt's ids (which differ between the runs), with
    column names canonical (the real package names nested tables and flattened columns
    `a▶b`, ours `a__b`)."""
    names = [n.replace("▶", "__") for n in table.column_names]
    rows = sorted(
        json.dumps(
            {n: _plain(v) for n, v in zip(names, row, strict=True) if n not in DLT_IDS},
            sort_keys=True,
        )
        for row in zip(*(c.to_pylist() for c in table.columns), strict=True)
    )
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _read(pipeline: Any) -> dict:
    """Every data table of the pipeline's schema through `pipeline.dataset()`."""
    try:
        import pandas  # noqa: F401

        has_pandas = True
    except ImportError:
        has_pandas = False
    dataset = pipeline.dataset()
    schema = pipeline.default_schema
    tables = {}
    for name in sorted(schema.data_table_names()):
        relation = dataset[name]
        arrow = relation.arrow()
        tables[name.replace("▶", "__")] = {
            "arrow_rows": arrow.num_rows,
            "fetchall_rows": len(relation.fetchall()),
            "df_rows": len(relation.df()) if has_pandas else None,
            "limit_2_rows": relation.limit(2).arrow().num_rows,
            "columns": sorted(c.replace("▶", "__") for c in arrow.column_names),
            "checksum": checksum(arrow),
        }
    counts = {name.replace("▶", "__"): n for name, n in dataset.row_counts().fetchall()}
    queries = {
        "customers_first_3": [
            list(r)
            for r in dataset["customers"]
            .select("id", "email")
            .order_by("id")
            .limit(3)
            .fetchall()
        ],
        "orders_desc": [
            list(r)
            for r in dataset["orders"]
            .select("order_id", "version")
            .order_by("order_id", "desc")
            .fetchall()
        ],
        "feed_max_seq": dataset["feed"].select("seq").max().fetchscalar(),
        "feed_above_5": sorted(
            r[0] for r in dataset["feed"].where("seq", "gt", 5).select("seq").fetchall()
        ),
        "readings_sql": [
            list(r)
            for r in dataset.query(
                "SELECT reading_id, value FROM readings ORDER BY reading_id"
            ).fetchall()
        ],
    }
    return {
        "pandas": has_pandas,
        "tables": tables,
        "row_counts": counts,
        "queries": queries,
    }


if __name__ == "__main__":
    sys.exit(main())
