"""`prism demo`: the whole path on one machine (demo corpus, local validator, two miners)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prism_challenge.cli.common import ConfigOption, fail, settings_from
from prism_challenge.shared_files import example_path

DEFAULT_BUNDLES = ("baseline", "conv_mixer")  # shipped examples, found in or out of a clone


def demo(
    config: ConfigOption = None,
    bundle: Annotated[list[Path] | None, typer.Option(
        "--bundle", help="Bundle directory to submit (repeatable; default: the examples).")] = None,
    work: Annotated[Path, typer.Option(help="Working directory of the demo node.")] = Path(
        "prism-data/demo"),
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the scores.")] = 900.0,
) -> None:
    """Prepare the demo data, run a local validator, submit examples, print the results."""
    from prism_challenge.validator.demo import Demo, DemoError

    settings = settings_from(config)
    bundles = bundle or [example_path(name) for name in DEFAULT_BUNDLES]
    missing = [b for b in bundles if not b.is_dir()]
    if missing or not bundles:
        fail(f"bundle directory not found: {', '.join(map(str, missing)) or 'none given'}")
    console = Console()
    try:
        results = Demo(settings, work.resolve(), [b.resolve() for b in bundles], console,
                       timeout).run()
    except DemoError as exc:
        fail(str(exc), code=1)
    scored = sum(1 for v in results.values() if v["status"] == "scored")
    console.print(f"demo finished: {scored}/{len(results)} submissions scored")
    if scored != len(results):
        raise typer.Exit(1)
