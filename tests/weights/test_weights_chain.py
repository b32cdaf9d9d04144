import pytest
from weights_entries import entry

from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.weights import WeightsLocked, build_plan, set_on_chain


def _plan(settings):
    return build_plan([entry(1, "hk", 1.0)], StaticMetagraph.of(["hk"]), settings)


@pytest.mark.parametrize(
    ("settings", "confirm", "message"),
    [
        (Settings(), False, "--set"),
        (Settings(), True, "dry_run is true"),
        (Settings(weights={"dry_run": False}), True, "chain.mode is 'local'"),
    ],
)
def test_setting_weights_needs_every_lock_open(settings, confirm, message):
    with pytest.raises(WeightsLocked, match=message):
        set_on_chain(_plan(settings), settings, confirm=confirm)


def test_an_empty_vector_is_never_sent():
    settings = Settings(weights={"dry_run": False}, chain={"mode": "online"})
    plan = _plan(settings).model_copy(update={"uids": [], "weights_u16": []})
    with pytest.raises(WeightsLocked, match="empty vector"):
        set_on_chain(plan, settings, confirm=True)
