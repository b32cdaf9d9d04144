"""Configuration: one validated settings object, loaded from YAML and the environment."""

from prism_challenge.config.loader import ConfigError, load_settings
from prism_challenge.config.settings import Settings

__all__ = ["ConfigError", "Settings", "load_settings"]
