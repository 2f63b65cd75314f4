"""soak.py, but the server is stopped with SIGKILL instead of SIGTERM: nothing is freed
on shutdown, so heaptrack's "leaked" is the heap that was live at the end of the run.

Usage: DELTALITE_BIN=target/release/deltalite .venv/bin/python \
           correctness/soak/heaptrack/soak_live_heap.py --bin correctness/soak/heaptrack/serve.sh \
           --seconds 150
       heaptrack_print -f /tmp/heaptrack/heaptrack.<pid>.zst --print-leaks 1 \
           -F leaked.fg --flamegraph-cost-type leaked
"""

import os
import runpy
import signal
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SOAK.parents[1] / "harness"))
import server_process


def kill(self: server_process.ServerProcess) -> None:
    os.kill(self.proc.pid, signal.SIGKILL)
    self.proc.wait()
    self._log.close()


server_process.ServerProcess.stop = kill
sys.argv = [str(SOAK / "soak.py"), *sys.argv[1:]]
runpy.run_path(str(SOAK / "soak.py"), run_name="__main__")
