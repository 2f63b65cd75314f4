"""Host side of the Flight SQL suites: start a real `deltalite serve`
(harness/server_process.py) with its Flight SQL endpoint, then run inside the CPython
3.13 root (`py313_run`, scripts/lib/py313.sh), against it:

1. our client tests (tests/flight: ADBC and altertable-flightsql's public API);
2. the tests altertable-flightsql 0.4.1 ships in its sdist, unchanged, with our
   tests/flight/conftest.py as their `tests/conftest.py` (the sdist has none);
3. dbt-altertable on our dbt project (tests/dbt/run_dbt.py), with DBT_VENV's python;
4. dbt's adapter conformance suite (`dbt-tests-adapter`, tests/dbt/adapter) through
   dbt-altertable, with DBT_VENV's python, against a server of its own whose one catalog
   is `dbt` (the database name dbt's suites write into the SQL they expect).

    python3 tests/flight/serve_and_run.py PY313_ROOT VENV SDIST_DIR DBT_VENV [pytest args]

SDIST_DIR is the unpacked sdist, a path inside the root. The server address and the
user reach the tests as `ALTERTABLE_HOST`/`ALTERTABLE_PORT`/`ALTERTABLE_USERNAME`/
`ALTERTABLE_PASSWORD`, the variables the upstream conftest reads; the server's data
root (kept inside the root) as `DELTALITE_DATA_ROOT`, a path inside the root. Both runs happen
even when an earlier one fails; the exit status is the first failure's. Standard library
only (the host's python3 is enough).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "harness"))
from server_process import ServerProcess, server_binary

# 23 bytes of "user:password": base64 needs padding, so the padded (pyarrow) and the
# unpadded (ADBC's Go driver) forms of Basic both reach the server.
USER = ("altertable-test", "lk_test")


def notable(log: str) -> list[str]:
    """The server log's warnings and errors (it logs every request at INFO)."""
    return [line for line in log.splitlines() if " WARN " in line or " ERROR " in line]


def in_root(root: str, server: ServerProcess, cwd: str, args: list[str]) -> int:
    """Run `args` in the root, in `cwd`, with the server's address and user."""
    host, port = server.flight_addr or ("", 0)
    # The data root lies inside the root (see main), so tests can check what is on disk.
    data = "/" + str(Path(server.data).resolve().relative_to(Path(root).resolve()))
    command = [
        "bash",
        "-c",
        'source "$0" && py313_run "$@"',
        str(REPO / "scripts" / "lib" / "py313.sh"),
        root,
        "env",
        f"ALTERTABLE_HOST={host}",
        f"ALTERTABLE_PORT={port}",
        f"ALTERTABLE_USERNAME={USER[0]}",
        f"ALTERTABLE_PASSWORD={USER[1]}",
        "ALTERTABLE_TLS=false",
        f"DELTALITE_DATA_ROOT={data}",
        # py313_run starts in the shared folder; the sdist lives elsewhere in the root.
        "sh",
        "-c",
        'cd "$0" && exec "$@"',
        cwd,
        *args,
    ]
    return subprocess.run(command, check=False).returncode


def pytest_in_root(
    root: str, venv: str, server: ServerProcess, cwd: str, args: list[str]
) -> int:
    pytest = [f"{venv}/bin/python", "-m", "pytest", "-p", "no:cacheprovider", "-rA"]
    return in_root(root, server, cwd, [*pytest, *args])


def server(tmp: str, name: str, catalog: str) -> ServerProcess:
    """A server of this run, its data and log under `tmp`."""
    return ServerProcess(
        binary=server_binary(),
        data=Path(tmp) / f"lake-{name}",
        log=Path(tmp) / f"server-{name}.log",
        users=(USER,),
        catalogs=(catalog,),
    )


def report(server: ServerProcess, tmp: str) -> None:
    """After a failure: the server's warnings and errors, and where its files stay."""
    lines = notable(server.log_text())
    if lines:
        print("server warnings and errors:", *lines[-50:], sep="\n")
    print(f"server data and log kept in {tmp}")


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    root, venv, sdist, dbt_venv, *pytest_args = argv
    # Inside the root's /tmp: the tests there see the server's data root.
    tmp = tempfile.mkdtemp(prefix="deltalite-flight-", dir=f"{root}/tmp")
    keep = False
    try:
        with server(tmp, "clients", "lakehouse") as clients:
            print(
                f"deltalite serve at {clients.base}, flight {clients.flight} (pid {clients.pid})",
                flush=True,
            )
            ours = pytest_in_root(
                root, venv, clients, str(REPO), ["-q", "tests/flight", *pytest_args]
            )
            print("== altertable-flightsql 0.4.1 sdist tests, unchanged", flush=True)
            theirs = pytest_in_root(root, venv, clients, sdist, ["tests", *pytest_args])
            print("== dbt-altertable 0.2.13 on tests/dbt/project", flush=True)
            dbt = in_root(
                root,
                clients,
                str(REPO),
                [f"{dbt_venv}/bin/python", "tests/dbt/run_dbt.py"],
            )
            status = ours or theirs or dbt
            if status:
                keep = True
                report(clients, tmp)
        with server(tmp, "dbt-adapter", "dbt") as conformance:
            print("== dbt-tests-adapter through dbt-altertable 0.2.13", flush=True)
            adapter = pytest_in_root(
                root,
                dbt_venv,
                conformance,
                str(REPO / "tests" / "dbt" / "adapter"),
                ["-q", *pytest_args],
            )
            if adapter:
                keep = True
                report(conformance, tmp)
            return status or adapter
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
