"""What is scored is out of the model's reach: a forward that writes into its input_ids
changes neither the scored targets nor the record's losses, and is a contract error that
sticks even when `train` swallows it."""

from __future__ import annotations

import math

import pytest
from sandbox_kit import bundle

from prism_challenge.scoring import score_record


@pytest.mark.parametrize("catch", ["0", "1"])
def test_a_target_rewriting_model_gets_a_contract_error_and_no_gain(run, runner, catch):
    record = run(bundle("rewrite", CATCH=catch))
    assert record.exit_reason == "contract", record.exit_detail
    assert "changed its input_ids in place during the forward of step 0" in record.exit_detail
    assert "input_ids.clone()" in record.exit_detail
    # the scored batches used the private targets: losses stay near a model that knows
    # little (ln vocab is what a know-nothing model pays), not the ~0 of a rewrite
    assert record.summary.count, "the steps before the error are recorded"
    per_token = record.summary.nats / record.summary.tokens
    assert per_token > 0.5 * math.log(record.vocab_size)
    assert not score_record(record, runner.settings.scoring).eligible


def test_an_honest_model_that_edits_a_copy_is_fine(run):
    files = bundle("rewrite")
    files["architecture.py"] = files["architecture.py"].replace(
        b"        with torch.no_grad():\n            input_ids[:, 1:]",
        b"        input_ids = input_ids.clone()\n        with torch.no_grad():\n"
        b"            input_ids[:, 1:]")
    record = run(files)
    assert record.exit_reason == "ok", record.exit_detail
