"""Invalid hotkeys: one line with the next step and exit 2, before anything is read or
written (`prism program --hotkey`, `prism submit --hotkey`), and the SS58 check itself."""

from __future__ import annotations

from pathlib import Path

from bittensor.sp_core import Keypair
from typer.testing import CliRunner

from prism_challenge.chain.ss58 import is_ss58
from prism_challenge.cli.app import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "baseline"


def _lines(result) -> list[str]:
    return (result.stderr or result.output).strip().splitlines()


def test_the_ss58_check_accepts_real_keys_and_refuses_near_misses():
    keys = [Keypair.create_from_seed(bytes([i]) * 32).ss58_address for i in range(1, 6)]
    assert all(is_ss58(k) for k in keys)
    flipped = [k[:-1] + ("A" if k[-1] != "A" else "B") for k in keys]  # checksum broken
    assert not any(is_ss58(k) for k in flipped)
    for bad in ("notakey", "", "0" * 48, keys[0] + "x", keys[0][1:], "5" + "l" * 47):
        assert not is_ss58(bad), bad


def test_program_refuses_a_hotkey_that_is_not_ss58_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["program", "--hotkey", "notakey"])
    assert res.exit_code == 2
    assert _lines(res) == ["error: --hotkey 'notakey' is not a hotkey: an SS58 address is 48 "
                           "base58 characters (5F3sa2TJ...); print yours with "
                           "`btcli wallet list`"]
    assert list(tmp_path.iterdir()) == []


def test_submit_with_hotkey_names_the_wallet_flags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["submit", str(EXAMPLE), "--hotkey", "notakey"])
    assert res.exit_code == 2
    assert _lines(res) == ["error: prism submit signs with a hotkey of your wallet: give its "
                           "name with --wallet-hotkey NAME (and --wallet NAME), not --hotkey "
                           "'notakey'"]
    assert list(tmp_path.iterdir()) == []
