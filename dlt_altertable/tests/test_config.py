"""Configuration sources: explicit args, DESTINATION__ALTERTABLE__* env, secrets.toml,
ALTERTABLE_* fallback, named destinations, and missing credentials."""

import os
import subprocess
import sys
import textwrap
import uuid

import dlt
import pytest
from conftest import fq
from dlt.pipeline.exceptions import PipelineStepFailed

from dlt_altertable import AltertableConfigurationError, altertable


def _count(server, dataset, table="cfg"):
    return server.query(f"SELECT count(*) AS n FROM {fq(server, dataset, table)}")[0]["n"]


def _pipeline(tmp_path, destination):
    return dlt.pipeline(
        pipeline_name="cfg_" + uuid.uuid4().hex[:8],
        pipelines_dir=str(tmp_path / "pl"),
        destination=destination,
    )


def _env(monkeypatch, prefix, server, dataset, password=None):
    values = {
        "HOST": server.host,
        "PORT": str(server.port),
        "TLS": "false",
        "USERNAME": server.user,
        "PASSWORD": password or server.password,
        "CATALOG": server.catalog,
    }
    for key, value in values.items():
        monkeypatch.setenv(prefix + key, value)
    if prefix == "ALTERTABLE_":
        monkeypatch.setenv("ALTERTABLE_SCHEMA", dataset)
    else:
        monkeypatch.setenv(prefix + "DATASET_NAME", dataset)


def test_destination_env_vars(server, dataset, tmp_path, monkeypatch):
    _env(monkeypatch, "DESTINATION__ALTERTABLE__", server, dataset)
    _pipeline(tmp_path, altertable).run([{"id": 1}], table_name="cfg")
    assert _count(server, dataset) == 1


def test_fallback_altertable_env_vars(server, dataset, tmp_path, monkeypatch):
    _env(monkeypatch, "ALTERTABLE_", server, dataset)
    _pipeline(tmp_path, altertable()).run([{"id": 1}], table_name="cfg")
    assert _count(server, dataset) == 1


def test_destination_env_overrides_fallback(server, dataset, tmp_path, monkeypatch):
    _env(monkeypatch, "ALTERTABLE_", server, dataset, password="wrong")
    monkeypatch.setenv("DESTINATION__ALTERTABLE__PASSWORD", server.password)
    _pipeline(tmp_path, altertable()).run([{"id": 1}], table_name="cfg")
    assert _count(server, dataset) == 1


def test_explicit_args_override_env(server, dataset, tmp_path, monkeypatch):
    _env(monkeypatch, "DESTINATION__ALTERTABLE__", server, dataset, password="wrong")
    dest = altertable(password=server.password)
    _pipeline(tmp_path, dest).run([{"id": 1}], table_name="cfg")
    assert _count(server, dataset) == 1


def test_named_destination(server, dataset, tmp_path, monkeypatch):
    _env(monkeypatch, "DESTINATION__ALTERTABLE_STAGING__", server, dataset)
    dest = altertable(destination_name="altertable_staging")
    _pipeline(tmp_path, dest).run([{"id": 1}], table_name="cfg")
    assert _count(server, dataset) == 1


def test_secrets_toml_and_named_section(server, dataset, tmp_path):
    """Run the seed's example as written in a project dir with .dlt/secrets.toml."""
    project = tmp_path / "project"
    (project / ".dlt").mkdir(parents=True)
    (project / ".dlt" / "secrets.toml").write_text(
        textwrap.dedent(
            f"""
            [destination.altertable]
            host = "{server.host}"
            port = {server.port}
            tls = false
            catalog = "{server.catalog}"
            dataset_name = "{dataset}"
            username = "{server.user}"
            password = "{server.password}"

            [destination.altertable_staging]
            host = "{server.host}"
            port = {server.port}
            tls = false
            catalog = "{server.catalog}"
            dataset_name = "{dataset}_staging"
            username = "{server.user}"
            password = "{server.password}"
            """
        )
    )
    script = textwrap.dedent(
        """
        import dlt
        from dlt_altertable import altertable


        @dlt.resource(
            name="contacts",
            write_disposition="merge",
            primary_key="id",
            columns={"lastmodifieddate": {"dedup_sort": "desc"}},
        )
        def contacts():
            yield [
                {"id": 1, "email": "ada@example.com", "lastmodifieddate": 100},
                {"id": 2, "email": "grace@example.com", "lastmodifieddate": 100},
            ]


        pipeline = dlt.pipeline(pipeline_name="crm", destination=altertable)
        pipeline.run(contacts())
        staging = dlt.pipeline(
            pipeline_name="crm_staging",
            destination=altertable(destination_name="altertable_staging"),
        )
        staging.run(contacts())
        """
    )
    (project / "crm.py").write_text(script)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ALTERTABLE_", "DESTINATION__"))
    }
    env["DLT_DATA_DIR"] = str(tmp_path / "dltdata")
    result = subprocess.run(
        [sys.executable, "crm.py"], cwd=project, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert _count(server, dataset, "contacts") == 2
    assert _count(server, dataset + "_staging", "contacts") == 2


def test_missing_credentials_fail_before_any_request(server, dataset, tmp_path, proxy):
    dest = altertable(host=server.host, port=proxy.port, tls=False, catalog=server.catalog)
    p = _pipeline(tmp_path, dest)
    with pytest.raises(PipelineStepFailed) as exc:
        p.run([{"id": 1}], table_name="cfg")
    cause = exc.value.exception
    assert isinstance(cause, AltertableConfigurationError)
    message = str(cause)
    for needle in (
        "dataset_name",
        "username",
        "password",
        "DESTINATION__ALTERTABLE__USERNAME",
        "DESTINATION__ALTERTABLE__PASSWORD",
        "[destination.altertable]",
        "secrets.toml",
        "ALTERTABLE_USERNAME",
        "ALTERTABLE_PASSWORD",
        "ALTERTABLE_SCHEMA",
        "altertable(",
    ):
        assert needle in message, needle
    assert proxy.log == []


def test_missing_credentials_named_destination_message():
    dest = altertable(destination_name="altertable_prod")
    with pytest.raises(AltertableConfigurationError) as exc:
        dest.configuration(None)
    assert "[destination.altertable_prod]" in str(exc.value)
    assert "DESTINATION__ALTERTABLE_PROD__HOST" in str(exc.value)
