"""The one way Python code starts a real `deltalite serve` process: pytest suites (the
package's and the dlt destination's), the benchmarks and the correctness runs.

The server listens on ephemeral loopback ports, HTTP and Arrow Flight SQL (it prints both
bound addresses first, so nothing polls), keeps its log in a file, and stops with SIGTERM. Standard library only, so
that every virtualenv of the project can import it:
`sys.path.insert(0, str(<repo> / "harness"))`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[1]


def server_binary() -> str:
    """`$DELTALITE_BIN`, else the workspace's debug build."""
    binary = os.environ.get("DELTALITE_BIN") or str(
        REPO / "target" / "debug" / "deltalite"
    )
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(
            f"server binary {binary} not found: build it (cargo build -p deltalite-cli) "
            "or point DELTALITE_BIN at it"
        )
    return binary


class ServerProcess:
    """A running `deltalite serve`.

    `users` are (name, password) pairs; `grants` maps a user to its catalogs (users without
    an entry see every catalog); `data` defaults to a fresh temporary directory;
    `storage_options` become `--storage-option` flags; `args` are appended as they are.
    The Flight SQL endpoint gets an ephemeral port too unless `args` sets
    `--flight-listen` itself (`--flight-listen=` turns it off); `flight` is then
    `grpc://HOST:PORT` (None when off) and `flight_addr` its (host, port). Background
    maintenance is off unless `args` sets `--maintenance` (or another `--maintenance-*`).
    The process gets the caller's environment without `DELTALITE_*` variables (so the
    caller's settings cannot leak in), plus `env`.
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        data: str | Path | None = None,
        users: tuple[tuple[str, str], ...] = (("alice", "secret"),),
        catalogs: tuple[str, ...] = ("lakehouse",),
        grants: dict[str, list[str]] | None = None,
        storage_options: dict[str, str] | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        log: str | Path | None = None,
    ):
        self._tmp = None
        if data is None:
            self._tmp = tempfile.mkdtemp(prefix="deltalite-serve-")
            data = Path(self._tmp) / "lake"
        self.data = str(data)
        self.log_path = (
            Path(log)
            if log
            else Path(self._tmp or tempfile.gettempdir())
            / (f"deltalite-serve-{os.getpid()}-{id(self)}.log")
        )
        command = [
            binary or server_binary(),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data",
            self.data,
            "--users",
            ",".join(f"{u}:{p}" for u, p in users),
            "--catalogs",
            ",".join(catalogs),
        ]
        if grants:
            command += [
                "--grants",
                ",".join(f"{u}={'+'.join(c)}" for u, c in grants.items()),
            ]
        command += [
            f"--storage-option={k}={v}" for k, v in (storage_options or {}).items()
        ]
        if not any(a.startswith("--flight-listen") for a in args or []):
            command += ["--flight-listen", "127.0.0.1:0"]
        # Background maintenance off unless asked for: its compaction commits would land
        # between a test's writes and its checks of versions and files.
        if not any(a.startswith("--maintenance") for a in args or []):
            command += ["--maintenance", "off"]
        command += list(args or [])
        environ = {
            k: v for k, v in os.environ.items() if not k.startswith("DELTALITE_")
        }
        environ.update(env or {})
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._log, env=environ, text=True
        )
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            self._log.close()
            raise RuntimeError(
                f"deltalite serve did not start ({line!r}):\n{self.log_path.read_text()[-3000:]}"
            )
        self.base = line.removeprefix("listening on ").strip()
        # `https://` when the server was given --tls-cert/--tls-key.
        host, port = self.base.split("://", 1)[1].split(":")
        self.addr = (host, int(port))
        # The second line, written with the first: the Flight SQL endpoint or "flight off".
        flight = self.proc.stdout.readline().strip()
        self.flight: str | None = None
        self.flight_addr: tuple[str, int] | None = None
        if flight.startswith("flight listening on "):
            self.flight = flight.removeprefix("flight listening on ")
            fhost, fport = self.flight.split("://", 1)[1].rsplit(":", 1)
            self.flight_addr = (fhost, int(fport))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MB; zeros once the process is gone."""
        rss = hwm = 0.0
        status = Path(f"/proc/{self.proc.pid}/status")
        if self.proc.poll() is not None or not status.exists():
            return rss, hwm
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
        return rss, hwm

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
