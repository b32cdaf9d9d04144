"""Pieces every CLI command shares: the --config option, clean error exits, and printing
text that is not ours.

Text that comes from a user, a miner or a file (program.md, bundle names, refusal reasons,
error messages) is printed literally: through `plain` (a rich `Text`, never parsed as
markup) or `typer.echo`. A bundle named `[bold]x` or a message about a `[axes]` table shows
as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from prism_challenge.config import ConfigError, Settings, load_settings

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        envvar="PRISM_CONFIG",
        help="YAML config file (see config.example.yaml); PRISM_* env vars override it.",
    ),
]


# Chain and wallet flags as btcli 11 spells them; the bittensor-10 dotted names stay aliases.
NetuidOption = Annotated[int | None, typer.Option("--netuid", help="Subnet uid.")]
NetworkOption = Annotated[
    str | None,
    typer.Option("--network", "-n", "--subtensor.network", "--subtensor.chain_endpoint",
                 help="finney, test, archive, devnet, local or a ws(s):// endpoint; "
                      "switches the chain online."),
]
WalletNameOption = Annotated[
    str | None, typer.Option("--wallet", "-w", "--wallet.name", help="Wallet (coldkey) name.")
]
WalletHotkeyOption = Annotated[
    str | None,
    typer.Option("--wallet-hotkey", "-H", "--wallet.hotkey", help="Hotkey name in the wallet."),
]
WalletPathOption = Annotated[
    str | None, typer.Option("--wallet-path", "--wallet.path", help="Wallets directory.")
]


def with_chain_flags(settings: Settings, *, netuid: int | None = None, network: str | None = None,
                     wallet_name: str | None = None, wallet_hotkey: str | None = None,
                     wallet_path: str | None = None, port: int | None = None,
                     external_ip: str | None = None) -> Settings:
    """Bittensor-style flags win over the config file and the environment.

    Naming a network means that network: `--network` switches `chain.mode` to online (and
    with it off the local ledger's any-hotkey metagraph). A name bittensor does not know is
    refused with the valid ones, before anything is read or written.
    """
    def pick(**values):
        return {k: v for k, v in values.items() if v is not None}

    chain = pick(netuid=netuid, network=network)
    if network is not None:
        from prism_challenge.config.settings import network_error

        if (problem := network_error(network)) is not None:
            fail(problem)
        chain.update(mode="online", allow_any_hotkey=False)
    if port is not None or external_ip is not None:  # the published address follows
        published = settings.chain.serve_address
        host = external_ip or (published.rpartition(":")[0] if published else None)
        if host is not None:
            bare = host.strip("[]")
            host = f"[{bare}]" if ":" in bare else bare
            chain["serve_address"] = f"{host}:{port or settings.intake.port}"
    return settings.model_copy(update={
        "chain": _checked(settings.chain, chain),
        "wallet": settings.wallet.model_copy(
            update=pick(name=wallet_name, hotkey=wallet_hotkey, path=wallet_path)),
        "intake": settings.intake.model_copy(update=pick(port=port)),
    })


def _checked(section, update: dict):
    """`section` with `update`, validated like a config file (a bad value is one line)."""
    from pydantic import ValidationError

    try:
        return type(section).model_validate({**section.model_dump(), **update})
    except ValidationError as exc:
        fail("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors()))


def chain_line(settings: Settings, block: int | None) -> str:
    """Which chain a command is on, printed before it writes: network, endpoint, netuid,
    block; the local ledger says loudly that it is no Bittensor network."""
    chain = settings.chain
    at = "?" if block is None else str(block)
    if chain.mode == "local":
        return (f"chain: LOCAL ledger {chain.local_ledger} (not a Bittensor network; pass "
                f"--network to go online), netuid {chain.netuid}, block {at}")
    from prism_challenge.config.settings import endpoint_of

    return (f"chain: {chain.network} ({endpoint_of(chain.network)}), netuid {chain.netuid}, "
            f"block {at}")


def plain(text: object, style: str = "") -> Text:
    """`text` as rich prints it: literally, never as markup."""
    return Text(str(text), style=style)


def print_error(message: str) -> None:
    """One error line on stderr, never wrapped (a log collector keeps it whole)."""
    Console(stderr=True, soft_wrap=True).print(
        Text.assemble(("error:", "bold red"), " ", str(message)), highlight=False)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with `code`."""
    print_error(message)
    raise typer.Exit(code)


def settings_from(path: Path | None) -> Settings:
    try:
        return load_settings(path)
    except ConfigError as exc:
        fail(str(exc))


def open_existing_store(url: str, hint: str):
    """The node's store for a command that only reads it: a SQLite file that does not exist
    is refused with `hint` (the next step) instead of being created where the command ran."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from prism_challenge.storage import Store, StoreUnavailable

    try:
        parsed = make_url(url)
    except ArgumentError:
        parsed = None  # Store says what is wrong with it
    if parsed is not None and parsed.get_backend_name() == "sqlite" and \
            parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).exists():
            fail(f"no store at {parsed.database}: {hint}")
    try:
        return Store(url)
    except StoreUnavailable as exc:
        fail(str(exc))

