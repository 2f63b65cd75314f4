#!/usr/bin/env python3
"""The engine's layering (ARCHITECTURE.md, "The engine"), checked on its sources.

Every file of crates/deltalite/src belongs to a layer (types, runtime, schema, table, io,
txn, ops: its top folder, or `types` for the files at the root); a `crate::…` path in it
may name its own layer or one below, never one above; and no two files reach each other
through `crate::` and `super::` paths (no import cycles). Prints each violation and
exits 1 when there is one. Standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "crates" / "deltalite" / "src"
LAYERS = ["types", "runtime", "schema", "table", "io", "txn", "ops"]
PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")


def module_of(file: Path) -> list[str]:
    parts = list(file.relative_to(SRC).with_suffix("").parts)
    return parts[:-1] if parts[-1] in ("mod", "lib") else parts


def file_of(module: list[str]) -> Path | None:
    """The file that defines the longest prefix of `module` (a path may go on into items)."""
    for n in range(len(module), 0, -1):
        for candidate in (SRC.joinpath(*module[:n]).with_suffix(".rs"),
                          SRC.joinpath(*module[:n], "mod.rs")):  # fmt: skip
            if candidate.exists():
                return candidate
    return None


def layer(file: Path) -> str:
    parts = file.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else "types"


def code(file: Path) -> str:
    """The file without comments and without its `#[cfg(test)]` module (tests may
    reach anywhere)."""
    text = re.sub(r"//.*", "", file.read_text())
    cut = text.find("#[cfg(test)]")
    return text if cut < 0 else text[:cut]


def main() -> int:
    files = [f for f in sorted(SRC.rglob("*.rs")) if f.name != "lib.rs"]
    edges: dict[Path, set[Path]] = {f: set() for f in files}
    problems = []
    for f in files:
        here = module_of(f)
        for root, rest in PATH.findall(code(f)):
            names = rest.strip(":").split("::")
            if root == "crate":
                target = names
            else:
                ups = 1 + len([n for n in names if n == "super"])
                names = [n for n in names if n != "super"]
                base = here if f.name != "mod.rs" else here + ["_"]
                target = base[: len(base) - ups] + names
            dest = file_of(target)
            if dest is None or dest == f or dest.name == "lib.rs":
                continue
            edges[f].add(dest)
            if LAYERS.index(layer(dest)) > LAYERS.index(layer(f)):
                problems.append(
                    f"{f.relative_to(SRC)} ({layer(f)}) imports upward: "
                    f"{dest.relative_to(SRC)} ({layer(dest)})"
                )
    # Cycles: Tarjan's strongly connected components over the file graph.
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on: set[Path] = set()

    def visit(v: Path) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                names = sorted(str(c.relative_to(SRC)) for c in component)
                problems.append("import cycle: " + " <-> ".join(names))

    sys.setrecursionlimit(10_000)
    for f in files:
        if f not in index:
            visit(f)
    for p in problems:
        print(p)
    print(f"engine layering: {len(files)} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
