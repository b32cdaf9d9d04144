"""Loading a bittensor wallet whose hotkey signs (--wallet, --wallet-hotkey, --wallet-path)."""

from __future__ import annotations

from pathlib import Path

import bittensor


class WalletError(ValueError):
    """The hotkey cannot be loaded; the message says where it was looked for and why."""


def load_wallet(name: str, hotkey: str, path: str | Path) -> bittensor.Wallet:
    """The wallet, with its hotkey already loaded (so a missing key fails here, clearly)."""
    wallet = bittensor.Wallet(name=name, hotkey=hotkey, path=str(Path(path).expanduser()))
    try:
        wallet.hotkey  # noqa: B018 - loading is the check
    except FileNotFoundError as exc:
        raise WalletError(
            f"no hotkey '{hotkey}' in wallet '{name}' under {path} ({exc}); create one with "
            f"`btcli wallet new-hotkey --wallet {name} --wallet-hotkey {hotkey}`"
        ) from None
    except Exception as exc:  # bittensor's keyfile errors (unreadable, bad password, corrupt)
        raise WalletError(f"cannot load hotkey '{hotkey}' of wallet '{name}': {exc}") from None
    return wallet
