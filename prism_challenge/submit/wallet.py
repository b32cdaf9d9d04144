"""Loading the miner's hotkey from a bittensor wallet (--wallet.name/.hotkey/.path)."""

from __future__ import annotations

from pathlib import Path

from prism_challenge.intake.signing import Signer


class WalletError(ValueError):
    """The hotkey cannot be loaded; the message says where it was looked for and why."""


def load_hotkey(name: str, hotkey: str, path: str | Path) -> Signer:
    import bittensor

    wallet = bittensor.Wallet(name=name, hotkey=hotkey, path=str(Path(path).expanduser()))
    try:
        return wallet.hotkey
    except FileNotFoundError as exc:
        raise WalletError(
            f"no hotkey '{hotkey}' in wallet '{name}' under {path} ({exc}); create one with "
            f"`btcli wallet new_hotkey --wallet.name {name} --wallet.hotkey {hotkey}`"
        ) from None
    except Exception as exc:  # bittensor's keyfile errors (unreadable, bad password, corrupt)
        raise WalletError(f"cannot load hotkey '{hotkey}' of wallet '{name}': {exc}") from None
