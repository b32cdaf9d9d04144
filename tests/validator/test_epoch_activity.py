"""A validator without a quorum of peers keeps the weights it last set on chain, and stays
active: the epoch re-sends them before the chain's activity cutoff would count it inactive
(its stake out of consensus, no dividends)."""

from __future__ import annotations

import pytest
from chain_kit import (  # noqa: F401 (fixtures)
    _symbol_cache,
    chain_client,
    chain_wallets,
    fake_chain,
    weight_setter_on,
)

from prism_challenge.agreement.ranking import Ranked
from prism_challenge.config.settings import Settings
from prism_challenge.validator import epochs
from prism_challenge.validator.epochs import run_epoch

SETTINGS = Settings(chain={"mode": "online", "netuid": 7},
                    weights={"dry_run": False, "burn_uid": 0})


@pytest.fixture
def quorum(monkeypatch) -> dict[str, bool]:
    """`quorum["reached"]`: whether the epoch ranks (False: too few peers answer)."""
    state = {"reached": True}

    def ranked(*_args, **_kwargs) -> Ranked:
        if state["reached"]:
            return Ranked([], True, "the aggregate")
        return Ranked([], False, "nothing: no quorum reachable", degraded=True, no_quorum=True)

    monkeypatch.setattr(epochs, "ranked_entries", ranked)
    return state


def test_epochs_without_a_quorum_keep_the_validator_active_past_the_cutoff(
        setter_on, fake, store, quorum):
    # tempo 100, cutoff factor 5.000: inactive 500 blocks after LastUpdate; rate limit 100
    view, setter, _, _ = setter_on(CommitRevealWeightsEnabled=False,
                                   ActivityCutoffFactorMilli=5000)
    fake.block = 1050
    run_epoch(SETTINGS, store, view, None, setter)  # with a quorum: nothing eligible, burned
    assert fake.neurons[1].last_update == 1050 and fake.weights[1] == {0: 65535}
    quorum["reached"] = False
    for block in range(1100, 2101, 50):  # then 1000 blocks without a quorum, an epoch each 50
        fake.block = block
        view.refresh(force=True)
        run_epoch(SETTINGS, store, view, None, setter)
    # sent again at 1350 (300 > 250 blocks after 1050), then at 1650 and 1950
    assert [s.block for s in fake.sent("set_mechanism_weights")] == [1050, 1350, 1650, 1950]
    assert fake.weights[1] == {0: 65535}
    assert [fake.active(fake.epoch_start(b))[1] for b in range(1050, 2101, 50)] == [True] * 22
