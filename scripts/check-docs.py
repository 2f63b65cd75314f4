#!/usr/bin/env python3
"""Keep the map honest: every file and symbol ARCHITECTURE.md (and the READMEs) name in
backticks must exist.

A reference is a backticked path ending in a source extension, optionally followed by
`::symbol`, e.g. `txn/mod.rs::run` or `harness/server_process.py`. A path resolves when
exactly one tracked file ends with it (so short forms stay short but must be
unambiguous); a symbol resolves when the file defines it (`fn`, `struct`, `enum`, `trait`,
`mod`, `const`, `static`, `type`, `impl … for`, `def`, `class`). README links must stay
inside the repository. Exit status 1 lists what is missing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    "ARCHITECTURE.md",
    "README.md",
    "docs",
    "crates",
    "bench",
    "correctness",
    "python",
    "dlt_altertable",
]
REF = re.compile(r"`([\w./-]+\.(?:rs|py|sh|md))(?:::(\w+))?`")
OUTSIDE = re.compile(r"(?:\.\./shared|/work/|shared/spec)")


def tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line]


def markdown_files(files: list[str]) -> list[str]:
    picked = []
    for f in files:
        if not f.endswith(".md"):
            continue
        if any(f == d or f.startswith(d + "/") for d in DOCS):
            picked.append(f)
    return picked


def defines(text: str, symbol: str) -> bool:
    s = re.escape(symbol)
    patterns = [
        rf"\b(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?fn\s+{s}\b",
        rf"\b(?:struct|enum|trait|mod|const|static|type|union)\s+{s}\b",
        rf"\bimpl(?:<[^>]*>)?\s+[\w:<>, ]*\bfor\s+{s}\b",
        rf"^\s*(?:async\s+)?def\s+{s}\b",
        rf"^\s*class\s+{s}\b",
        rf"^{s}\s*=",
    ]
    return any(re.search(p, text, re.MULTILINE) for p in patterns)


def main() -> int:
    files = tracked()
    problems = []
    for doc in markdown_files(files):
        text = (ROOT / doc).read_text()
        if doc != "ARCHITECTURE.md" and OUTSIDE.search(text):
            problems.append(
                f"{doc}: points outside the repository ({OUTSIDE.search(text)[0]})"
            )
        for path, symbol in REF.findall(text):
            matches = [f for f in files if f == path] or [
                f for f in files if f.endswith("/" + path)
            ]
            if not matches:
                problems.append(f"{doc}: `{path}` does not exist")
                continue
            if len(matches) > 1:
                problems.append(f"{doc}: `{path}` is ambiguous ({', '.join(matches)})")
                continue
            if symbol and not defines((ROOT / matches[0]).read_text(), symbol):
                problems.append(
                    f"{doc}: `{path}::{symbol}` is not defined in {matches[0]}"
                )
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} stale reference(s)")
        return 1
    print("docs: every named file and symbol exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
