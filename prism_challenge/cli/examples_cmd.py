"""`prism examples`: list the shipped example bundles and copy one to start from."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from prism_challenge.bundle.meta import MAX_NAME_CHARS
from prism_challenge.cli.common import fail
from prism_challenge.shared_files import ExampleError, copy_example, example_names, example_path

NAME_LINE = re.compile(r"^name\s*=")
examples = typer.Typer(help="The example bundles shipped with PRISM.", no_args_is_help=True)


def rename(manifest: Path, new_name: str) -> None:
    """Set the bundle's `name` in its prism.toml (the first top-level `name = ...` line)."""
    if not manifest.is_file():
        return
    lines = manifest.read_text("utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("["):
            break
        if NAME_LINE.match(line):
            lines[i] = f"name = {json.dumps(new_name[:MAX_NAME_CHARS])}\n"
            manifest.write_text("".join(lines), "utf-8")
            return


@examples.command("list")
def list_examples() -> None:
    """Name and description of every example bundle."""
    import tomllib

    for name in example_names():
        meta = example_path(name) / "prism.toml"
        about = tomllib.loads(meta.read_text("utf-8")).get("description", "") if (
            meta.is_file()) else ""
        typer.echo(f"{name}: {about}" if about else name)


@examples.command("copy")
def copy(
    name: Annotated[str, typer.Argument(help="Example name (`prism examples list`).")],
    dest: Annotated[Path, typer.Argument(help="New (or empty) folder to write the bundle to.")],
) -> None:
    """Write an example bundle (architecture.py, training.py, prism.toml) to DEST, named after
    DEST (the `name` in its prism.toml), so the copy does not pass for the example."""
    try:
        written = copy_example(name, dest)
    except ExampleError as exc:
        fail(str(exc))
    rename(written / "prism.toml", written.resolve().name)
    files = ", ".join(sorted(p.name for p in written.iterdir()))
    typer.echo(f"wrote {name} to {written} ({files}); next: prism check {written}")
