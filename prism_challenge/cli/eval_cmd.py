"""`prism eval`: score a bundle locally with the configured budget, as a validator would.

Exit status: 0 the run is eligible, 1 the bundle is refused or its score is not eligible,
2 usage, config or data errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from prism_challenge.cli.check_cmd import BundleArg, DataRootOption, load_bundle, local_run_errors
from prism_challenge.cli.common import ConfigOption, settings_from


def evaluate(
    bundle_dir: BundleArg,
    data_root: DataRootOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Folder for record.json (its per-step columns in "
                     "steps.npz), score.json and learning_curve.png (default: "
                     "prism-data/eval/<digest prefix>)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Train and score a bundle locally (full budget, real sandbox); writes a learning curve."""
    from prism_challenge.miner import StaticRefusal, evaluate_bundle
    from prism_challenge.miner.render import findings_table, print_eval

    settings = settings_from(config)
    console = Console(soft_wrap=True)
    bundle = load_bundle(bundle_dir, console)
    root = data_root or settings.data.root
    out_dir = out or Path("prism-data") / "eval" / bundle.digest[:12]
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("rows"), TimeElapsedColumn(), console=Console(stderr=True),
                        transient=False)
    task = progress.add_task("starting", total=None)

    def on_event(message: str) -> None:
        progress.update(task, description=message)

    def on_progress(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    try:
        with local_run_errors(root), progress:
            report = evaluate_bundle(bundle, settings, root, out_dir, on_event=on_event,
                                     on_progress=on_progress)
    except StaticRefusal as exc:
        console.print(findings_table("refused by the static gates (not run)", exc.findings))
        raise typer.Exit(1) from None
    print_eval(console, report)
    if not report.eligible:
        raise typer.Exit(1)
