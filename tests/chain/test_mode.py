"""Which chain a node is on is explicit: production refuses every local-only setting by name,
a network bittensor does not know is refused where the node goes online, and chain flags
switch the node online."""

from __future__ import annotations

import subprocess
import sys

import pytest

from prism_challenge.cli.common import chain_line, with_chain_flags
from prism_challenge.config import Settings


def test_production_names_each_unsafe_setting():
    with pytest.raises(ValueError) as info:
        Settings(mode="production", chain={"allow_any_hotkey": True,
                                           "metagraph_file": "m.json"},
                 sandbox={"backend": "none"})
    text = str(info.value)
    for needle in ("chain.mode 'local'", "chain.allow_any_hotkey true",
                   "chain.metagraph_file", "sandbox.backend 'none'"):
        assert needle in text


def test_production_online_with_defaults_is_accepted():
    s = Settings(mode="production", chain={"mode": "online", "network": "test"})
    assert s.unsafe_on_a_network() == []
    assert Settings().unsafe_on_a_network()[0].startswith("chain.mode 'local'")


def test_unknown_network_in_the_config_is_refused_where_it_is_used():
    with pytest.raises(ValueError, match="unknown network 'testnet': use one of archive"):
        Settings(chain={"mode": "online", "network": "testnet"})
    # a local node never connects: its settings load without bittensor (most of a second)
    probe = ("import sys; from prism_challenge.config import Settings; "
             "s = Settings(chain={'network': 'testnet'}); "
             "print(s.chain.network, 'bittensor' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["testnet", "False"], done.stderr[-2000:]


def test_network_flag_switches_online_and_off_any_hotkey():
    base = Settings()
    assert (base.chain.mode, base.chain.allow_any_hotkey) == ("local", True)
    online = with_chain_flags(base, network="test", netuid=5)
    assert (online.chain.mode, online.chain.allow_any_hotkey) == ("online", False)
    assert (online.chain.network, online.chain.netuid) == ("test", 5)
    assert chain_line(online, 123) == (
        "chain: test (wss://test.finney.opentensor.ai:443), netuid 5, block 123")
    local = with_chain_flags(base, netuid=5)  # a netuid alone picks the ledger's subnet
    assert local.chain.mode == "local"
    assert chain_line(local, None).startswith("chain: LOCAL ledger prism-data/local-chain.db")


def test_published_address_follows_port_and_external_ip():
    base = Settings(chain={"serve_address": "203.0.113.7:8000"})
    assert with_chain_flags(base, port=9100).chain.serve_address == "203.0.113.7:9100"
    moved = with_chain_flags(base, external_ip="198.51.100.4")
    assert moved.chain.serve_address == "198.51.100.4:8000"
    assert with_chain_flags(Settings(), port=9100).chain.serve_address is None
    assert with_chain_flags(Settings(), external_ip="2001:db8::1", port=9100
                            ).chain.serve_address == "[2001:db8::1]:9100"


def test_operator_habit_flags_are_accepted():
    import typer
    from typer.testing import CliRunner

    from prism_challenge.cli.app import app

    command = typer.main.get_command(app).commands["validator"]
    text = " ".join(opt for param in command.params for opt in param.opts)
    for flag in ("--axon.port", "--axon.external_ip", "--logging.debug",
                 "--subtensor.chain_endpoint", "--subtensor.network"):
        assert flag in text, flag
    bad = CliRunner().invoke(app, ["validator", "--axon.external_ip", "example.org"])
    assert bad.exit_code == 2
    assert "chain.serve_address must be ip:port" in " ".join(bad.output.split())


def test_program_online_reads_the_block_or_says_why_not(tmp_path):
    from typer.testing import CliRunner

    from prism_challenge.cli.app import app

    env = {"PRISM_CHAIN__MODE": "online", "PRISM_CHAIN__NETWORK": "ws://127.0.0.1:9",
           "PRISM_CHAIN__TIMEOUT_S": "5",
           "PRISM_STORAGE__URL": f"sqlite:///{tmp_path / 'prism.db'}"}
    miner = "5EsNLFaGe9XK5LzWH3i6eC2Wqv6YqZS1442N1C4yeSdP6uxy"  # an SS58 hotkey
    done = CliRunner().invoke(app, ["program", "--hotkey", miner], env=env)
    text = " ".join(done.output.split())
    assert done.exit_code == 2, text
    assert "cannot read the chain block of netuid 1 on ws://127.0.0.1:9" in text
    assert "make_metagraph" not in text and done.exception is None or isinstance(
        done.exception, SystemExit)
