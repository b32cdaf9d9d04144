"""No tracked file names a path that exists only on one machine.

A reader of this repository has none of the development machine's folders (its worktrees,
its shared notes, a home directory), so docs and code must not point at them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL = re.compile(r"/work/(main|shared|wt)\b|/home/[a-z][a-z0-9_-]*/")


def test_no_tracked_file_names_a_machine_local_path():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    hits = []
    for name in filter(None, files):
        path = ROOT / name
        if name == Path(__file__).relative_to(ROOT).as_posix() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1)
                 if LOCAL.search(line)]
    assert hits == []
