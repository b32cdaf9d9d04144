"""Honest bundles stay eligible and verified: every honest design whose replay could
plausibly differ from its original (another optimiser, dropout's RNG, bf16 autocast with
gradient accumulation, MoE routing, a recurrent and a convolutional mixer) is replayed,
reproduced exactly on the CPU, and agrees at every probed position.

The baseline's replay is checked the same way by the miners' guide test
(tests/miner/test_docs_commands.py runs `prism eval examples/baseline` as written). The other
honest bundles (plain GPT, MLP mixer, the small-batch and conv-mixer examples) are trained and
screened for causality by tests/gates/test_honest_corpus.py and run end to end by the miner
CLI tests; replaying them here too would add minutes and no new kind of state."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_kit import digest_of, tiny_settings

from prism_challenge.scoring import score_record
from prism_challenge.verification.verdict import verdict

ROOT = Path(__file__).resolve().parents[2]
HONEST = ROOT / "tests" / "fixtures" / "honest"
BUNDLES = [ROOT / "examples" / "muon"] + [
    HONEST / name for name in ("gpt_dropout", "grad_accum_bf16", "moe", "lstm", "causal_conv")]


@pytest.fixture(scope="module")
def honest_runner(make_runner):
    settings = tiny_settings()
    settings = settings.model_copy(update={
        "scoring": settings.scoring.model_copy(update={"heldout_positions": 128}),
        "verification": settings.verification.model_copy(update={"snapshot_steps": 1}),
    })
    return make_runner(settings)


@pytest.mark.parametrize("path", BUNDLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_honest_bundle_is_eligible_and_its_replay_verifies_it(path, honest_runner, tmp_path):
    files = {n: (path / n).read_bytes() for n in ("architecture.py", "training.py")}
    record = honest_runner.run(files, digest_of(files), tmp_path / "run")
    assert record.exit_reason == "ok", record.exit_detail
    score = score_record(record, honest_runner.settings.scoring)
    assert score.eligible, score.reasons
    replay = honest_runner.replay(files, record, tmp_path / "replay")
    check = verdict(replay, honest_runner.settings.verification)
    assert check.passed, check.reasons
    assert replay.batch_max_rel_diff == 0.0  # deterministic on the CPU: the same score again
    assert replay.probes.compared > 0 and replay.probes.mismatched == 0
    assert replay.snapshots.compared > 0 and replay.snapshots.mismatched == 0
