"""`prism program`: print the node's current brief (program.md or its JSON) from its store."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from prism_challenge.cli.common import ConfigOption, settings_from
from prism_challenge.registry.service import Registry
from prism_challenge.storage import Store


def program(
    config: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON twin.")] = False,
) -> None:
    """Print the research brief (program.md) this node currently serves."""
    settings = settings_from(config)
    store = Store(settings.storage.url)
    try:
        text, digest, doc = Registry(store, settings).program()
    finally:
        store.close()
    typer.echo(json.dumps(doc, indent=2) if as_json else f"{text}\n<!-- sha256 {digest} -->")
