"""A validator without a quorum of peers keeps the weights it last set on chain, and stays
active: the epoch re-sends them before the chain's activity cutoff would count it inactive
(its stake out of consensus, no dividends)."""

from __future__ import annotations

import logging

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


def test_an_owner_holding_no_uid_is_one_line_each_epoch_not_a_crash(
        setter_on, fake, store, quorum, caplog):
    view, setter, _, _ = setter_on(CommitRevealWeightsEnabled=False,
                                   ActivityCutoffFactorMilli=5000)
    fake.owner_hotkey = "5FownerWithoutUid"  # set_sn_owner_hotkey to an unregistered hotkey
    view.refresh(force=True)
    owner = Settings(chain={"mode": "online", "netuid": 7}, weights={"dry_run": False})
    assert owner.weights.burn_uid == "owner"
    fake.block = 1100
    with caplog.at_level(logging.WARNING):
        assert run_epoch(owner, store, view, None, setter) is None
    assert [r.getMessage() for r in caplog.records] == [
        "epoch: no weights plan: weights.burn_uid is 'owner' but the subnet owner's hotkey "
        "5FownerWithoutUid holds no uid on netuid 7: set weights.burn_uid to the uid to burn "
        "to"]
    assert fake.extrinsics == []


def test_an_owner_holding_no_uid_still_keeps_the_validator_active_without_a_quorum(
        setter_on, fake, store, quorum, caplog):
    view, setter, _, _ = setter_on(CommitRevealWeightsEnabled=False,
                                   ActivityCutoffFactorMilli=5000)
    fake.block = 1050
    run_epoch(SETTINGS, store, view, None, setter)  # burned to uid 0 while it was configured
    fake.owner_hotkey = "5FownerWithoutUid"
    owner = Settings(chain={"mode": "online", "netuid": 7}, weights={"dry_run": False})
    quorum["reached"] = False
    with caplog.at_level(logging.WARNING, logger="prism.validator"):
        for block in range(1100, 2101, 50):
            fake.block = block
            view.refresh(force=True)
            assert run_epoch(owner, store, view, None, setter) is None
    assert [s.block for s in fake.sent("set_mechanism_weights")] == [1050, 1350, 1650, 1950]
    assert [fake.active(fake.epoch_start(b))[1] for b in range(1050, 2101, 50)] == [True] * 22
    problems = [r.getMessage() for r in caplog.records if "no weights plan" in r.getMessage()]
    assert len(problems) == 21 and "5FownerWithoutUid holds no uid" in problems[0]
    # the epoch still says what it ranked on (and reports its electorate) before that
    ranking = [r.getMessage() for r in caplog.records if "epoch: ranking on" in r.getMessage()]
    assert ranking == ["epoch: ranking on nothing: no quorum reachable"] * 21
