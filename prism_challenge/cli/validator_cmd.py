"""`prism validator`: run the validator neuron (intake API, gates, sandboxed evaluation,
dry-run weight epochs) until SIGTERM."""

from __future__ import annotations

import logging
from typing import Annotated

import typer
from rich.logging import RichHandler

from prism_challenge.cli.common import (
    ConfigOption,
    NetuidOption,
    NetworkOption,
    WalletHotkeyOption,
    WalletNameOption,
    WalletPathOption,
    fail,
    settings_from,
    with_chain_flags,
)


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(message)s",
        datefmt="[%X]", handlers=[RichHandler(show_path=False, rich_tracebacks=True)],
        force=True,
    )
    for noisy in ("httpx", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def validator(
    config: ConfigOption = None,
    netuid: NetuidOption = None,
    network: NetworkOption = None,
    wallet_name: WalletNameOption = None,
    wallet_hotkey: WalletHotkeyOption = None,
    wallet_path: WalletPathOption = None,
    port: Annotated[int | None, typer.Option("--port", help="Intake API port.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run the validator: intake API, gates, sandboxed evaluation, weight epochs."""
    from prism_challenge.data import DataInputError, DataIntegrityError
    from prism_challenge.validator.node import ValidatorNode

    settings = with_chain_flags(settings_from(config), netuid=netuid, network=network,
                                wallet_name=wallet_name, wallet_hotkey=wallet_hotkey,
                                wallet_path=wallet_path, port=port)
    setup_logging(verbose)
    try:
        node = ValidatorNode(settings)
    except (DataInputError, DataIntegrityError, FileNotFoundError) as exc:
        fail(f"{exc}\nprepare the data first: prism prepare-data --manifest "
             f"{settings.data.manifest} --out {settings.data.root}")
    except ValueError as exc:
        fail(str(exc))
    node.run_forever()
