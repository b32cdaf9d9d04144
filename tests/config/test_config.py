import re
from pathlib import Path

import pytest
import yaml

from prism_challenge.agreement.sync import MAX_ROWS_PER_PEER
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


@pytest.mark.parametrize("variable, suggestion", [
    ("PRISM_CHALENGE__TOKEN_BUDGET", "PRISM_CHALLENGE__TOKEN_BUDGET"),
    ("PRISM_CHALLENGE__TOKEN_BUDGT", "PRISM_CHALLENGE__TOKEN_BUDGET"),
    ("PRISM_SCORING__NOTHING_LIKE_IT", None),
])
def test_a_misspelt_environment_override_is_refused_not_ignored(monkeypatch, variable,
                                                                 suggestion):
    monkeypatch.setenv(variable, "65536")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(f"environment: {variable} names no setting")
    assert "\n" not in message and "fix or unset it" in message
    if suggestion:
        assert f"did you mean {suggestion}?" in message
    else:
        assert "config.example.yaml" in message


def test_known_and_harness_variables_pass(monkeypatch):
    monkeypatch.setenv("PRISM_CHALLENGE__SEQ_LEN", "64")
    monkeypatch.setenv("PRISM_CONFIG", "unused.yaml")
    monkeypatch.setenv("PRISM_SEED", "3")
    monkeypatch.setenv("PRISM_INTAKE", '{"port": 9999}')
    settings = load_settings()
    assert (settings.challenge.seq_len, settings.intake.port) == (64, 9999)


def test_an_environment_error_names_the_variable_not_the_file(tmp_path, monkeypatch):
    config = tmp_path / "c.yaml"
    config.write_text("challenge:\n  seq_len: 64\n")
    monkeypatch.setenv("PRISM_INTAKE__PORT", "not-a-port")
    with pytest.raises(ConfigError, match=r"^environment PRISM_INTAKE__PORT: intake\.port: "):
        load_settings(config)
    monkeypatch.delenv("PRISM_INTAKE__PORT")
    config.write_text("challenge:\n  seq_len: -1\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(config))}: challenge\.seq_len"):
        load_settings(config)


def test_a_variable_named_as_a_secrets_holder_is_not_a_typo(tmp_path, monkeypatch):
    config = tmp_path / "c.yaml"
    config.write_text("llm:\n  api_key_env: PRISM_LLM_KEY\n")
    monkeypatch.setenv("PRISM_LLM_KEY", "secret")
    assert load_settings(config).llm.api_key_env == "PRISM_LLM_KEY"
    with pytest.raises(ConfigError, match="PRISM_LLM_KEY names no setting"):
        load_settings()


@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1:8000", "a loopback address the chain refuses (InvalidIpAddress)"),
    ("127.0.0.2:8000", "a loopback address, which only this host can reach"),
    ("[::1]:8000", "a loopback address the chain refuses (InvalidIpAddress)"),
    ("0.0.0.0:8000", "the unspecified address, which names no host a miner can reach"),
    ("[::]:8000", "the unspecified address, which names no host a miner can reach"),
    ("255.255.255.255:8000", "the broadcast address, which the chain refuses (InvalidIpAddress)"),
])
def test_an_online_serve_address_no_miner_can_reach_is_one_line_naming_the_fix(
        tmp_path, address, kind):
    path = _write(tmp_path, f"chain:\n  mode: online\n  network: finney\n"
                            f"  serve_address: '{address}'\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith(
        f"chain.serve_address {address} is {kind}: set it to this host's public IP address and "
        "the intake port (e.g. 203.0.113.7:8000), or leave it unset")


def test_a_chain_on_this_host_takes_another_loopback_address_but_never_127_0_0_1(tmp_path):
    local = "chain:\n  mode: online\n  network: local\n  serve_address: '{}'\n"
    assert load_settings(_write(tmp_path, local.format("127.0.0.2:8000")), environ={}
                         ).chain.serve_address == "127.0.0.2:8000"
    with pytest.raises(ConfigError) as info:
        load_settings(_write(tmp_path, local.format("127.0.0.1:8000")), environ={})
    assert str(info.value).endswith(
        "chain.serve_address 127.0.0.1:8000 is a loopback address the chain refuses "
        "(InvalidIpAddress): set it to this host's public IP address and the intake port "
        "(e.g. 203.0.113.7:8000), or with a chain on this host another loopback address such "
        "as 127.0.0.2:8000 (intake.host 127.0.0.2 or 0.0.0.0), or leave it unset")
    # the local ledger publishes where the node really listens; a public address passes
    assert Settings(chain={"serve_address": "127.0.0.1:8000"}).chain.mode == "local"
    assert Settings(chain={"mode": "online", "serve_address": "203.0.113.7:8000"})


def test_max_rows_per_peer_defaults_to_the_agreement_bound():
    assert Settings().agreement.max_rows_per_peer == MAX_ROWS_PER_PEER == 100_000


@pytest.mark.parametrize("value, reason", [
    ("0", "Input should be greater than or equal to 1"),
    ("-5", "Input should be greater than or equal to 1"),
    ("many", "Input should be a valid integer"),
    ("1.5", "Input should be a valid integer"),
    ("true", "Value error, agreement.max_rows_per_peer must be a positive integer, not True"),
])
def test_a_bad_max_rows_per_peer_is_one_line_naming_the_key(tmp_path, value, reason):
    path = _write(tmp_path, f"agreement:\n  max_rows_per_peer: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: agreement.max_rows_per_peer: {reason}")


def test_max_rows_per_peer_takes_a_positive_integer(tmp_path):
    path = _write(tmp_path, "agreement:\n  max_rows_per_peer: 250\n")
    assert load_settings(path).agreement.max_rows_per_peer == 250


def test_burn_uid_defaults_to_the_owner_not_whoever_holds_uid_0(tmp_path):
    assert Settings().weights.burn_uid == "owner"
    loaded = load_settings(_write(tmp_path, "weights:\n  dry_run: true\n"))
    assert loaded.weights.burn_uid == "owner"


def test_burn_uid_is_the_owner_or_a_uid_and_anything_else_is_one_line(tmp_path, monkeypatch):
    owner = _write(tmp_path, "weights:\n  burn_uid: owner\n")
    assert load_settings(owner).weights.burn_uid == "owner"
    assert load_settings(_write(tmp_path, "weights:\n  burn_uid: 4\n")).weights.burn_uid == 4
    monkeypatch.setenv("PRISM_WEIGHTS__BURN_UID", "uid0")
    with pytest.raises(ConfigError) as info:
        load_settings(owner)
    assert str(info.value) == (
        "environment PRISM_WEIGHTS__BURN_UID: weights.burn_uid: Value error, weights.burn_uid "
        "must be 'owner' or a uid (an integer >= 0), not 'uid0'")
