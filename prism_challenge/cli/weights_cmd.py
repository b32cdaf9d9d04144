"""`prism weights`: print the weights this validator would set (dry run), or set them.

Setting on chain needs both `--set` and `weights.dry_run: false` (and `chain.mode: online`
with a wallet); without them the command only reads the store and the metagraph. With
them it goes through the same `WeightSetter` as the validator's epochs: the subnet's rate
limit, version key and commit-reveal setting are respected. Flags follow btcli 11.

The weights and chain modules need bittensor (the validator extra): they are imported when
the command runs, so the base CLI loads without them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from prism_challenge.cli.common import (
    ConfigOption,
    NetuidOption,
    NetworkOption,
    WalletHotkeyOption,
    WalletNameOption,
    WalletPathOption,
    chain_line,
    fail,
    open_existing_store,
    plain,
    settings_from,
    with_chain_flags,
)
from prism_challenge.config import Settings

if TYPE_CHECKING:
    from prism_challenge.chain.factory import ChainAccess
    from prism_challenge.storage import Store
    from prism_challenge.weights.plan import WeightPlan


def _chain(settings: Settings, err: Console) -> ChainAccess:
    from prism_challenge.chain.factory import connect
    from prism_challenge.chain.metagraph import MetagraphFileError

    chain = settings.chain
    if chain.mode == "local" and chain.metagraph_file is None:
        err.print(
            "[yellow]warning:[/] chain.metagraph_file is not set: no hotkey maps to a uid, "
            "so the whole weight goes to the burn uid"
        )
    try:
        access = connect(settings, read_only=True)  # showing the plan writes nothing
    except MetagraphFileError as exc:
        fail(str(exc))
    if chain.mode == "local" and not getattr(access.subnet, "exists", True):
        err.print(plain(f"chain: no local chain yet ({chain.local_ledger} does not exist; "
                        "`prism validator` or `prism submit` creates it); showing what this "
                        "node would send"), highlight=False, soft_wrap=True)
    else:
        err.print(plain(chain_line(settings, access.head())), highlight=False)
    if access.metagraph.stale:
        access.close()
        fail(f"cannot read the metagraph of netuid {chain.netuid} on {chain.network}")
    return access


def _research_credit(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"{path}: cannot read research credits: {exc}")
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
        and math.isfinite(v) and v >= 0
        for k, v in doc.items()
    ):
        fail(f"{path}: research credits must be a JSON object of hotkey -> number >= 0")
    return {k: float(v) for k, v in doc.items()}


def _open_store(url: str) -> Store:
    return open_existing_store(url, "nothing has been scored on this node yet")


def _table(plan: WeightPlan) -> Table:
    mode = "DRY RUN" if plan.dry_run else "live"
    table = Table(
        title=f"weights plan · netuid {plan.netuid} · block {plan.block} · "
        f"corpus {plan.corpus} · {mode}"
    )
    for name, justify in (("uid", "right"), ("hotkey", "left"), ("share", "right"),
                          ("u16", "right"), ("bpb", "right"), ("why", "left")):
        table.add_column(name, justify=justify)
    for row in plan.rows:
        table.add_row(
            str(row.uid),
            row.hotkey or "-",
            f"{row.share:.6f}",
            str(row.u16),
            "-" if row.bpb is None else f"{row.bpb:.6f}",
            "; ".join(row.reasons),
        )
    return table


def weights(
    config: ConfigOption = None,
    netuid: NetuidOption = None,
    network: NetworkOption = None,
    wallet_name: WalletNameOption = None,
    wallet_hotkey: WalletHotkeyOption = None,
    wallet_path: WalletPathOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    corpus: Annotated[
        str | None, typer.Option(help="Competition key to rank (fineweb-edu@…), or a corpus "
                                 "name for its latest key (default: the one scored most "
                                 "recently).")
    ] = None,
    research_credits: Annotated[
        Path | None,
        typer.Option(
            help="JSON object hotkey -> research credit (default: the registry's credits)."
        ),
    ] = None,
    set_weights: Annotated[
        bool,
        typer.Option("--set", help="Set the weights on chain (needs weights.dry_run: false)."),
    ] = False,
) -> None:
    """Show the weights this validator would set (uids, u16 values, hotkeys, why)."""
    from prism_challenge.chain.wallet import WalletError, load_wallet
    from prism_challenge.scoring.leaderboard import resolve_corpus
    from prism_challenge.scoring.queries import load_entries
    from prism_challenge.weights.chain import WeightSetter, WeightsLocked, check_unlocked
    from prism_challenge.weights.plan import load_plan
    from prism_challenge.weights.research import registry_credit

    settings = with_chain_flags(settings_from(config), netuid=netuid, network=network,
                                wallet_name=wallet_name, wallet_hotkey=wallet_hotkey,
                                wallet_path=wallet_path)
    err = Console(stderr=True)
    wallet = None
    if set_weights:
        try:
            check_unlocked(settings, confirm=True)
            wallet = load_wallet(settings.wallet.name, settings.wallet.hotkey,
                                 settings.wallet.path)
        except (WeightsLocked, WalletError) as exc:
            fail(f"not setting weights: {exc}")
    hotkey = None  # with it, runs rank on the shared-input aggregate, as the node does
    if settings.agreement.enabled:
        try:
            hotkey = (wallet or load_wallet(settings.wallet.name, settings.wallet.hotkey,
                                            settings.wallet.path)).hotkey.ss58_address
        except WalletError as exc:
            err.print(f"[yellow]warning:[/] ranking on this store's own measurements only: "
                      f"the validator's hotkey is needed to tell them from its peers' ({exc})")
    credit = _research_credit(research_credits)
    access = _chain(settings, err)
    metagraph = access.metagraph
    store = _open_store(settings.storage.url)
    try:
        if research_credits is None:
            credit = registry_credit(store, settings)
        with store.session() as session:
            if corpus is not None:  # a key nothing is kept under would burn every weight
                corpus = resolve_corpus(load_entries(session), corpus, strict=True)
            plan = load_plan(
                session, metagraph, settings, research_credit=credit, corpus=corpus,
                hotkey=hotkey,
            )
    except ValueError as exc:
        fail(str(exc))
    finally:
        store.close()
    if access.client is not None:  # show the vector the chain would store, not the plan's
        from prism_challenge.weights.conform import WeightsImpossible, conform_online

        try:
            self_uid = None if hotkey is None else metagraph.uid_of(hotkey)
            plan = conform_online(plan, access.client, self_uid)
        except WeightsImpossible as exc:
            access.close()
            fail(f"no weight vector netuid {settings.chain.netuid} accepts: {exc}", code=1)
    if as_json:
        typer.echo(plan.model_dump_json(indent=2))
    else:
        out = Console()
        out.print(_table(plan))
        if plan.as_sent is not None:
            out.print(plain(f"as the chain stores it: {plan.as_sent}"), highlight=False)
        if plan.leader is not None:
            out.print(f"leader: submission {plan.leader.submission_id} of {plan.leader.hotkey}")
        for x in plan.excluded:
            out.print(f"excluded: {x.hotkey}: {x.reason}", highlight=False)
    try:
        if wallet is not None and access.client is not None:
            setter = WeightSetter(access.client, wallet, settings, status=access.status)
            outcome = setter.offer(plan, metagraph)
            err.print(f"weights: {outcome.outcome}: {outcome.message}", highlight=False)
            if not outcome.sent:
                raise typer.Exit(1)
    finally:
        access.close()
