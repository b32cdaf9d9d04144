"""The repository stands alone: no file cites a design document, a section number of one, a
threat-model file or an issue number that a reader of the repository does not have."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ABSENT = re.compile(r"\bDESIGN\b|THREAT_MODEL|\b[Ii]ssue #?\d+|\b[Tt]he issue\b")


def test_no_file_cites_a_document_or_issue_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    hits = []
    for name in files:
        path = ROOT / name
        if name.endswith((".lock", ".png")) or not path.is_file() or path == Path(__file__):
            continue
        try:
            text = path.read_text("utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{name}:{i}: {line.strip()[:80]}" for i, line in
                 enumerate(text.splitlines(), 1) if ABSENT.search(line)]
    assert hits == [], "\n".join(hits)
