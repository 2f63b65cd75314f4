"""Stress: N writer processes upsert concurrently into one table; the result must be some
serial order of the committed calls (issue #6).

The longer run of `python/tests/test_multiprocess.py`: the workload, the writer process
and the contract model live in `python/tests/concurrency_model.py` and are shared.

    .venv/bin/python correctness/stress/concurrent_writers.py --processes 6 --calls 40
    .venv/bin/python correctness/stress/concurrent_writers.py --storage s3            # starts moto
    .venv/bin/python correctness/stress/concurrent_writers.py --storage s3 --endpoint http://127.0.0.1:5000

Exits non-zero when anything disagrees with the model.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))

import concurrency_model as cm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=40, help="upserts per process")
    parser.add_argument("--storage", choices=["local", "s3"], default="local")
    parser.add_argument(
        "--endpoint",
        help="S3 endpoint with a bucket `lake` (default: start moto_server from .venv)",
    )
    parser.add_argument(
        "--keys", type=int, default=10, help="key range shared by all writers"
    )
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--commit-max-retries", type=int, default=100)
    args = parser.parse_args()

    moto = None
    with tempfile.TemporaryDirectory(prefix="stress-") as tmp:
        try:
            if args.storage == "s3":
                endpoint = args.endpoint
                if endpoint is None:
                    moto, endpoint = cm.start_moto("lake")
                else:
                    cm.create_bucket(endpoint, "lake")
                uri = f"s3://lake/stress-{uuid.uuid4().hex}"
                options = cm.s3_options(endpoint)
            else:
                uri, options = str(Path(tmp) / "table"), None
            report = cm.run_python_writers(
                uri,
                options,
                Path(tmp) / "work",
                processes=args.processes,
                calls=args.calls,
                seed=args.seed,
                keys=args.keys,
                commit_max_retries=args.commit_max_retries,
            )
        finally:
            if moto is not None:
                moto.terminate()
                moto.wait()
    v = report.verdict
    print(f"storage:              {args.storage}")
    print(f"processes x calls:    {args.processes} x {args.calls} = {report.calls}")
    print(f"calls committed:      {v.committed}")
    print(f"calls without commit: {v.noops} (every row lost to the cursor rule)")
    print(f"calls failed:         {v.failed}")
    print(
        f"conflicts retried:    {report.commit_retries} ({report.conflict_calls} calls)"
    )
    print(f"re-plans:             {report.replans}")
    print(f"rebases:              {report.commit_retries - report.replans}")
    print(f"rows:                 {v.rows}")
    print(f"mismatches:           {len(v.mismatches)}")
    print(f"wall time:            {report.wall_seconds:.1f} s")
    for line in v.mismatches[:50]:
        print(f"  MISMATCH {line}")
    for line in report.errors[:20]:
        print(f"  ERROR {line}")
    return 1 if v.mismatches or report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
