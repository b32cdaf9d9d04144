"""Every test the documentation names exists: `dir/test_file.py::test_name` (and the
shorthand `::test_other`, another test of the file named last on that line) must be a test
function of that file under tests/, so a renamed or removed test cannot leave docs/ citing
evidence that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# a test file (relative to tests/, or with the tests/ prefix), or `::name` alone
REF = re.compile(r"(?:(?:tests/)?((?:[\w-]+/)*test_\w+\.py))?::(test_\w+)")


def _named(text: str):
    """(line number, file, test) of every reference, the shorthand resolved on its line."""
    for number, line in enumerate(text.splitlines(), 1):
        last = None
        for match in REF.finditer(line):
            last = match[1] or last
            if last is not None:
                yield number, last, match[2]


def test_every_test_named_in_the_docs_exists():
    defined: dict[str, set[str]] = {}
    missing = []
    checked = 0
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, file, test in _named(doc.read_text("utf-8")):
            path = TESTS / file
            if file not in defined:
                defined[file] = (set(re.findall(r"^\s*(?:async )?def (test_\w+)",
                                                path.read_text("utf-8"), re.M))
                                 if path.is_file() else set())
            checked += 1
            if test not in defined[file]:
                missing.append(f"{doc.relative_to(ROOT)}:{number}: {file}::{test}")
    assert checked > 50  # the pattern still finds the docs' references
    assert missing == [], "\n".join(missing)
