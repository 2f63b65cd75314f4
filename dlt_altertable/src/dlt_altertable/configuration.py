"""Configuration of the altertable destination.

Resolution order for every field (first wins): explicit `altertable(...)` arguments,
`DESTINATION__<NAME>__*` environment variables, `[destination.<name>]` in `.dlt/secrets.toml`
or `.dlt/config.toml`, then the `ALTERTABLE_*` environment variables as a fallback.
"""

import dataclasses
import os
from typing import Any, ClassVar, Final, Optional

from dlt.common.configuration import configspec
from dlt.common.destination.client import DestinationClientConfiguration
from dlt.common.typing import TSecretStrValue

from dlt_altertable.exceptions import AltertableConfigurationError

DEFAULT_NAME = "altertable"

# field -> fallback environment variable
FALLBACK_ENV: dict[str, str] = {
    "host": "ALTERTABLE_HOST",
    "port": "ALTERTABLE_PORT",
    "tls": "ALTERTABLE_TLS",
    "username": "ALTERTABLE_USERNAME",
    "password": "ALTERTABLE_PASSWORD",
    "catalog": "ALTERTABLE_CATALOG",
    "dataset_name": "ALTERTABLE_SCHEMA",
}
REQUIRED = ("host", "catalog", "dataset_name", "username", "password")


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", "y", "t"):
        return True
    if text in ("0", "false", "no", "off", "n", "f", ""):
        return False
    raise AltertableConfigurationError(f"altertable: cannot read `tls` value {value!r} as a bool")


@configspec
class AltertableClientConfiguration(DestinationClientConfiguration):
    destination_type: Final[str] = dataclasses.field(  # type: ignore[misc]
        default="altertable", init=False, repr=False, compare=False
    )
    host: Optional[str] = None
    """HTTP API host (no scheme), e.g. `api.altertable.ai` or `127.0.0.1`"""
    port: Optional[int] = None
    """HTTP API port, 443 by default"""
    tls: Optional[bool] = None
    """Use https, True by default"""
    catalog: Optional[str] = None
    dataset_name: Optional[str] = None
    """Target schema in the catalog (the pipeline's dataset_name is not used)"""
    username: Optional[str] = None
    password: Optional[TSecretStrValue] = None
    compute_size: Optional[str] = None
    """Sent with schema queries, "XS" by default"""
    connect_timeout: float = 10.0
    query_timeout: float = 300.0
    upload_timeout: float = 3600.0
    """Read timeout of /upload and /upsert: the server answers only after the commit."""
    retry_backoff: float = 1.0
    """dlt retries a failed job at once; a retried job first waits
    `retry_backoff * 2 ** (retry - 1)` seconds (capped at 30 s) or what `Retry-After` asked"""
    force_sql_merge: bool = False
    """Merge every merge table through the staged SQL path, also those the direct `/upsert`
    handles (which it does faster with the same result); for comparisons and tests."""

    __recommended_sections__: ClassVar = ("destination", DEFAULT_NAME)

    def on_resolved(self) -> None:
        self.apply_fallbacks()

    def apply_fallbacks(self) -> None:
        """Fill unset fields from the ALTERTABLE_* environment and apply defaults."""
        for field, env in FALLBACK_ENV.items():
            if getattr(self, field) in (None, "") and os.environ.get(env):
                setattr(self, field, os.environ[env])
        if self.port in (None, ""):
            self.port = 443
        try:
            self.port = int(self.port)
        except (TypeError, ValueError) as ex:
            raise AltertableConfigurationError(
                f"altertable: port must be an integer, got {self.port!r}"
            ) from ex
        self.tls = True if self.tls is None else _parse_bool(self.tls)
        if not self.compute_size:
            self.compute_size = "XS"
        if self.host:
            host = str(self.host).strip()
            for prefix in ("https://", "http://"):
                if host.startswith(prefix):
                    host = host[len(prefix) :]
            self.host = host.rstrip("/")

    def missing_fields(self) -> list[str]:
        return [f for f in REQUIRED if getattr(self, f) in (None, "")]

    def ensure_complete(self) -> None:
        """Raise a terminal configuration error naming every place a missing value can come
        from. Called before any request is made."""
        self.apply_fallbacks()
        missing = self.missing_fields()
        if not missing:
            return
        name = self.destination_name or DEFAULT_NAME
        up = name.upper()
        lines = [
            f"altertable destination `{name}` is missing required configuration: "
            + ", ".join(missing)
            + ". Provide each of them in one of these places:",
            "  - as arguments: altertable("
            + ", ".join(f"{f}=..." for f in missing)
            + f", destination_name={name!r})",
            "  - environment variables: "
            + ", ".join(f"DESTINATION__{up}__{f.upper()}" for f in missing),
            f"  - .dlt/secrets.toml (or .dlt/config.toml), section [destination.{name}]: "
            + ", ".join(f"{f} = ..." for f in missing),
            "  - fallback environment variables: " + ", ".join(FALLBACK_ENV[f] for f in missing),
        ]
        raise AltertableConfigurationError("\n".join(lines))

    @property
    def base_url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def data_location(self) -> Optional[str]:
        if not self.host or not self.catalog or not self.dataset_name:
            return None
        return f"{self.base_url}/{self.catalog}/{self.dataset_name}"

    def fingerprint(self) -> str:
        from dlt.common.utils import digest128

        return digest128(self.base_url) if self.host else ""

    def __str__(self) -> str:
        return f"{self.base_url}/{self.catalog}/{self.dataset_name}"
