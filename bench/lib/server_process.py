"""A `deltalite serve` process for the bench scripts: started on an ephemeral loopback
port with a temporary data root, its RSS read from /proc, stopped with SIGTERM.

Scripts import it with `sys.path.insert(0, <repo>/bench/lib)`.
"""

import subprocess
from pathlib import Path


class ServerProcess:
    def __init__(
        self,
        binary: str,
        work: Path,
        user: tuple[str, str],
        extra_args: list[str] | None = None,
    ):
        self.log_path = work / "server.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [
                binary,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data",
                str(work / "lake"),
                "--users",
                f"{user[0]}:{user[1]}",
                "--catalogs",
                "lakehouse",
                *(extra_args or []),
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("listening on "):
            raise SystemExit(f"server did not start: {line!r}")
        self.base = line.removeprefix("listening on ")
        host, port = self.base.removeprefix("http://").split(":")
        self.addr = (host, int(port))

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

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
