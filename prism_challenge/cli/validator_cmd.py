"""`prism validator`: run the validator neuron (intake API, gates, sandboxed evaluation,
dry-run weight epochs) until SIGTERM."""

from __future__ import annotations

import json
import logging
import sys
from enum import StrEnum
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
    chain_line,
    fail,
    settings_from,
    with_chain_flags,
)


class LogFormat(StrEnum):
    auto = "auto"
    json = "json"
    text = "text"


class JsonLines(logging.Formatter):
    """One JSON object a line: what a log collector parses without guessing where a wrapped
    message ends (rich wraps at 80 columns when no terminal tells it the width)."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": round(record.created, 3), "level": record.levelname.lower(),
               "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def setup_logging(verbose: bool = False, log_format: str = "auto") -> None:
    """`text` (rich, for a person at a terminal) or `json` lines; `auto` picks text on a
    terminal and JSON otherwise (a service manager, a container, a file)."""
    if log_format == "auto":
        log_format = "text" if sys.stderr.isatty() else "json"
    if log_format == "json":
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonLines())
    else:
        handler = RichHandler(show_path=False, rich_tracebacks=True)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s",
                        datefmt="[%X]", handlers=[handler], force=True)
    for noisy in ("httpx", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def validator(
    config: ConfigOption = None,
    netuid: NetuidOption = None,
    network: NetworkOption = None,
    wallet_name: WalletNameOption = None,
    wallet_hotkey: WalletHotkeyOption = None,
    wallet_path: WalletPathOption = None,
    port: Annotated[int | None, typer.Option(
        "--port", "--axon.port",
        help="Intake API port; the published address (chain.serve_address) follows it.")
    ] = None,
    external_ip: Annotated[str | None, typer.Option(
        "--axon.external_ip", "--external-ip",
        help="Public IP address to publish on chain (chain.serve_address's host).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", "--logging.debug")] = False,
    log_format: Annotated[LogFormat, typer.Option(
        "--log-format", help="auto: text on a terminal, JSON lines otherwise.")
    ] = LogFormat.auto,
) -> None:
    """Run the validator: intake API, gates, sandboxed evaluation, weight epochs."""
    from prism_challenge.data import DataInputError, DataIntegrityError
    from prism_challenge.validator.node import ValidatorNode

    settings = with_chain_flags(settings_from(config), netuid=netuid, network=network,
                                wallet_name=wallet_name, wallet_hotkey=wallet_hotkey,
                                wallet_path=wallet_path, port=port, external_ip=external_ip)
    setup_logging(verbose, log_format.value)
    try:
        node = ValidatorNode(settings)
    except (DataInputError, DataIntegrityError, FileNotFoundError) as exc:
        fail(f"{exc}\nprepare the data first: prism prepare-data --manifest "
             f"{settings.data.manifest} --out {settings.data.root}")
    except ValueError as exc:
        fail(str(exc))
    # through the node's log (one JSON object a line when not on a terminal)
    logging.getLogger("prism.validator").info(chain_line(settings, node.chain.head()))
    node.run_forever()
