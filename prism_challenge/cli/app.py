"""The `prism` command: one sub-command per thing a miner or an operator does.

Command modules import only the base package at load time; what a command needs from an
optional extra is imported when it runs, so `prism --help` works on a base install and a
missing extra is one line that names it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from prism_challenge import __version__
from prism_challenge.cli.check_cmd import check
from prism_challenge.cli.common import print_error
from prism_challenge.cli.config_cmd import config
from prism_challenge.cli.demo_cmd import demo
from prism_challenge.cli.eval_cmd import evaluate
from prism_challenge.cli.examples_cmd import examples
from prism_challenge.cli.prepare_data_cmd import prepare_data
from prism_challenge.cli.program_cmd import program, registry_app
from prism_challenge.cli.submit_cmd import submit
from prism_challenge.cli.validator_cmd import validator
from prism_challenge.cli.weights_cmd import weights
from prism_challenge.extras import MissingExtra, needs_extras

app = typer.Typer(
    name="prism",
    help="PRISM: measure a model's ability to learn from scratch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"prism {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """PRISM: measure a model's ability to learn from scratch."""


app.command("config")(config)
app.command("check")(check)
app.command("eval")(evaluate)
app.command("validator")(validator)
app.command("demo")(demo)
app.command("prepare-data")(prepare_data)
app.command("submit")(submit)
app.command("weights")(weights)
app.command("program")(program)
app.add_typer(registry_app, name="registry")
app.add_typer(examples, name="examples")


# The extra each command needs (pyproject.toml); a base install has the others.
COMMAND_EXTRAS = {"check": "miner", "eval": "miner", "submit": "miner", "prepare-data": "miner",
                  "validator": "validator", "demo": "validator", "weights": "validator",
                  "program": "validator", "registry": "validator"}


def main() -> None:
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    what = f"`prism {command}`" if command else "`prism`"
    try:
        with needs_extras(what, COMMAND_EXTRAS.get(command or "")):
            app()
    except MissingExtra as exc:
        print_error(str(exc))
        raise SystemExit(2) from None
