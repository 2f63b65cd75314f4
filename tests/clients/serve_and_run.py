"""Host side of tests/clients: start a real `deltalite serve` (harness/server_process.py),
and a second one over TLS with a self-signed certificate made here by `openssl`, run
pytest inside the CPython 3.13 root against them (`py313_run`, scripts/lib/py313.sh) with
the servers' URLs in `DELTALITE_URL` and `DELTALITE_TLS_URL` and the certificate (the
clients' CA file) in `DELTALITE_TLS_CA`, stop the servers, exit with pytest's status.

    python3 tests/clients/serve_and_run.py PY313_ROOT VENV [pytest args]

The server binary is `$DELTALITE_BIN` (else target/debug/deltalite); its data directory is
a fresh temporary one on the host, removed afterwards unless the run failed (then it keeps
the server's log, whose warnings and errors are printed). Standard library only (the host's
python3 is enough).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "harness"))
from certs import self_signed
from server_process import ServerProcess, server_binary


def notable(log: str) -> list[str]:
    """The server log's warnings and errors (it logs every request at INFO)."""
    return [line for line in log.splitlines() if " WARN " in line or " ERROR " in line]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, venv, *pytest_args = argv
    tmp = tempfile.mkdtemp(prefix="deltalite-clients-")
    # The certificate must be readable inside the root: under the shared repository.
    certs = Path(tempfile.mkdtemp(prefix="clients-tls-", dir=REPO / "target"))
    cert, key = self_signed(certs)
    keep = False  # after a failure the data and the server's log stay
    try:
        with (
            ServerProcess(
                binary=server_binary(),
                data=Path(tmp) / "lake",
                log=Path(tmp) / "server.log",
                users=(("alice", "secret"),),
                catalogs=("lakehouse",),
            ) as server,
            ServerProcess(
                binary=server_binary(),
                data=Path(tmp) / "lake-tls",
                log=Path(tmp) / "server-tls.log",
                users=(("alice", "secret"),),
                catalogs=("lakehouse",),
                args=["--tls-cert", str(cert), "--tls-key", str(key)],
            ) as tls_server,
        ):
            print(f"deltalite serve at {server.base} (pid {server.pid})", flush=True)
            print(
                f"deltalite serve at {tls_server.base} (pid {tls_server.pid})",
                flush=True,
            )
            command = [
                "bash",
                "-c",
                'source "$0" && py313_run "$@"',
                str(REPO / "scripts" / "lib" / "py313.sh"),
                root,
                "env",
                f"DELTALITE_URL={server.base}",
                f"DELTALITE_TLS_URL={tls_server.base}",
                f"DELTALITE_TLS_CA={cert}",
                f"{venv}/bin/python",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(REPO / "tests" / "clients"),
                *pytest_args,
            ]
            status = subprocess.run(command, check=False, cwd=REPO).returncode
            for s in (server, tls_server):
                if s.proc.poll() is not None:
                    print(f"deltalite serve exited early ({s.proc.returncode})")
                    status = status or 1
            if status != 0:
                keep = True
                for s in (server, tls_server):
                    print(
                        f"---- deltalite serve: warnings and errors (log: {s.log_path})"
                    )
                    print("\n".join(notable(s.log_text())[-50:]))
            return status
    finally:
        shutil.rmtree(certs, ignore_errors=True)
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
