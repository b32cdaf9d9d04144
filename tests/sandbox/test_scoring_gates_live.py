"""docs/security.md B: score games are caught, on records made by real runs (tampering with the
record is caught by the contender replay: tests/verification/test_verification.py)."""

from __future__ import annotations

import numpy as np
from sandbox_kit import bundle

from prism_challenge.data import TokenStream
from prism_challenge.scoring import score_record


def _reasons(runner, record) -> str:
    result = score_record(record, runner.settings.scoring)
    assert not result.eligible
    return " | ".join(result.reasons)


def test_non_causal_model_is_caught_by_the_probe(runner, run):
    record = run(bundle("noncausal"))
    assert record.exit_reason == "ok"
    assert not record.eval.probe_trained.ok and not record.eval.probe_twin.ok
    assert "causal" in _reasons(runner, record)


def test_smuggled_statistics_trip_the_step0_check(runner, run, prepared_data):
    train = TokenStream.open(prepared_data, "train")
    tokens = train.rows(32, 0, train.n_rows(32))[:, 1:].ravel()
    counts = np.bincount(tokens, minlength=train.manifest.vocab_size) + 1
    prior = np.log(counts / counts.sum()).round(3).tolist()
    record = run(bundle("smuggle", LOG_PRIOR=repr(prior)))
    assert record.exit_reason == "ok"
    recorded0 = float(record.columns.nats[0] / record.columns.tokens[0])
    assert recorded0 < 0.9 * record.eval.twin_step0_nats_per_token
    assert "step0" in _reasons(runner, record)
