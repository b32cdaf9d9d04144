"""The slow-first order of the suite names real files and keeps each file together."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from slow_first import SLOW_FILES, slow_first

TESTS = Path(__file__).resolve().parents[1]


def test_every_listed_slow_file_exists():
    present = {p.name for p in TESTS.rglob("test_*.py")}
    assert [n for n in SLOW_FILES if n not in present] == []
    assert len(set(SLOW_FILES)) == len(SLOW_FILES)


def test_listed_files_move_first_in_their_order_and_stay_together():
    def item(path: str, name: str):
        return SimpleNamespace(path=Path(path), name=name)

    items = [item("tests/a/test_fast.py", "t1"), item("tests/b/test_worker.py", "w1"),
             item("tests/b/test_worker.py", "w2"), item("tests/c/test_honest_runs.py", "h1"),
             item("tests/a/test_fast.py", "t2"), item("tests/d/test_other.py", "o1")]
    slow_first(items)
    assert [i.name for i in items] == ["h1", "w1", "w2", "t1", "t2", "o1"]
