"""Run one step of the differential source through the `dlt_altertable` importable here:
ours on the host (`.venv-dlt`, CPython 3.11) or the real dlt-altertable 0.2.2 in the
CPython 3.13 root (`/opt/clients`). Prints one JSON line with the outcome; exits 0 even
when the load failed (the caller asserts on the outcome).

    python load_side.py --side ours|real --step 1|2 --host H --port P
        --catalog C --dataset D --user U --password W --pipelines-dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", choices=("ours", "real"), required=True)
    ap.add_argument("--step", type=int, choices=(1, 2), required=True)
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
        info = pipeline.run(differential_source(args.step))
        outcome["ok"] = True
        outcome["load_ids"] = list(info.loads_ids)
        outcome["failed_jobs"] = [
            {"table": j.job_file_info.table_name, "error": j.failed_message}
            for package in info.load_packages
            for j in package.jobs.get("failed_jobs", [])
        ]
        outcome["has_failed_jobs"] = info.has_failed_jobs
    except Exception as ex:  # noqa: BLE001 - the caller reports any failure
        outcome["ok"] = False
        outcome["error"] = f"{type(ex).__name__}: {ex}"
        outcome["traceback"] = traceback.format_exc()[-6000:]
    outcome["seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(outcome, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
