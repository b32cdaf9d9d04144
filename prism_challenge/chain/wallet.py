"""Loading a bittensor wallet whose hotkey signs (--wallet, --wallet-hotkey, --wallet-path)."""

from __future__ import annotations

from pathlib import Path

import bittensor


class WalletError(ValueError):
    """The hotkey cannot be loaded; the message says where it was looked for and why."""


DEFAULT_PATH = "~/.bittensor/wallets"  # btcli's, and WalletSettings.path's default


def load_wallet(name: str, hotkey: str, path: str | Path) -> bittensor.Wallet:
    """The wallet, with its hotkey already loaded (so a missing key fails here, clearly).
    Where neither key exists the btcli command for the coldkey comes first: a hotkey is made
    under a coldkey, so `btcli wallet new-hotkey` alone fails there. A wallet outside btcli's
    default folder gets `--wallet-path` in every command named (without it btcli works in
    that default folder, where this wallet is not)."""
    wallet = bittensor.Wallet(name=name, hotkey=hotkey, path=str(Path(path).expanduser()))
    where = "" if str(path) == DEFAULT_PATH else f" --wallet-path {path}"
    no_coldkey = not (wallet.coldkey_file.exists_on_device()
                      or wallet.coldkeypub_file.exists_on_device())
    if no_coldkey and not wallet.hotkey_file.exists_on_device():
        raise WalletError(
            f"no wallet '{name}' under {path} (neither its coldkey nor its hotkey "
            f"'{hotkey}'); create the coldkey first with `btcli wallet new-coldkey --wallet "
            f"{name}{where}`, then the hotkey with `btcli wallet new-hotkey --wallet {name} "
            f"--wallet-hotkey {hotkey}{where}`")
    try:
        wallet.hotkey  # noqa: B018 - loading is the check
    except FileNotFoundError as exc:
        raise WalletError(
            f"no hotkey '{hotkey}' in wallet '{name}' under {path} ({exc}); create one with "
            f"`btcli wallet new-hotkey --wallet {name} --wallet-hotkey {hotkey}{where}`"
        ) from None
    except Exception as exc:  # bittensor's keyfile errors (unreadable, bad password, corrupt)
        raise WalletError(f"cannot load hotkey '{hotkey}' of wallet '{name}': {exc}") from None
    return wallet
