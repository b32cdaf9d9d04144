"""A failed replay of a model that keeps state outside its parameters and buffers says so:
that state is what a snapshot cannot restore, so it is the likely cause of the failure."""

from __future__ import annotations

from prism_challenge.config.settings import VerificationSettings
from prism_challenge.verification.replay import CheckedPositions, ReplayRecord
from prism_challenge.verification.verdict import verdict

NOTE = "TinyGPT.calls changed from 0 to 1 between scored steps 0 and 1"


def _replay(mismatched: int, state_outside: list[str]) -> ReplayRecord:
    return ReplayRecord(digest="d" * 64, exit_reason="ok", probe_steps=[0, 1],
                        snapshot_steps=[2], last_step=2, state_outside=state_outside,
                        probes=CheckedPositions(compared=40, mismatched=mismatched),
                        snapshots=CheckedPositions(compared=10, mismatched=mismatched))


def test_a_failed_replay_names_state_kept_outside_parameters_as_the_likely_cause():
    v = verdict(_replay(8, [NOTE, "TinyGPT.seen changed"]), VerificationSettings())
    assert not v.passed and v.reasons[0].startswith("positions: 16 of 50 kept positions")
    assert v.reasons[-1] == (
        "state: the likely cause: the model keeps state outside its parameters and buffers "
        f"({NOTE} (and 1 more)), which a snapshot does not restore and a replay need not "
        "reproduce; model state must live in parameters and buffers: a validator's checks "
        "restore only the state_dict, so keep this in a buffer (self.register_buffer) or "
        "drop it")


def test_no_state_note_without_a_failure_or_without_such_state():
    assert verdict(_replay(0, [NOTE]), VerificationSettings()) == verdict(
        _replay(0, []), VerificationSettings())
    assert verdict(_replay(0, [NOTE]), VerificationSettings()).passed
    failed = verdict(_replay(8, []), VerificationSettings())
    assert not failed.passed and not any(r.startswith("state:") for r in failed.reasons)
