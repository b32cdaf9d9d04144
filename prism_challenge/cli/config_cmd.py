"""`prism config`: validate a config file and print the effective settings."""

from __future__ import annotations

import yaml
from rich.console import Console

from prism_challenge.cli.common import ConfigOption, settings_from


def config(config: ConfigOption = None) -> None:
    """Validate the configuration and print the effective settings as YAML."""
    settings = settings_from(config)
    Console().print(
        yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False), highlight=False,
        markup=False,
    )
