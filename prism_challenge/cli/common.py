"""Pieces every CLI command shares: the --config option and clean error exits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from prism_challenge.config import ConfigError, Settings, load_settings

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        envvar="PRISM_CONFIG",
        help="YAML config file (see config.example.yaml); PRISM_* env vars override it.",
    ),
]


def print_error(message: str) -> None:
    """One error line on stderr, never wrapped (a log collector keeps it whole)."""
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}",
                                               highlight=False)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with `code`."""
    print_error(message)
    raise typer.Exit(code)


def settings_from(path: Path | None) -> Settings:
    try:
        return load_settings(path)
    except ConfigError as exc:
        fail(str(exc))
