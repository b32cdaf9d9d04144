"""Property tests of the configuration readers: the YAML file and the PRISM_* environment.

What must hold for any input: `load_settings` returns a valid, frozen `Settings` or raises
`ConfigError` naming where the problem is (never another exception: the CLI turns a
`ConfigError` into a one-line message, anything else into a traceback); what the environment
sets wins over the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest import mock

import yaml
from fuzz_kit import PROPERTY, budget
from hypothesis import example, given
from hypothesis import strategies as st

from prism_challenge.config import ConfigError, Settings, load_settings

SECTIONS = {name: sorted(type(getattr(Settings(), name)).model_fields)
            for name, field in Settings.model_fields.items() if name != "mode"}


def load_or_refuse(text: bytes | str | None, env: dict[str, str] | None = None):
    """`load_settings` on `text` (written to a file) under `env`: Settings or ConfigError."""
    with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, env or {}):
        path = None
        if text is not None:
            path = Path(tmp) / "config.yaml"
            path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8",
                                                                               "surrogatepass"))
        try:
            return load_settings(path)
        except ConfigError as exc:
            assert str(exc).strip()
            if path is not None and not env:
                assert str(exc).startswith(str(path)), exc
            return exc


_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                  st.sampled_from(["docker", "online", "production", "-1", "1e999"]))
_value = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


@st.composite
def documents(draw) -> dict:
    """Mostly real section and key names (so the validators run), with any values."""
    doc: dict = {}
    for section in draw(st.lists(st.sampled_from([*SECTIONS, "mode", "nope", 1]), max_size=4)):
        if section in SECTIONS and draw(st.booleans()):
            keys = st.one_of(st.sampled_from(SECTIONS[section]), st.text(max_size=6))
            doc[section] = draw(st.dictionaries(keys, _value, max_size=3))
        else:
            doc[section] = draw(_value)
    return doc


@budget(40)
@given(text=st.one_of(documents().map(yaml.safe_dump), st.text(max_size=200),
                      st.binary(max_size=100)))
@example(text="1: 2\n")  # once a TypeError (keywords must be strings)
@example(text="null: 2\n")
@example(text="a: " + "[" * 5000 + "]" * 5000 + "\n")  # once a RecursionError out of PyYAML
@example(text="chain: {netuid: " + "9" * 5000 + "}\n")  # once a ValueError (int digit limit)
@example(text="chain: !!python/object:os.system {}\n")
def test_any_config_file_is_settings_or_a_config_error(text):
    outcome = load_or_refuse(text)
    if isinstance(outcome, Settings):
        assert outcome.challenge.token_budget % outcome.challenge.seq_len == 0
        assert outcome.intake.max_body_bytes >= 1024


_env_name = st.one_of(
    st.sampled_from(sorted(SECTIONS)).flatmap(
        lambda s: st.sampled_from(SECTIONS[s]).map(lambda k: f"PRISM_{s}__{k}".upper())),
    st.sampled_from([f"PRISM_{s}".upper() for s in SECTIONS] + ["PRISM_MODE"]),
    st.from_regex(r"PRISM_[A-Z]{1,8}__[A-Z_]{1,8}", fullmatch=True),
)
_env_value = st.one_of(st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
                               max_size=20),
                       _value.map(lambda v: yaml.safe_dump(v, default_flow_style=True).strip()),
                       st.sampled_from(["[", "{", "{\"netuid\": 3}", "1e999", "-1", "null"]))


@PROPERTY
@given(env=st.dictionaries(_env_name, _env_value, max_size=4),
       file_netuid=st.integers(0, 100))
@example(env={"PRISM_SANDBOX__GPUS": "["}, file_netuid=1)  # once a bare SettingsError
@example(env={"PRISM_CHAIN": "notjson"}, file_netuid=1)
def test_any_environment_is_settings_or_a_config_error(env, file_netuid):
    outcome = load_or_refuse(f"chain:\n  netuid: {file_netuid}\n", env)
    if isinstance(outcome, Settings) and "PRISM_CHAIN__NETUID" in env:
        assert str(outcome.chain.netuid) == env["PRISM_CHAIN__NETUID"].strip()
    elif isinstance(outcome, Settings) and "PRISM_CHAIN" not in env:
        assert outcome.chain.netuid == file_netuid  # nothing overrode the file
