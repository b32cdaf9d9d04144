"""`prism submit` is loud about its chain and spends no commitment it need not.

A network flag takes the command online (here: an endpoint nothing listens on, so the
chain cannot be reached), never into the local ledger; an unknown network name is refused
with the valid ones; a bundle the AST policy refuses is refused before the commitment.
"""

from __future__ import annotations

from tests.submit.test_submit_cli import NETUID, prism, wallet_args


def test_network_flag_goes_online_and_never_writes_the_local_ledger(wallets, bundle_dir,
                                                                     tmp_path):
    ledger = tmp_path / "local-chain.db"
    done = prism(str(bundle_dir()), "--network", "ws://127.0.0.1:9", "--netuid", str(NETUID),
                 *wallet_args(wallets["miner"]), ledger=ledger)
    assert done.returncode == 1, done.stderr
    assert f"chain: ws://127.0.0.1:9 (ws://127.0.0.1:9), netuid {NETUID}" in done.stdout
    assert "the chain cannot be reached" in done.stderr
    assert "committed" not in done.stdout
    assert not ledger.exists()


def test_unknown_network_names_the_valid_ones(wallets, bundle_dir, tmp_path):
    done = prism(str(bundle_dir()), "--network", "testnet", *wallet_args(wallets["miner"]),
                 ledger=tmp_path / "local-chain.db")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: unknown network 'testnet': use one of archive, devnet, finney, local, test "
        "or a ws:// / wss:// endpoint")
    assert not (tmp_path / "local-chain.db").exists()


def test_local_ledger_is_named_before_the_commitment(node, wallets, bundle_dir):
    done = prism(str(bundle_dir()), "--url", node.url, "--netuid", str(NETUID),
                 *wallet_args(wallets["miner"]), ledger=node.ledger.path)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert first == (f"chain: LOCAL ledger {node.ledger.path} (not a Bittensor network; pass "
                     f"--network to go online), netuid {NETUID}, block 0")
    assert "committed at block 1" in second


def test_ast_policy_refusal_spends_no_commitment(node, wallets, bundle_dir):
    path = bundle_dir("policy")
    (path / "training.py").write_text(
        "import os\n\n\ndef train(ctx):\n    os.system('true')\n")
    done = prism(str(path), "--url", node.url, "--netuid", str(NETUID),
                 *wallet_args(wallets["miner"]), ledger=node.ledger.path)
    assert done.returncode == 2
    assert "bundle refused before commitment" in done.stderr
    assert "AST-" in done.stderr and "training.py:1" in done.stderr
    assert node.ledger.block == 0 and node.counts() == (0, 0)
