"""Azurite, Microsoft's Azure Blob Storage emulator (npm `azurite`, pinned in
tests/emulators/package-lock.json; `scripts/lib/emulators.sh` installs it), on a free
loopback port with its data in a temporary directory. Standard library only.

object_store reaches it in emulator mode (`AZURE_STORAGE_USE_EMULATOR=true`, the
well-known account and key), at the address in `AZURITE_BLOB_STORAGE_URL`: set `env()` in
the environment of whatever opens an `az://` URI (a server process, or this process
before the Python package opens a table).

What Azurite does not enforce, and what that means: see the server README's "Deploy"
section (conditional writes are enforced, so concurrent commits race as on Azure).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[1]
BINARY = REPO / "tests" / "emulators" / "node_modules" / ".bin" / "azurite-blob"

ACCOUNT = "devstoreaccount1"
# Azurite's documented development key (public; it opens nothing but the emulator).
KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
    "K1SZFPTOtr/KBHBeksoGMGw=="
)


class Azurite:
    """A running Azurite blob service."""

    def __init__(self) -> None:
        if not BINARY.exists():
            raise FileNotFoundError(
                f"{BINARY} is missing: run `npm ci --prefix tests/emulators` "
                "(scripts/lib/emulators.sh does)"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._dir = tempfile.mkdtemp(prefix="azurite-")
        self.proc = subprocess.Popen(
            [
                str(BINARY),
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                str(self.port),
                "--location",
                self._dir,
                "--skipApiVersionCheck",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        for line in self.proc.stdout:
            if "successfully listens" in line:
                break
            if time.monotonic() > deadline:
                break
        else:
            raise RuntimeError(f"azurite exited ({self.proc.wait()})")
        self.url = f"http://127.0.0.1:{self.port}"
        self.endpoint = f"{self.url}/{ACCOUNT}"

    def env(self) -> dict[str, str]:
        """Where object_store's emulator mode finds this instance."""
        return {"AZURITE_BLOB_STORAGE_URL": self.url}

    @staticmethod
    def storage_options() -> dict[str, str]:
        """delta-rs / object_store options for the emulator's account."""
        return {
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
        }

    def connection_string(self) -> str:
        """For the azure-storage-blob SDK (containers are made with it)."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
