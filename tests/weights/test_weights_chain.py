"""The two locks in front of on-chain weight setting (the setter itself: tests/chain)."""

import pytest

from prism_challenge.config.settings import Settings
from prism_challenge.weights.chain import WeightsLocked, check_unlocked


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
        check_unlocked(settings, confirm=confirm)


def test_both_locks_open_online_passes():
    check_unlocked(Settings(weights={"dry_run": False}, chain={"mode": "online"}), confirm=True)
