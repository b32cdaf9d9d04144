"""`prism submit`: check a bundle locally, sign it with the miner's hotkey, upload it.

Everything that can be checked before the upload is (bundle rules, wallet), so a miner sees
the same rule ids the validator would answer with, without spending a request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.cli.common import ConfigOption, fail, settings_from


def _describe(view) -> str:  # noqa: ANN001 (an intake.schemas.SubmissionView)
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


def submit(
    bundle_dir: Annotated[
        Path, typer.Argument(help="Directory with architecture.py, training.py [, prism.toml].")
    ],
    url: Annotated[
        str | None,
        typer.Option("--url", help="Validator API base URL (default: intake.host:intake.port)."),
    ] = None,
    wallet_name: Annotated[str | None, typer.Option("--wallet.name", help="Wallet name.")] = None,
    wallet_hotkey: Annotated[
        str | None, typer.Option("--wallet.hotkey", help="Hotkey that signs.")
    ] = None,
    wallet_path: Annotated[
        str | None, typer.Option("--wallet.path", help="Wallets directory.")
    ] = None,
    netuid: Annotated[int | None, typer.Option("--netuid", help="Subnet uid.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the submission until it is final.")
    ] = False,
    wait_timeout: Annotated[
        float, typer.Option("--wait-timeout", help="Seconds --wait follows it at most.")
    ] = 7200.0,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between status polls.")] = 5.0,
    config: ConfigOption = None,
) -> None:
    """Sign a bundle with your hotkey and submit it to a validator; prints the submission id."""
    from prism_challenge.submit import SubmissionClient, SubmitError, WalletError, load_hotkey

    settings = settings_from(config)
    try:
        bundle = Bundle.from_dir(bundle_dir)
    except BundleError as exc:
        fail(f"bundle refused before upload [{exc.rule}]: {exc}")
    try:
        signer = load_hotkey(
            wallet_name or settings.wallet.name,
            wallet_hotkey or settings.wallet.hotkey,
            wallet_path or settings.wallet.path,
        )
    except WalletError as exc:
        fail(str(exc))
    base_url = url or f"http://{settings.intake.host}:{settings.intake.port}"
    chosen_netuid = settings.chain.netuid if netuid is None else netuid
    with SubmissionClient(base_url, netuid=chosen_netuid, signer=signer) as client:
        try:
            receipt = client.submit(bundle)
        except SubmitError as exc:
            fail(f"the validator refused the submission: {exc}", code=1)
        verb = "was already submitted as" if receipt.idempotent else "accepted as"
        typer.echo(
            f"bundle {receipt.digest[:16]} {verb} submission {receipt.id} "
            f"(status {receipt.status}, hotkey {receipt.hotkey})"
        )
        try:
            brief = client.program_brief()
        except SubmitError as exc:
            typer.echo(f"(the research brief could not be fetched: {exc})")
            brief = None
        if brief:
            typer.echo("\n--- the validator's research brief (program.md) ---\n" + brief)
        if not wait:
            return
        try:
            final = client.wait(
                receipt.id,
                poll_s=poll,
                timeout_s=wait_timeout,
                on_change=lambda view: typer.echo(_describe(view)),
            )
        except SubmitError as exc:
            fail(str(exc), code=1)
    if final.status != "scored":
        raise typer.Exit(1)
