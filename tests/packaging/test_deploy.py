"""The deployment files say what the code does: the compose file, the systemd unit, the image.

No container engine runs here, so these check the specs against the real CLI, the real
settings model and the real app routes: a renamed flag, key or route fails a test.
"""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from prism_challenge.api import ApiDeps
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.cli.app import app as cli
from prism_challenge.config.settings import Settings
from prism_challenge.validator.app import create_app

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _interpolate(value: str) -> str:
    """Compose's `${NAME:-default}` with nothing set: the default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def _assert_real_validator_command(argv: list[str]) -> None:
    assert argv[0] == "validator"
    usage = CliRunner().invoke(cli, ["validator", "--help"], env={"COLUMNS": "400"}).output
    for flag in (a for a in argv if a.startswith("--")):
        assert flag in usage, f"prism validator has no {flag}"
    fmt = argv[argv.index("--log-format") + 1]
    assert fmt == "json"  # a collector reads the logs, never a terminal


def test_compose_runs_the_validator_with_real_settings(monkeypatch, store):
    svc = COMPOSE["services"]["validator"]
    _assert_real_validator_command(svc["command"])
    for key, value in svc["environment"].items():
        monkeypatch.setenv(key, _interpolate(str(value)))
    settings = Settings()
    assert (settings.intake.host, settings.intake.port) == ("0.0.0.0", 8000)
    assert settings.storage.url == "sqlite:////srv/prism/prism.db"
    assert settings.wallet.path == "/srv/prism/wallets"
    assert svc["ports"] == [f"{settings.intake.port}:{settings.intake.port}"]
    # the run folders are mounted by sibling sandbox containers: same path inside and out
    assert "/srv/prism:/srv/prism" in svc["volumes"]

    probe = " ".join(svc["healthcheck"]["test"])
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\S+?)'", probe)
    assert int(url.group(1)) == settings.intake.port
    node = create_app(ApiDeps(settings=Settings(), store=store, metagraph=StaticMetagraph.of([])))
    with TestClient(node) as client:
        assert client.get(url.group(2)).status_code == 200


def test_compose_gives_the_validator_the_gpus_and_the_wallet_to_uid_65534():
    svc = COMPOSE["services"]["validator"]
    (gpus,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert gpus == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    image_user = re.search(r"^USER (\S+)", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    assert image_user == "65534:65534"
    text = (ROOT / "docker-compose.yml").read_text()
    assert "chown -R 65534:65534 /srv/prism/wallets" in text
    assert "chown -R 65534:65534 /srv/prism/wallets" in (ROOT / "docs/validators.md").read_text()


def test_compose_postgres_is_optional_and_healthy_before_the_validator():
    pg = COMPOSE["services"]["postgres"]
    assert pg["profiles"] == ["postgres"]
    assert "pg_isready" in pg["healthcheck"]["test"]
    dep = COMPOSE["services"]["validator"]["depends_on"]["postgres"]
    assert dep == {"condition": "service_healthy", "required": False}


def test_systemd_unit_runs_the_validator_and_stops_it_gently():
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    unit.read(ROOT / "deploy" / "prism-validator.service")
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/bin/prism")
    _assert_real_validator_command(argv[1:])
    assert service["KillSignal"] == "SIGTERM" and int(service["TimeoutStopSec"]) >= 60
    assert unit["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.parametrize("needed", ["requirements.lock", ".[validator,postgres]"])
def test_image_installs_the_locked_validator_stack(needed):
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert needed in dockerfile
    copies = re.findall(r"^COPY (\S+)", dockerfile, flags=re.M)
    install = dockerfile.index("pip install")
    # the package's share/ links resolve when it is installed
    for linked in ("data_manifests", "examples"):
        assert dockerfile.index(f"COPY {linked}") < install
    for src in copies:
        assert (ROOT / src).exists(), f"Dockerfile copies a missing {src}"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and not {"requirements.lock", "prism_challenge"} & set(ignored)
