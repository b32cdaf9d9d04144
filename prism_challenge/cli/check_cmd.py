"""`prism check`: a miner's pre-flight of a bundle (static gates + a sandboxed smoke run).

Exit status: 0 every check passed, 1 the bundle fails a check, 2 usage, config or data
errors (nothing about the bundle was decided).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.cli.common import ConfigOption, fail, plain, settings_from


@contextmanager
def local_run_errors(root: Path) -> Iterator[None]:
    """A local check/eval that cannot run says why and exits 2 (usage, config or data)."""
    from prism_challenge.data import DataIntegrityError
    from prism_challenge.miner import DataMismatch, DataRootMissing, LocalRunFailed
    from prism_challenge.sandbox.torch_support import UnsupportedTorch

    try:
        yield
    except UnsupportedTorch as exc:
        fail(str(exc))
    except DataRootMissing as exc:
        fail(str(exc))
    except DataIntegrityError as exc:
        fail(f"the data at {root} does not verify: {exc}")
    except DataMismatch as exc:
        fail(f"the configuration does not fit the data at {root}: {exc}")
    except LocalRunFailed as exc:
        fail(str(exc))

BundleArg = Annotated[
    Path, typer.Argument(help="Directory with architecture.py, training.py [, prism.toml].")
]
DataRootOption = Annotated[
    Path | None,
    typer.Option("--data-root", help="Prepared data root (default: data.root of the config)."),
]


def load_bundle(bundle_dir: Path, console: Console) -> Bundle:
    """The bundle, or exit 2 (no such folder) / 1 (the folder breaks the bundle rules)."""
    if bundle_dir.is_file():
        fail(f"{bundle_dir} is a file: give the bundle folder that holds architecture.py and "
             f"training.py ({bundle_dir.parent})")
    if not bundle_dir.is_dir():
        fail(f"{bundle_dir}: no such bundle folder")
    try:
        return Bundle.from_dir(bundle_dir)
    except BundleError as exc:
        console.print(plain("FAIL", "bold red") + plain(f" bundle [{exc.rule}]: {exc}"),
                      highlight=False)
        raise typer.Exit(1) from None


def check(
    bundle_dir: BundleArg,
    data_root: DataRootOption = None,
    smoke_rows: Annotated[
        int, typer.Option("--smoke-rows", min=1, help="Rows of the train stream the smoke run "
                          "consumes (capped by challenge.token_budget).")
    ] = 64,
    config: ConfigOption = None,
) -> None:
    """Check a bundle as a validator would: contract, AST policy, axes, parameters, smoke run."""
    from prism_challenge.miner import check_bundle
    from prism_challenge.miner.render import findings_table, print_traceback

    settings = settings_from(config)
    console = Console(soft_wrap=True)
    bundle = load_bundle(bundle_dir, console)
    root = data_root or settings.data.root
    err = Console(stderr=True)
    with local_run_errors(root):
        report = check_bundle(bundle, settings, root, smoke_rows=smoke_rows,
                              on_event=lambda msg: err.print(plain(f"… {msg}", "dim")))
    title = f"prism check {bundle.meta.name or bundle_dir} ({bundle.digest[:12]})"
    if report.record is not None:
        title += f": smoke run of {report.smoke_rows} rows on {report.record.corpus}"
    console.print(findings_table(title, report.findings))
    if report.record is not None:
        print_traceback(console, report.record)
    if report.passed:
        console.print(Text.assemble(
            ("PASS", "bold green"), f": next, `prism eval {bundle_dir}` for the full local "
            f"score, then `prism submit {bundle_dir}`"), highlight=False)
        return
    n = sum(f.status == "fail" for f in report.findings)
    console.print(f"[bold red]FAIL[/]: {n} check(s) failed", highlight=False)
    raise typer.Exit(1)
