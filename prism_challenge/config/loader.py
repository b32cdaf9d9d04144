"""Load `Settings` from a YAML file plus `PRISM_...` environment overrides.

Every failure is a `ConfigError` whose message names the file or the environment variable,
the key and the reason, so an operator can fix a typo without reading a traceback. A
`PRISM_` variable that names no setting is refused (a misspelt override would otherwise be
ignored and the node would run on the value the operator meant to replace).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import ValidationError
from pydantic_settings import SettingsError

from prism_challenge.config.settings import Settings


class ConfigError(ValueError):
    """The configuration cannot be used; the message says which key and why."""


# PRISM_ variables that are not settings: the CLI's config path, what the validator sets
# inside a sandbox for the harness and the health probe, and docker-compose.yml's own
# substitutions. A variable that a `*_env` setting names (a secret's holder) is fine too.
NOT_SETTINGS = frozenset({"CONFIG", "SEED", "THREADS", "SCRATCH", "SOCKET", "INPUTS",
                          "SUBMISSION", "PROBE_CPUS", "PROBE_MINORS", "PROBE_MIN_FREE",
                          "STORAGE_URL", "PG_PASSWORD"})


def _setting_names() -> set[str]:
    """Every PRISM_ variable name that sets something: a top-level key, a whole section
    (PRISM_<SECTION>, JSON) and each key of a section (PRISM_<SECTION>__<KEY>)."""
    names = set()
    for field, info in Settings.model_fields.items():
        names.add(field.upper())
        section = info.annotation
        for key in getattr(section, "model_fields", {}):
            names.add(f"{field.upper()}__{key.upper()}")
    return names


def _secret_holders(document: Mapping, environ: Mapping[str, str]) -> set[str]:
    """The environment variables named as holders of a secret (`*_env` keys) by the
    defaults, the YAML document or an override."""
    names = set()
    for field, info in Settings.model_fields.items():
        section = info.annotation
        for key, spec in getattr(section, "model_fields", {}).items():
            if key.endswith("_env"):
                override = environ.get(f"PRISM_{field.upper()}__{key.upper()}")
                given = (document.get(field) or {}) if isinstance(document, Mapping) else {}
                given = given.get(key) if isinstance(given, Mapping) else None
                names |= {str(v).upper() for v in (spec.default, given, override) if v}
    return names


def unknown_variables(environ: Mapping[str, str], document: Mapping | None = None
                      ) -> list[str]:
    """The PRISM_ variables of `environ` that name no setting, each with its fix."""
    known = _setting_names()
    holders = _secret_holders(document or {}, environ)
    problems = []
    for var in sorted(environ):
        if not var.upper().startswith("PRISM_") or var.upper() in holders:
            continue
        name = var[len("PRISM_"):].upper()
        if name in NOT_SETTINGS or name in known or name.split("__")[0] in NOT_SETTINGS:
            continue
        head = "__".join(name.split("__")[:2])  # deeper keys of a mapping setting are fine
        if head in known and "__" in head:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        hint = f"did you mean PRISM_{close[0]}?" if close else \
            "see config.example.yaml for the settings"
        problems.append(f"{var} names no setting ({hint}); fix or unset it")
    return problems


def _describe(error: dict, environ: Mapping[str, str], source: str) -> str:
    loc = [str(part) for part in error["loc"]]
    key = ".".join(loc) or "(top level)"
    variable = "PRISM_" + "__".join(loc).upper()
    upper = {k.upper(): k for k in environ}
    if loc and variable in upper:  # the value came from the environment, not the file
        where = f"environment {upper[variable]}"
    elif loc and f"PRISM_{loc[0].upper()}" in upper:
        where = f"environment {upper['PRISM_' + loc[0].upper()]}"
    else:
        where = source
    if error["type"] == "extra_forbidden":
        return f"{where}: {key}: unknown key (not a PRISM setting; see config.example.yaml)"
    return f"{where}: {key}: {error['msg']}"


def load_settings(path: Path | str | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Read `path` (optional) and the environment into a validated `Settings`."""
    environ = os.environ if environ is None else environ
    source = "defaults"
    document: dict = {}
    if path is not None:
        path = Path(path)
        source = str(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        document = _read_yaml(path)
    unknown = unknown_variables(environ, document)
    if unknown:
        raise ConfigError("environment: " + "; ".join(unknown))
    try:
        settings = Settings(**document)
    except ValidationError as exc:
        raise ConfigError("; ".join(_describe(e, environ, source) for e in exc.errors())
                          ) from None
    except SettingsError as exc:  # a PRISM_<SECTION> variable that is not valid JSON
        raise ConfigError(
            f"environment: {exc} (a whole-section PRISM_<SECTION> variable must be a JSON "
            "object; set one key with PRISM_<SECTION>__<KEY>)"
        ) from None
    return settings


def _read_yaml(path: Path) -> dict:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except (RecursionError, ValueError) as exc:
        # PyYAML recurses per nesting level and builds ints of any length.
        raise ConfigError(f"{path}: cannot be read as YAML: {type(exc).__name__}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    odd = [key for key in loaded if not isinstance(key, str)]
    if odd:
        raise ConfigError(f"{path}: {odd[0]!r}: unknown key (section names are strings)")
    return loaded
