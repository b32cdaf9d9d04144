"""`prism eval`: score a bundle locally with the configured budget, as a validator would.

Exit status: 0 the run is eligible, 1 the bundle is refused or its score is not eligible
(with --compare: this bundle's, whatever the reference's),
2 usage, config or data errors.
With --no-replay (no replay runs, the reference's included): 0 when the record is eligible,
although nothing verified it (the report says NOT VERIFIED and names the command that
verifies it), 1 as above.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from prism_challenge.cli.check_cmd import BundleArg, DataRootOption, load_bundle, local_run_errors
from prism_challenge.cli.common import ConfigOption, fail, settings_from
from prism_challenge.sandbox.progress import MAX_INTERVAL_S


def evaluate(
    bundle_dir: BundleArg,
    data_root: DataRootOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Folder for record.json (its per-step columns in "
                     "steps.npz), score.json and learning_curve.png (default: "
                     "prism-data/eval/<digest prefix>)."),
    ] = None,
    progress_every: Annotated[
        float,
        typer.Option("--progress-every", help="Off a terminal: seconds between progress "
                     f"lines (at most {MAX_INTERVAL_S:g}); on one, a live bar."),
    ] = MAX_INTERVAL_S,
    compare: Annotated[
        Path | None,
        typer.Option("--compare", help="A reference to print side by side with the "
                     "differences and their uncertainty: a bundle folder (evaluated here "
                     "too, e.g. examples/baseline) or the --out folder of an earlier eval."),
    ] = None,
    no_replay: Annotated[
        bool,
        typer.Option("--no-replay", help="Skip the replay that verifies the run (about half "
                     "the time): the score of an eligible record, marked NOT VERIFIED; exit "
                     "0 when the record is eligible. Also skips the --compare bundle's."),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Train and score a bundle locally (full budget, real sandbox); writes a learning curve."""
    from prism_challenge.miner import StaticRefusal, evaluate_bundle
    from prism_challenge.miner.compare import Side, is_stored_run, load_stored, print_comparison
    from prism_challenge.miner.progress import EvalProgress
    from prism_challenge.miner.render import findings_table, print_eval

    if not 0 < progress_every <= MAX_INTERVAL_S:
        fail(f"--progress-every must be more than 0 and at most {MAX_INTERVAL_S:g} seconds, "
             f"not {progress_every:g}")
    settings = settings_from(config)
    console = Console(soft_wrap=True)
    bundle = load_bundle(bundle_dir, console)
    root = data_root or settings.data.root
    out_dir = out or Path("prism-data") / "eval" / bundle.digest[:12]
    stored = reference = None
    if compare is not None:  # refused before anything runs
        if is_stored_run(compare):
            try:
                stored = load_stored(compare)
            except ValueError as exc:
                fail(str(exc))
        else:
            reference = load_bundle(compare, console)
    progress = EvalProgress(sys.stderr, live=sys.stderr.isatty(), interval_s=progress_every)
    try:
        with local_run_errors(root), progress:
            report = evaluate_bundle(bundle, settings, root, out_dir,
                                     on_event=progress.on_event,
                                     on_progress=progress.on_progress, skip_replay=no_replay)
            if reference is not None:
                progress.on_event(f"the reference {compare}: starting")
                ref_out = (out_dir / "reference" if out else
                           Path("prism-data") / "eval" / reference.digest[:12])
                ref = evaluate_bundle(reference, settings, root, ref_out,
                                      on_event=progress.on_event,
                                      on_progress=progress.on_progress, skip_replay=no_replay)
                stored = Side(f"{ref.bundle.meta.name or compare} (reference)", ref.record,
                              ref.score, ref.eligible, verified=not ref.replay_skipped)
    except StaticRefusal as exc:
        console.print(findings_table("refused by the static gates (not run)", exc.findings))
        raise typer.Exit(1) from None
    print_eval(console, report)
    if stored is not None:
        mine = Side(report.bundle.meta.name or report.bundle.digest[:12], report.record,
                    report.score, report.eligible, verified=not report.replay_skipped)
        print_comparison(console, mine, stored)
    if report.replay_skipped:  # an eligible record, not verified: exit 0, said plainly
        again = ["prism", "eval", str(bundle_dir)]
        again += ["--config", str(config)] if config is not None else []
        again += ["--data-root", str(data_root)] if data_root is not None else []
        again += ["--out", str(out)] if out is not None else []
        console.print("to verify it, run it again without --no-replay (no command replays a "
                      f"stored run, so it trains again before the replay): {shlex.join(again)}",
                      highlight=False, markup=False)
    elif not report.eligible:
        raise typer.Exit(1)
