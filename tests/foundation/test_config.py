from pathlib import Path

import pytest
import yaml

from prism_challenge.config import ConfigError, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_example_config_loads_and_equals_defaults():
    loaded = load_settings(ROOT / "config.example.yaml")
    assert loaded == Settings()


def _leaf_keys(model, prefix=""):
    for name in type(model).model_fields:
        value = getattr(model, name)
        if hasattr(type(value), "model_fields"):
            yield from _leaf_keys(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def test_example_config_documents_every_key():
    doc = yaml.safe_load((ROOT / "config.example.yaml").read_text())
    missing = []
    for key in _leaf_keys(Settings()):
        node = doc
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(key)
                break
            node = node[part]
    assert missing == []


def test_good_file_overrides_defaults(tmp_path):
    path = _write(tmp_path, "sandbox:\n  backend: docker\nchallenge:\n  seq_len: 256\n")
    s = load_settings(path)
    assert s.sandbox.backend == "docker"
    assert s.challenge.seq_len == 256
    assert s.challenge.token_budget == Settings().challenge.token_budget


def test_environment_overrides_file(tmp_path, monkeypatch):
    path = _write(tmp_path, "challenge:\n  seq_len: 256\n")
    monkeypatch.setenv("PRISM_CHALLENGE__SEQ_LEN", "512")
    monkeypatch.setenv("PRISM_MODE", "production")
    monkeypatch.setenv("PRISM_CHAIN__MODE", "online")  # production refuses the local ledger
    s = load_settings(path)
    assert s.challenge.seq_len == 512
    assert s.mode == "production"


@pytest.mark.parametrize(
    "text, needle",
    [
        ("sandbox:\n  bakend: docker\n", "sandbox.bakend: unknown key"),
        ("colour: blue\n", "colour: unknown key"),
        ("challenge:\n  seq_len: many\n", "challenge.seq_len: Input should be a valid integer"),
        ("challenge:\n  seq_len: 2\n", "challenge.seq_len: Input should be greater than or equal"),
        ("sandbox:\n  backend: chroot\n", "sandbox.backend: Input should be 'bubblewrap'"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("sandbox: [\n", "not valid YAML"),
        ("mode: production\nsandbox:\n  backend: none\n", "refused when mode is 'production'"),
    ],
)
def test_bad_file_names_key_and_reason(tmp_path, text, needle):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.yaml")


def test_bad_environment_value_names_key(monkeypatch):
    monkeypatch.setenv("PRISM_INTAKE__PORT", "not-a-port")
    with pytest.raises(ConfigError, match="intake.port"):
        load_settings()
