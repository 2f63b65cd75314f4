"""Summary of a PostHog deltalite 0.1.15 suite run (scripts/test-posthog.sh).

Reads pytest's JUnit XML, prints the pass/fail/skip counts and every test that did not
pass, and exits non-zero unless the failures are exactly our documented deliberate
differences (python/README.md, "Differences from PostHog's deltalite"): a new failure
is a regression, and a difference that starts passing means the note is out of date.

Usage: python3 posthog_report.py JUNIT_XML
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

# Test id -> why we keep 0.1.15's behaviour out on purpose (safer for the user).
DELIBERATE_DIFFERENCES = {
    "tests/test_types.py::test_value_column_type_parity[timestamp_ns]": (
        "nanosecond timestamps that are not whole microseconds are refused "
        "(DeltaLiteSchemaMismatchError), not truncated silently as 0.1.15 and MERGE do"
    ),
    "tests/test_types.py::test_null_typed_column_deltalite_errors_where_merge_succeeds": (
        "a table with a void (pa.null()) column upserts like MERGE; 0.1.15 could not open it "
        "and its suite pins that limitation"
    ),
    "tests/test_operations.py::test_deletion_vector_table_is_refused_cleanly": (
        "tables with deletion vectors are upserted (their vectors honoured, new ones "
        "written): 0.1.15 refuses them and its suite pins that limitation"
    ),
    "tests/test_compact.py::test_deletion_vector_table_is_refused": (
        "tables with deletion vectors are compacted (which purges the vectors): 0.1.15 "
        "refuses them and its suite pins that limitation"
    ),
}


def test_id(case: ET.Element) -> str:
    module = case.get("classname", "").replace(".", "/")
    return f"{module}.py::{case.get('name')}"


def main(path: str) -> int:
    cases = list(ET.parse(path).getroot().iter("testcase"))
    failed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for case in cases:
        for kind in ("failure", "error"):
            for node in case.findall(kind):
                failed[test_id(case)] = (node.get("message") or kind).splitlines()[0][
                    :200
                ]
        for node in case.findall("skipped"):
            skipped[test_id(case)] = node.get("message") or "skipped"
    passed = len(cases) - len(failed) - len(skipped)
    print(
        f"PostHog deltalite 0.1.15 suite: {len(cases)} tests: "
        f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped"
    )
    for name, why in sorted(failed.items()):
        tag = "deliberate difference" if name in DELIBERATE_DIFFERENCES else "FAILED"
        print(f"  {tag}: {name}\n      {DELIBERATE_DIFFERENCES.get(name, why)}")
    for name, why in sorted(skipped.items()):
        print(f"  skipped: {name}\n      {why}")
    unexpected = sorted(set(failed) - set(DELIBERATE_DIFFERENCES))
    stale = sorted(set(DELIBERATE_DIFFERENCES) - set(failed))
    for name in unexpected:
        print(
            f"error: {name} fails and is not a documented difference", file=sys.stderr
        )
    for name in stale:
        print(
            f"error: {name} no longer fails: update the documented differences",
            file=sys.stderr,
        )
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
