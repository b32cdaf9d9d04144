"""The wallet `prism submit` signs with: the chain's loader, with the btcli command that
creates what is missing, the coldkey first where the wallet has none (a hotkey is made
under a coldkey, so `btcli wallet new-hotkey` alone fails there)."""

from __future__ import annotations

from pathlib import Path

import bittensor

from prism_challenge.chain.wallet import WalletError
from prism_challenge.chain.wallet import load_wallet as load_hotkey

DEFAULT_PATH = "~/.bittensor/wallets"  # btcli's, and WalletSettings.path's default


def load_wallet(name: str, hotkey: str, path: str | Path) -> bittensor.Wallet:
    """The wallet with its hotkey loaded; `WalletError` naming the btcli command to run."""
    wallet = bittensor.Wallet(name=name, hotkey=hotkey, path=str(Path(path).expanduser()))
    no_coldkey = not (wallet.coldkey_file.exists_on_device()
                      or wallet.coldkeypub_file.exists_on_device())
    if no_coldkey and not wallet.hotkey_file.exists_on_device():
        where = "" if str(path) == DEFAULT_PATH else f" --wallet-path {path}"
        raise WalletError(
            f"no wallet '{name}' under {path} (neither its coldkey nor its hotkey "
            f"'{hotkey}'); create the coldkey first with `btcli wallet new-coldkey --wallet "
            f"{name}{where}`, then the hotkey with `btcli wallet new-hotkey --wallet {name} "
            f"--wallet-hotkey {hotkey}{where}`")
    return load_hotkey(name, hotkey, path)
