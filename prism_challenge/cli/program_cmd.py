"""`prism program`: print a brief (program.md or its JSON), the global one or a hotkey's, from
the node's store or from a validator's API; `prism registry note`: annotate a hypothesis.

The registry (scipy) and httpx are imported when a command runs, so the base CLI loads
without the validator extra.

program.md is printed byte for byte with `typer.echo` (never through rich markup): it holds
bracketed text such as the `[axes]` table name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from prism_challenge.chain.ss58 import hotkey_problem
from prism_challenge.cli.common import ConfigOption, fail, open_existing_store, settings_from

NO_STORE = ("this node has no registry yet (start `prism validator`, or read a validator's "
            "brief with --url http://HOST:PORT)")


def _chain_block(settings) -> int | None:
    """The chain block (for the population epoch) when the node is online, else None."""
    if settings.chain.mode != "online":
        return None
    from prism_challenge.chain.subtensor import ChainClient

    client = ChainClient(settings.chain.network, settings.chain.netuid,
                         timeout_s=settings.chain.timeout_s)
    try:
        return client.block()
    except Exception as exc:  # any failure to reach the chain is the operator's to see
        fail(f"cannot read the chain block of netuid {settings.chain.netuid} on "
             f"{settings.chain.network} (needed for the population epoch): {exc}")
    finally:
        client.close()


def _local(settings, hotkey: str | None) -> tuple[str, str, dict]:
    from prism_challenge.registry.service import Registry

    # A node without a store has an empty registry: its brief is read from an in-memory one,
    # so reading never creates a store where the command ran.
    from prism_challenge.storage import Store  # sqlalchemy: only the commands that read a store

    store = Store(settings.storage.url if _store_exists(settings.storage.url) else "sqlite://")
    try:
        reg = Registry(store, settings)
        if hotkey is None:
            return reg.program()
        return reg.program_for(hotkey, settings, _chain_block(settings))
    finally:
        store.close()


def _store_exists(url: str) -> bool:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return True
    return Path(parsed.database).exists()


def _remote(url: str, hotkey: str | None, as_json: bool) -> str:
    import httpx

    path = "/v1/program.json" if as_json else "/v1/program.md"
    params = {} if hotkey is None else {"hotkey": hotkey}
    try:
        response = httpx.get(f"{url.rstrip('/')}{path}", params=params, timeout=30)
    except httpx.HTTPError as exc:
        fail(f"{url}{path}: {exc}", code=1)
    if response.status_code != 200:
        fail(f"{url}{path} answered {response.status_code}: {response.text[:300]}", code=1)
    if as_json:
        return json.dumps(response.json(), indent=2)
    digest = response.headers.get("x-prism-program-digest", "unknown")
    return f"{response.text}\n<!-- sha256 {digest} -->"


def program(
    config: ConfigOption = None,
    hotkey: Annotated[
        str | None,
        typer.Option("--hotkey", help="Your hotkey (ss58): the brief of its population."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="Ask this validator's API (e.g. http://host:8000) instead "
                     "of reading the local store."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON twin.")] = False,
) -> None:
    """Print the research brief (program.md): the global one, or your population's."""
    if hotkey is not None and (problem := hotkey_problem(hotkey)) is not None:
        fail(f"--hotkey {problem}")
    if url is not None:
        typer.echo(_remote(url, hotkey, as_json))
        return
    text, digest, doc = _local(settings_from(config), hotkey)
    typer.echo(json.dumps(doc, indent=2) if as_json else f"{text}\n<!-- sha256 {digest} -->")


registry_app = typer.Typer(help="Operate the research registry.", no_args_is_help=True)


@registry_app.command("note")
def note(
    hypothesis: Annotated[str, typer.Argument(help="Hypothesis id, e.g. H012.")],
    text: Annotated[str, typer.Argument(help="The note (one line, at most 500 characters).")],
    config: ConfigOption = None,
) -> None:
    """Annotate a hypothesis: shown in the theory graph and the journal."""
    from prism_challenge.registry.ledger import LedgerError
    from prism_challenge.registry.service import Registry

    settings = settings_from(config)
    store = open_existing_store(settings.storage.url, NO_STORE)
    try:
        entry = Registry(store, settings).note(hypothesis, text)
    except LedgerError as exc:
        fail(str(exc))
    finally:
        store.close()
    typer.echo(f"noted on {hypothesis} (journal entry {entry['n']}): {entry['text']}")
