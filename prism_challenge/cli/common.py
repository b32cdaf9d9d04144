"""Pieces every CLI command shares: the --config option, clean error exits, and printing
text that is not ours.

Text that comes from a user, a miner or a file (program.md, bundle names, refusal reasons,
error messages) is printed literally: through `plain` (a rich `Text`, never parsed as
markup) or `typer.echo`. A bundle named `[bold]x` or a message about a `[axes]` table shows
as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

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


def plain(text: object, style: str = "") -> Text:
    """`text` as rich prints it: literally, never as markup."""
    return Text(str(text), style=style)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with `code`."""
    Console(stderr=True, soft_wrap=True).print(
        Text.assemble(("error:", "bold red"), " ", str(message)), highlight=False)
    raise typer.Exit(code)


def settings_from(path: Path | None) -> Settings:
    try:
        return load_settings(path)
    except ConfigError as exc:
        fail(str(exc))
