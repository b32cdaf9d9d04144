"""`prism prepare-data`: build, resume or verify the locked data (docs/data.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from prism_challenge.cli.common import ConfigOption, fail, plain, settings_from

DEFAULT_SPECS = {
    "demo": Path("data_manifests/demo.json"),
    "fineweb-edu": Path("data_manifests/fineweb-edu-sample-10BT.json"),
}


class SourceKind(StrEnum):
    demo = "demo"
    local = "local"
    fineweb_edu = "fineweb-edu"


def prepare_data(
    source: Annotated[
        SourceKind | None,
        typer.Option(
            "--source",
            help="demo (offline, development only), local (parquet/jsonl files, see --input) or "
            "fineweb-edu (streams the pinned revision). Default: the manifest's source.",
        ),
    ] = None,
    inputs: Annotated[
        list[Path] | None,
        typer.Option(
            "--input",
            "-i",
            help="With --source local: a parquet / jsonl(.gz) file or a folder of them "
            "(FineWeb-Edu schema: text, id, ...). Repeat for several.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Data root to write (default: data.root of the config)."),
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest",
            "-m",
            help="Data spec under data_manifests/ (default: the one for --source, else "
            "data.manifest of the config).",
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Re-hash every file of the data root at --out and exit."),
    ] = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show progress bars (stderr).")
    ] = True,
    config: ConfigOption = None,
) -> None:
    """Prepare the locked data: split, train the tokenizer, write shards and the MANIFEST.

    Exit status: 0 prepared (or verified), 1 the data does not verify, 2 bad input or
    usage, 3 the source is unavailable (hub unreachable; nothing written), 130 interrupted.
    """
    from prism_challenge.data import (
        DataInputError,
        DataIntegrityError,
        LocalSource,
        load_spec,
        prepare_data,
        verify_data,
    )
    from prism_challenge.data.errors import SOURCE_UNAVAILABLE_EXIT, SourceUnavailable

    settings = settings_from(config)
    root = out or settings.data.root
    console = Console(stderr=True)

    if verify:
        try:
            checked = verify_data(root, progress=progress, console=console)
        except DataIntegrityError as exc:
            fail(f"verification failed: {exc}", code=1)
        _summary(checked, root, "verified: every file matches the MANIFEST")
        return

    if manifest is None:
        if source is not None and source.value in DEFAULT_SPECS:
            manifest = DEFAULT_SPECS[source.value]
        else:
            manifest = settings.data.manifest
    try:
        spec = load_spec(manifest)
        if source is SourceKind.local or inputs:
            if source not in (None, SourceKind.local):
                raise DataInputError("--input is only for --source local")
            if not inputs:
                raise DataInputError("--source local needs --input FILE_OR_FOLDER")
            # A local copy of any corpus, with the manifest's split/tokenizer/shard settings.
            spec = spec.with_source(LocalSource(inputs=[str(p) for p in inputs]))
        elif source is not None and source.value != spec.corpus:
            raise DataInputError(
                f"{manifest} is a {spec.corpus!r} manifest; --source {source.value} needs a "
                f"{source.value!r} one (or leave --manifest out)"
            )
        if spec.corpus == "demo":
            console.print(
                "[bold yellow]DEMO corpus[/]: docstrings of installed packages, for "
                "development only; scores on it are not FineWeb-Edu scores.",
                highlight=False,
            )
        report = prepare_data(spec, root, progress=progress, console=console)
    except SourceUnavailable as exc:
        fail(str(exc), code=SOURCE_UNAVAILABLE_EXIT)
    except DataInputError as exc:
        fail(str(exc))
    except DataIntegrityError as exc:
        fail(str(exc), code=1)
    except KeyboardInterrupt:
        fail(f"interrupted: run the same command again to resume ({root}/.work)", code=130)
    if report.up_to_date:
        note = "already prepared: the MANIFEST matches this spec and every file verifies"
    else:
        note = (
            f"prepared in {report.seconds:.1f} s ({report.shards_written} shards written, "
            f"{report.shards_kept} kept from an interrupted run)"
        )
    _summary(report.manifest, root, note)


def _summary(manifest, root: Path, note: str) -> None:
    console = Console(soft_wrap=True)  # hashes and paths stay whole, for copy and paste
    label = plain("DEMO ", "bold yellow") if manifest.is_demo else plain("")
    console.print(label + plain(f"{manifest.name} at {root}"), highlight=False)
    console.print(plain(f"corpus: {manifest.corpus} ({manifest.label})"), highlight=False)
    console.print(f"data version (MANIFEST sha256): {manifest.sha256}", highlight=False)
    console.print(
        f"tokenizer: vocab {manifest.vocab_size}, separator id {manifest.separator_id}, "
        f"sha256 {manifest.tokenizer_sha256[:16]}…",
        highlight=False,
    )
    table = Table("split", "documents", "text bytes", "tokens", "shards")
    for name, split in manifest.splits.items():
        table.add_row(
            name,
            f"{split.n_documents:,}",
            f"{split.n_text_bytes:,}",
            f"{split.n_tokens:,}",
            str(len(split.shards)),
        )
    console.print(table)
    console.print(plain(note), highlight=False)


def main() -> None:
    """Entry point for scripts/prepare_data.py (the same command, standalone)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(prepare_data)
    app()
