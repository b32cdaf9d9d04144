"""`prism ARGS` in the test's own process, as a subprocess result reads.

typer's CliRunner runs the same command (sandboxes included) in the pytest worker, where
torch, bittensor and the prewarmed interpreter are loaded already, instead of paying for
them again in a fresh process (docs/testing.md: which commands keep a process of their own).
"""

from __future__ import annotations

import os
from pathlib import Path


def prism_in_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    """Run `prism ARGS` (from `cwd` when given: relative paths are read from there) with wide
    output; the result's `returncode` is its exit code, as a subprocess's."""
    from typer.testing import CliRunner

    from prism_challenge.cli.app import app

    back = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        res = CliRunner().invoke(app, list(args), env={"COLUMNS": "400", **(env or {})})
    finally:
        os.chdir(back)
    res.returncode = res.exit_code
    return res
