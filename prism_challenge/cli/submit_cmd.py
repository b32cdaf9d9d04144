"""`prism submit`: check a bundle, commit it on the subnet, upload it to every validator.

Everything that can be checked before spending a commitment is (bundle rules, the AST
policy and contract, wallet), so a miner sees the same rule ids the validator would answer
with and a bundle the gates would refuse costs no commitment. The commitment (hotkey +
bundle digest, on chain or in the local ledger) comes first: it fixes the bundle's
precedence before any validator has seen the code. Then the bundle goes to every validator
with a permit and a published address (or to `--url`), each request signed for that
validator's hotkey, and each validator's answer is reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.cli.common import (
    ConfigOption,
    NetuidOption,
    NetworkOption,
    WalletHotkeyOption,
    WalletNameOption,
    WalletPathOption,
    chain_line,
    fail,
    print_error,
    settings_from,
    with_chain_flags,
)

if TYPE_CHECKING:  # bittensor and the client come with the miner extra: imported on use
    from prism_challenge.chain.factory import ChainAccess
    from prism_challenge.chain.subnet import Commitment, Endpoint
    from prism_challenge.intake.schemas import Receipt, SubmissionView
    from prism_challenge.submit import SubmissionClient


def _describe(view: SubmissionView) -> str:
    text = f"submission {view.id}: {view.status}"
    if view.reason:
        text += f" ({view.reason})"
    if view.score is not None:
        score = view.score
        text += f"; bpb {score.bpb:.4f}, held-out delta {score.heldout_delta:.4f}"
        text += f", corpus {score.corpus}" + ("" if score.eligible else ", not eligible")
        if score.reason:
            text += f" ({score.reason})"
    return text


def _commit(chain: ChainAccess, wallet, bundle: Bundle) -> Commitment:
    """The hotkey's commitment to this bundle; an identical latest one is reused."""
    from prism_challenge.chain.subnet import commitment_value

    hotkey = wallet.hotkey.ss58_address
    value = commitment_value(hotkey, bundle.digest)
    seen = chain.subnet.latest_commitment(hotkey)
    if seen is not None and seen.value == value:
        typer.echo(f"bundle {bundle.digest[:16]} already committed at block {seen.block}")
        return seen
    made = chain.subnet.commit(wallet, value)
    typer.echo(f"bundle {bundle.digest[:16]} committed at block {made.block} ({value})")
    return made


def _static_gates(bundle: Bundle) -> None:
    """Every check that needs no validator (AST policy and contract), before the commitment
    spends the miner's slot: the validator would reject the same bundle for the same rule."""
    from prism_challenge.gates.policy import check_policy
    from prism_challenge.gates.violation import summarise

    violations = check_policy(bundle.files)
    if violations:
        print_error(f"bundle refused before commitment: {len(violations)} AST policy "
                    "violation(s); fix them (prism check shows the same) and submit again")
        typer.echo(summarise(violations), err=True)
        raise typer.Exit(2)


def _targets(chain: ChainAccess, url: str | None, netuid: int) -> list[Endpoint | str]:
    if url is not None:
        return [url]
    found = chain.subnet.validators()
    if not found:
        fail(f"no validator on netuid {netuid} has a permit and a published address; "
             "pass --url to send to one you know", code=1)
    return list(found)


