"""Which optional extra of `prism-challenge` provides a module, and the error that says so.

The base package (config, store, CLI shell) imports without any extra. A command imports
what it needs when it runs, inside `needs_extras()`, so that a missing module is reported as
"install this extra" rather than as a traceback. `tests/foundation/test_packaging.py` keeps
this table in step with the extras declared in pyproject.toml.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# Top-level module -> (extra, distribution). An extra's modules come with every extra that
# includes it (validator includes miner).
MODULE_EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("miner", "torch"),
    "tokenizers": ("miner", "tokenizers"),
    "matplotlib": ("miner", "matplotlib"),
    "httpx": ("miner", "httpx"),
    "bittensor": ("miner", "bittensor"),
    "scipy": ("validator", "scipy"),
    "datasets": ("validator", "datasets"),
    "pyarrow": ("validator", "pyarrow"),
    "openai": ("validator", "openai"),
    "docker": ("validator", "docker"),
    "fastapi": ("validator", "fastapi"),
    "starlette": ("validator", "fastapi"),
    "uvicorn": ("validator", "uvicorn"),
    "prometheus_client": ("validator", "prometheus-client"),
    "psycopg": ("postgres", "psycopg"),
    "ray": ("cluster", "ray"),
}
# Extras that include others (pyproject: validator = [prism-challenge[miner], ...]).
INCLUDES: dict[str, frozenset[str]] = {"validator": frozenset({"miner"})}


class MissingExtra(RuntimeError):
    """A module of an optional extra is not installed; the message says what to install."""

    def __init__(self, module: str, extra: str, what: str) -> None:
        self.module, self.extra = module, extra
        super().__init__(
            f"{what} needs the [{extra}] extra (module {module!r} is not installed): "
            f"pip install 'prism-challenge[{extra}]'"
        )


def extra_to_install(module: str, needed: str | None = None) -> str | None:
    """The extra that provides `module`: `needed` (the caller's own extra) when it includes
    it, so that one install gives the caller everything; None for a non-optional module."""
    found = MODULE_EXTRAS.get(module.split(".")[0])
    if found is None:
        return None
    extra = found[0]
    if needed is not None and (extra == needed or extra in INCLUDES.get(needed, ())):
        return needed
    return extra


@contextmanager
def needs_extras(what: str, needed: str | None = None) -> Iterator[None]:
    """Turn a missing optional module raised inside into `MissingExtra` naming its extra."""
    try:
        yield
    except ModuleNotFoundError as exc:
        module = (exc.name or "").split(".")[0]
        extra = extra_to_install(module, needed)
        if extra is None:
            raise
        raise MissingExtra(module, extra, what) from exc
