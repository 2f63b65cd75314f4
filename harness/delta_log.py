"""Watch a local Delta table's `_delta_log` from outside the server: the latest version,
the number of active data files (adds minus removes), the checkpoints written and the
number of actions in the last one.

Reads each commit JSON once (incrementally), so sampling every few seconds stays cheap
while a soak commits thousands of versions. The bench scripts use it to put the server's
RSS next to the size of the table metadata it has to replay.
"""

import json
import re
from pathlib import Path

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


class DeltaLogWatcher:
    def __init__(self, table_dir: Path):
        self.log_dir = table_dir / "_delta_log"
        self.next_version = 0
        self.active: set[str] = set()
        self.checkpoints: set[int] = set()

    def poll(self) -> dict:
        """Read the commits written since the last poll; return the table's state."""
        if self.log_dir.is_dir():
            names = [p.name for p in self.log_dir.iterdir()]
            for name in names:
                m = _CHECKPOINT.match(name)
                if m:
                    self.checkpoints.add(int(m.group(1)))
            versions = sorted(
                int(m.group(1)) for m in map(_COMMIT.match, names) if m is not None
            )
            for v in versions:
                if v < self.next_version:
                    continue
                if v != self.next_version:
                    break  # a gap: the commit is being written; read it next time
                path = self.log_dir / f"{v:020d}.json"
                try:
                    lines = path.read_text().splitlines()
                except FileNotFoundError:
                    break
                for line in lines:
                    if not line.strip():
                        continue
                    action = json.loads(line)
                    if "add" in action:
                        self.active.add(action["add"]["path"])
                    elif "remove" in action:
                        self.active.discard(action["remove"]["path"])
                self.next_version = v + 1
        # The last checkpoint's action count: adds plus the remove tombstones it must keep
        # for `delta.deletedFileRetentionDuration` (a week by default), which every reader
        # of the table loads.
        checkpoint_actions = 0
        try:
            last = json.loads((self.log_dir / "_last_checkpoint").read_text())
            checkpoint_actions = int(last.get("size", 0))
        except (OSError, ValueError):
            pass
        return {
            "version": self.next_version - 1,
            "files": len(self.active),
            "checkpoints": len(self.checkpoints),
            "checkpoint_actions": checkpoint_actions,
        }


def deletion_vectors(table_dir: Path) -> list[int]:
    """Cardinalities of the active files' deletion vectors, ascending, by replaying the
    commit JSONs (a file is active as (path, vector): a commit that gives a file a new
    vector removes it with its old one and adds it with the new). The deltalake package
    does not show vectors; this reads the log itself, apart from every engine."""
    log_dir = Path(table_dir) / "_delta_log"
    versions = sorted(
        int(m.group(1))
        for m in map(_COMMIT.match, (p.name for p in log_dir.iterdir()))
        if m is not None
    )
    if versions != list(range(len(versions))):
        raise AssertionError(f"commits are missing from {log_dir}: {versions}")

    def key(action: dict) -> tuple[str, str]:
        dv = action.get("deletionVector") or {}
        return action[
            "path"
        ], f"{dv.get('storageType', '')}{dv.get('pathOrInlineDv', '')}"

    active: dict[tuple[str, str], int] = {}
    for v in versions:
        actions = [
            json.loads(line)
            for line in (log_dir / f"{v:020d}.json").read_text().splitlines()
            if line.strip()
        ]
        for a in actions:
            if "remove" in a:
                active.pop(key(a["remove"]), None)
        for a in actions:
            if "add" in a:
                dv = a["add"].get("deletionVector")
                active[key(a["add"])] = dv["cardinality"] if dv else 0
    return sorted(c for c in active.values() if c)
