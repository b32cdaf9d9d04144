"""Every `btcli ...` line in docs/ parses with the installed btcli (bittensor 11's own CLI).

Each line is parsed by btcli's click commands, never run: a renamed flag or an argument
that became positional (`subnets metagraph N`) fails here instead of on an operator's
terminal. `N` (a netuid placeholder) reads as 1.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest
import typer

DOCS = Path(__file__).resolve().parents[2] / "docs"


def btcli_lines() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for line in page.read_text().splitlines():
            text = line.split("#", 1)[0].strip()
            if text.startswith("btcli "):
                found.append((page.name, text))
    return found


@functools.cache
def btcli():
    """btcli's root click command (built once: it is large)."""
    from bittensor.cli.main import app

    return typer.main.get_command(app)


def parse(args: list[str]) -> str:
    """The btcli command path `args` name, parsed like btcli would (click's UsageError on a
    bad flag or a missing argument). Typer carries its own click: duck-typed here."""
    command, path = btcli(), []
    ctx = command.make_context("btcli", list(args))
    while hasattr(command, "resolve_command"):
        pending = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, command, rest = command.resolve_command(ctx, pending)
        path.append(name)
        ctx = command.make_context(name, rest, parent=ctx)
    return " ".join(path)


def test_parse_refuses_what_btcli_refuses():
    assert parse(["subnets", "metagraph", "1", "--network", "finney"]) == "subnets metagraph"
    with pytest.raises(Exception, match="No such option: --netuid"):
        parse(["subnets", "metagraph", "--netuid", "1"])


def test_the_docs_have_btcli_lines():
    assert len(btcli_lines()) >= 5


@pytest.mark.parametrize(("page", "line"), btcli_lines())
def test_each_docs_btcli_line_parses(page, line):
    args = [re.sub(r"^N$", "1", word) for word in shlex.split(line)[1:]]
    try:
        parse(args)
    except Exception as exc:  # btcli's click UsageError
        pytest.fail(f"{page}: `{line}` does not parse with btcli: {exc}")
