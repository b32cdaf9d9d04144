"""`prism submit`'s wallet loader names the btcli command that creates what is missing: the
coldkey first where the wallet has none, the hotkey alone where only it is missing; real
bittensor wallets (intake_kit's make_wallet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from intake_kit import make_wallet

from prism_challenge.submit import WalletError, load_wallet


def test_a_wallet_without_coldkey_or_hotkey_names_new_coldkey_first(tmp_path):
    with pytest.raises(WalletError) as caught:
        load_wallet("nobody", "default", tmp_path)
    said = str(caught.value)
    assert said.index("btcli wallet new-coldkey --wallet nobody") < said.index(
        "btcli wallet new-hotkey --wallet nobody --wallet-hotkey default")
    assert "\n" not in said


def test_a_wallet_with_its_coldkey_names_only_new_hotkey_with_its_wallet_path(tmp_path):
    """Outside btcli's default folder the command carries --wallet-path: without it btcli
    would look for the wallet's coldkey in its default folder."""
    make_wallet(tmp_path, "miner")
    with pytest.raises(WalletError) as caught:
        load_wallet("miner", "spare", tmp_path)
    assert str(caught.value) == (
        f"no hotkey 'spare' in wallet 'miner' under {tmp_path} (keyfile at "
        f"'{tmp_path}/miner/hotkeys/spare' does not exist); create one with `btcli wallet "
        f"new-hotkey --wallet miner --wallet-hotkey spare --wallet-path {tmp_path}`")


def test_a_missing_hotkey_under_the_default_path_names_new_hotkey_without_a_path(
        tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    make_wallet(tmp_path / ".bittensor" / "wallets", "miner")
    with pytest.raises(WalletError) as caught:
        load_wallet("miner", "spare", "~/.bittensor/wallets")
    assert str(caught.value) == (
        "no hotkey 'spare' in wallet 'miner' under ~/.bittensor/wallets (keyfile at "
        f"'{tmp_path}/.bittensor/wallets/miner/hotkeys/spare' does not exist); create one with "
        "`btcli wallet new-hotkey --wallet miner --wallet-hotkey spare`")


def test_a_hotkey_without_its_coldkey_on_this_machine_still_signs(tmp_path):
    """A miner keeps the coldkey elsewhere: the hotkey is all `prism submit` needs."""
    made = make_wallet(tmp_path, "hot")
    for keyfile in (made.coldkey_file, made.coldkeypub_file):
        Path(keyfile.path).unlink()
    wallet = load_wallet("hot", "default", tmp_path)
    assert wallet.hotkey.ss58_address == made.hotkey.ss58_address


def test_the_default_wallet_path_is_left_out_of_the_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(WalletError) as caught:
        load_wallet("nobody", "default", "~/.bittensor/wallets")
    assert "--wallet-path" not in str(caught.value)
    assert "`btcli wallet new-coldkey --wallet nobody`" in str(caught.value)
