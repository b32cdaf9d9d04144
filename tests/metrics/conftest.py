"""The metrics tests' fixture: the real app served over a populated store (tests/serve_kit.py)."""

from serve_kit import serve  # noqa: F401 (fixture)
