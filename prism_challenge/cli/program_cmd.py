"""`prism program`: print the research brief (program.md or its JSON twin).

From this node's store by default (an operator's view), or from a validator's API with
`--url` (a miner's view: what the node you submit to asks for now).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from prism_challenge.cli.common import ConfigOption, fail, settings_from


def program(
    config: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON twin.")] = False,
    url: Annotated[
        str | None,
        typer.Option("--url", help="Fetch the brief a validator serves (its API base URL) "
                     "instead of reading this node's store."),
    ] = None,
) -> None:
    """Print the research brief (program.md) this node, or the validator at --url, serves."""
    settings = settings_from(config)
    if url is not None:
        typer.echo(_fetch(url, settings.chain.netuid, as_json))
        return
    from prism_challenge.registry.service import Registry
    from prism_challenge.storage import Store

    store = Store(settings.storage.url)
    try:
        text, digest, doc = Registry(store, settings).program()
    finally:
        store.close()
    typer.echo(json.dumps(doc, indent=2) if as_json else f"{text}\n<!-- sha256 {digest} -->")


def _fetch(url: str, netuid: int, as_json: bool) -> str:
    from prism_challenge.submit import SubmissionClient, SubmitError

    with SubmissionClient(url, netuid=netuid) as client:
        try:
            brief = client.program_json() if as_json else client.program_brief()
        except SubmitError as exc:
            fail(f"{url}: {exc}", code=1)
    if brief is None:
        fail(f"{url} serves no research brief", code=1)
    return json.dumps(brief, indent=2) if as_json else brief
