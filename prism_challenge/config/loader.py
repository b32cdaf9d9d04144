"""Load `Settings` from a YAML file plus `PRISM_...` environment overrides.

Every failure is a `ConfigError` whose message names the file, the key and the reason, so
an operator can fix a typo without reading a traceback.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError
from pydantic_settings import SettingsError

from prism_challenge.config.settings import Settings


class ConfigError(ValueError):
    """The configuration cannot be used; the message says which key and why."""


def _describe(error: dict) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key (not a PRISM setting; see config.example.yaml)"
    return f"{key}: {error['msg']}"


def load_settings(path: Path | str | None = None) -> Settings:
    """Read `path` (optional) and the environment into a validated `Settings`."""
    source = "defaults"
    document: dict = {}
    if path is not None:
        path = Path(path)
        source = str(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        document = _read_yaml(path)
    try:
        return Settings(**document)
    except ValidationError as exc:
        reasons = "; ".join(_describe(e) for e in exc.errors())
        raise ConfigError(f"{source}: {reasons}") from None
    except SettingsError as exc:  # a PRISM_<SECTION> variable that is not valid JSON
        raise ConfigError(
            f"environment: {exc} (a whole-section PRISM_<SECTION> variable must be a JSON "
            "object; set one key with PRISM_<SECTION>__<KEY>)"
        ) from None


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
