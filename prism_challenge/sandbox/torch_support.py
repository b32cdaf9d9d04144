"""The torch builds PRISM runs on, and the check that names an unsupported one.

Validator hosts keep the CUDA build of torch they have (a GPU host's image often carries
its own); PRISM supports a range, not one pin. Every run checks the interpreter's torch
before the sandbox starts, so an unsupported build is one clear line, not a failure deep
inside a miner's run that would be charged to the miner.
"""

from __future__ import annotations

import re

# The range the project is tested on: 2.13 here (CPU), 2.11 on a lent H100 (CUDA 13.0).
OLDEST = (2, 11)
NEWEST_EXCLUDED = (2, 14)
SUPPORTED = ">=2.11,<2.14"


class UnsupportedTorch(ValueError):
    """The installed torch is outside the supported range."""


def torch_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string such as 2.13.0+cpu or 2.11.0a0+git1a2b."""
    match = re.match(r"^(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def check_torch(version: str | None = None) -> str:
    """The installed (or given) torch version, or UnsupportedTorch naming it and the fix."""
    if version is None:  # from the installed metadata: importing torch here costs memory
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed

        try:
            version = installed("torch")
        except PackageNotFoundError:
            raise UnsupportedTorch("torch is not installed: pip install "
                                   "'prism-challenge[miner]'") from None
    release = torch_release(str(version))
    if release is None or not OLDEST <= release < NEWEST_EXCLUDED:
        raise UnsupportedTorch(
            f"torch {version} is not supported: PRISM runs on torch {SUPPORTED}; install a "
            f"supported build (e.g. pip install 'torch{SUPPORTED}' from your CUDA wheel index)")
    return str(version)
