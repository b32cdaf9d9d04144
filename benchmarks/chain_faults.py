#!/usr/bin/env python3
"""A validator's weights against the strict fake chain under faults: do they still land?

    .venv/bin/python benchmarks/chain_faults.py [--epochs 60] [--seed 1] [--smoke]

The real `ChainClient` (bittensor 11's async client, the library's SetWeights intent) and
`WeightSetter` run against `tests/fake_substrate.py`, which refuses what the pallet
refuses (rate limit, version key, max weight, min allowed weights) and models nonces per
connection. Each epoch the head advances 25 blocks (tempo and rate limit: 100) and the
setter offers a plan; on a random third of the epochs one fault is injected before the
offer: the write is dropped from the pool (times out, nonce unused), the write lands but
its answer is lost, the submit fails with a bare connection error, or a read fails.
The chain's finalized head trails the best one by 3 blocks. After each offer two miners
commit in consecutive best blocks; validator A reads their commitments at once, then (on a
random half of the epochs) a reorg replaces those blocks in the opposite order, the head
moves past finality and validator B reads. A read that names a block other than the one
the final chain holds is a wrong precedence. Validator A also keeps its intake address
published while its port changes every 7 epochs, under the serving rate limit (50 blocks).
Printed: how many tempo windows allowed a set and how many got one, how many writes were
signed with a nonce the chain could never accept (a jammed client), and the wrong
precedences. `--smoke`: 8 epochs.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the fake chain and its wallets are test kits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="8 epochs")
    args = parser.parse_args()
    epochs = 8 if args.smoke else args.epochs

    import tempfile

    import bittensor
    from chain_kit import make_wallet  # a real keyfile wallet
    from fake_substrate import FakeSubstrate, Neuron

    from prism_challenge.chain.metagraph import LiveMetagraph
    from prism_challenge.chain.online import OnlineSubnet
    from prism_challenge.chain.subnet import commitment_value
    from prism_challenge.chain.subtensor import ChainClient
    from prism_challenge.config.settings import Settings
    from prism_challenge.weights.chain import WeightSetter
    from prism_challenge.weights.plan import WeightPlan

    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp())
    wallet = make_wallet(root, "validator")
    miners = [make_wallet(root, "miner"), make_wallet(root, "rival")]
    fake = FakeSubstrate(netuid=7, finality_lag=3, neurons=[
        Neuron("5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM"),
        Neuron(wallet.hotkey.ss58_address, permit=True, last_update=0),
        Neuron("5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"),
        *(Neuron(m.hotkey.ss58_address) for m in miners),
    ])
    fake.hyper.update({"Tempo": 100, "WeightsSetRateLimit": 100, "MaxWeightsLimit": 32768})
    settings = Settings(chain={"mode": "online", "netuid": 7, "retries": 3},
                        weights={"dry_run": False})
    client = ChainClient("local", 7, timeout_s=0.2, substrate=fake)
    view = LiveMetagraph(client, refresh_blocks=1, status=None)
    view.refresh(force=True)
    setter = WeightSetter(client, wallet, settings, sleep=lambda s: None)
    writer = ChainClient("local", 7, timeout_s=1.0, substrate=fake)  # the miners' client
    validator_a = OnlineSubnet(client, view, min_read_interval_s=0.0)
    view_b = LiveMetagraph(ChainClient("local", 7, timeout_s=1.0, substrate=fake),
                           refresh_blocks=1, status=None)
    view_b.refresh(force=True)
    validator_b = OnlineSubnet(view_b._client, view_b, min_read_interval_s=0.0)
    wrong = reorgs = serve_refused = 0
    plan = WeightPlan(netuid=7, block=None, corpus="demo", dry_run=False, leader=None,
                      uids=[0, 2], weights_u16=[7282, 65535], rows=[], excluded=[])
    faults = ("drop", "lose", "bare", "read")
    allowed = landed = 0
    window_open = True
    for epoch in range(epochs):
        fake.block += 25
        view.refresh(force=True)
        last = fake.neurons[1].last_update
        window_open = last == 0 or fake.block - last >= 100
        if rng.random() < 1 / 3:
            fault = rng.choice(faults)
            if fault == "drop":
                fake.drop = 1
            elif fault == "lose":
                fake.lose = 1
            elif fault == "bare":
                fake.raise_next = bittensor.ChainError("Connection closed during submit")
            else:
                fake.raise_next = bittensor.ChainError("RPC error: state already discarded")
        setter.offer(plan, view)
        fake.raise_next, fake.drop, fake.lose = None, 0, 0
        allowed += window_open
        landed += window_open and fake.neurons[1].last_update == fake.block

        # The intake address follows a port that changes every 7 epochs.
        try:
            validator_a.serve(wallet, "10.0.0.1", 8000 + epoch // 7)
        except bittensor.ChainError:
            serve_refused += 1

        # Two commitments in consecutive best blocks; a reorg may swap them.
        first, second = rng.sample(miners, 2)
        values = {}
        for miner in (first, second):
            fake.block += 1
            hotkey = miner.hotkey.ss58_address
            values[hotkey] = commitment_value(hotkey, f"{epoch:064x}")
            writer.set_commitment(miner, values[hotkey])
        seen = [validator_a.latest_commitment(hk) for hk in values]  # before finality
        if rng.random() < 0.5:
            fake.reorg()
            reorgs += 1
        fake.block += fake.finality_lag
        view_b.refresh(force=True)
        seen += [validator_b.latest_commitment(hk) for hk in values]
        final = {hk: fake.commitments[hk]["block"] for hk in values}
        wrong += sum(1 for c in seen if c is not None and c.value == values[c.hotkey]
                     and c.block != final[c.hotkey])
        wrong += sum(1 for hk in values  # after finality B must see both, where they are
                     if (c := validator_b.latest_commitment(hk)) is None or c.block != final[hk])
    for c in (client, writer, view_b._client):
        c.close()
    print(f"chain faults: weights landed {landed} of {allowed} epochs allowed, "
          f"stuck nonces {fake.future_signed}, wrong precedence {wrong} ({epochs} epochs, "
          f"seed {args.seed}; {reorgs} reorgs, {len(fake.sent('serve_axon'))} ServeAxon "
          f"sent, {serve_refused} refused by the serving rate limit)")


if __name__ == "__main__":
    main()