def submit(
    bundle_dir: Annotated[
        Path, typer.Argument(help="Directory with architecture.py, training.py [, prism.toml].")
    ],
    url: Annotated[
        str | None,
        typer.Option("--url", help="Send to this validator only (default: every validator "
                     "with a permit and a published address)."),
    ] = None,
    wallet_name: WalletNameOption = None,
    wallet_hotkey: WalletHotkeyOption = None,
    wallet_path: WalletPathOption = None,
    netuid: NetuidOption = None,
    network: NetworkOption = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow each submission until it is final.")
    ] = False,
    wait_timeout: Annotated[
        float, typer.Option("--wait-timeout", help="Seconds --wait follows one at most.")
    ] = 7200.0,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between status polls.")] = 5.0,
    hotkey: Annotated[str | None, typer.Option("--hotkey", hidden=True)] = None,
    config: ConfigOption = None,
) -> None:
    """Commit a bundle with your hotkey and submit it to the subnet's validators."""
    if hotkey is not None:  # what a miner types first; the wallet signs, so it names a key
        fail(f"prism submit signs with a hotkey of your wallet: give its name with "
             f"--wallet-hotkey NAME (and --wallet NAME), not --hotkey {hotkey!r}")
    import bittensor

    from prism_challenge.chain.factory import connect
    from prism_challenge.chain.metagraph import MetagraphFileError
    from prism_challenge.chain.online import CommitmentRefused
    from prism_challenge.chain.subtensor import ChainUnavailable
    from prism_challenge.submit import WalletError, load_wallet

    settings = with_chain_flags(settings_from(config), netuid=netuid, network=network,
                                wallet_name=wallet_name, wallet_hotkey=wallet_hotkey,
                                wallet_path=wallet_path)
    try:
        bundle = Bundle.from_dir(bundle_dir)
    except BundleError as exc:
        fail(f"bundle refused before upload [{exc.rule}]: {exc}")
    _static_gates(bundle)
    try:
        wallet = load_wallet(settings.wallet.name, settings.wallet.hotkey, settings.wallet.path)
    except WalletError as exc:
        fail(str(exc))
    try:
        chain = connect(settings)
    except MetagraphFileError as exc:
        fail(str(exc))
    typer.echo(chain_line(settings, chain.head()))
    try:
        _commit(chain, wallet, bundle)
        targets = _targets(chain, url, settings.chain.netuid)
    except ChainUnavailable as exc:
        fail(f"the chain cannot be reached: {exc}", code=1)
    except CommitmentRefused as exc:  # the chain's refusal (not registered, quota)
        fail(str(exc), code=1)
    except bittensor.BittensorError as exc:
        fail(f"the commitment was refused: {exc}", code=1)
    finally:
        chain.close()
    accepted = _upload(bundle, wallet, targets)
    if accepted and wait:
        finals = [_follow(client, receipt, poll, wait_timeout) for client, receipt in accepted]
    else:
        finals = []
    for client, _ in accepted:
        client.close()
    if len(accepted) < len(targets) or any(status != "scored" for status in finals):
        raise typer.Exit(1)


def _upload(bundle: Bundle, wallet, targets: list[Endpoint | str]
            ) -> list[tuple[SubmissionClient, Receipt]]:
    from prism_challenge.submit import SubmissionClient, SubmitError

    accepted = []
    for target in targets:
        base, receiver = (target, None) if isinstance(target, str) else (target.url,
                                                                          target.hotkey)
        client = SubmissionClient(base, signer=wallet, receiver=receiver)
        try:
            receipt = client.submit(bundle)
        except SubmitError as exc:
            typer.echo(f"{base}: refused: {exc}", err=True)
            client.close()
            continue
        verb = "was already submitted as" if receipt.idempotent else "accepted as"
        typer.echo(f"{base}: bundle {receipt.digest[:16]} {verb} submission {receipt.id} "
                   f"(status {receipt.status}, block {receipt.block}, hotkey {receipt.hotkey})")
        if not accepted:
            _print_brief(client, receipt.hotkey)
        accepted.append((client, receipt))
    return accepted


def _print_brief(client: SubmissionClient, hotkey: str) -> None:
    from prism_challenge.submit import SubmitError

    try:
        brief = client.program_brief(hotkey=hotkey)
    except SubmitError as exc:
        typer.echo(f"(the research brief could not be fetched: {exc})")
        return
    if brief:
        typer.echo("\n--- the validator's research brief (program.md) ---\n" + brief)


def _follow(client: SubmissionClient, receipt: Receipt, poll: float, timeout: float) -> str:
    from prism_challenge.submit import SubmitError

    try:
        final = client.wait(receipt.id, poll_s=poll, timeout_s=timeout,
                            on_change=lambda view: typer.echo(
                                f"{client.base_url}: {_describe(view)}"))
    except SubmitError as exc:
        typer.echo(f"{client.base_url}: {exc}", err=True)
        return "unknown"
    return final.status
