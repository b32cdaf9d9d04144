"""The files PRISM ships besides code: the data manifests and the example bundles.

In a checkout they are `data_manifests/` and `examples/` at the top of the repository;
`prism_challenge/share/` links to both, and the wheel carries their content there, so an
install outside a clone finds the same files at the same place inside the package.
"""

from __future__ import annotations

import shutil
from pathlib import Path

SHARE = Path(__file__).resolve().parent / "share"
EXAMPLE_FILES = ("architecture.py", "training.py", "prism.toml")


class ExampleError(ValueError):
    """An example that does not exist, or a destination that would be overwritten."""


def manifests_dir() -> Path:
    return SHARE / "data_manifests"


def examples_dir() -> Path:
    return SHARE / "examples"


def example_names() -> list[str]:
    root = examples_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "training.py").is_file())


def example_path(name: str) -> Path:
    if name not in example_names():
        raise ExampleError(
            f"no example named {name!r}; the examples are: {', '.join(example_names())}"
        )
    return examples_dir() / name


def copy_example(name: str, dest: Path) -> Path:
    """Write the example's bundle files into `dest` (new or empty); refuses to overwrite."""
    source = example_path(name)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ExampleError(f"{dest} already exists and is not an empty folder")
    dest.mkdir(parents=True, exist_ok=True)
    for file in EXAMPLE_FILES:
        if (source / file).is_file():
            shutil.copyfile(source / file, dest / file)
    return dest


def resolve_manifest(path: Path | str) -> Path:
    """`path` as given when it exists (or is absolute); else the shipped file of that name.

    `data_manifests/demo.json` names the same file from a checkout's top folder and from
    anywhere else once PRISM is installed.
    """
    path = Path(path)
    if path.is_file() or path.is_absolute():
        return path
    parts = path.parts
    relative = Path(*parts[1:]) if parts and parts[0] == "data_manifests" else path
    shipped = manifests_dir() / relative
    return shipped if shipped.is_file() else path
