"""`prism eval`'s progress lines and `--compare` arithmetic, without a sandbox: the phases
as the runner reports them, and held-out differences paired on the same plan rows."""

from __future__ import annotations

import io
import math
import threading

import numpy as np
import pytest
from miner_kit import copy_example, prism_in_process

from prism_challenge.miner.compare import heldout_difference, load_stored
from prism_challenge.miner.progress import EvalProgress, PhaseState
from prism_challenge.sandbox.heldout import ratio_se
from prism_challenge.sandbox.progress import HELDOUT, TRAINING, RunProgress
from prism_challenge.sandbox.record import EvalResult


class Lines(io.StringIO):
    """A pipe that says when a number of lines has been written."""

    def __init__(self, want: int) -> None:
        super().__init__()
        self.want, self.enough = want, threading.Event()

    def write(self, text: str) -> int:
        n = super().write(text)
        if self.getvalue().count("\n") >= self.want:
            self.enough.set()
        return n


def test_off_a_terminal_each_phase_prints_lines_with_rate_loss_and_eta():
    pipe = Lines(want=6)
    with EvalProgress(pipe, live=False, interval_s=0.05) as progress:
        progress.on_event("training in the sandbox")
        progress.on_progress(RunProgress(TRAINING, 48, 96, "rows", 48 * 32, 5.25, 2))
        progress.on_event("evaluating the final weights (held out)")  # prints training's end
        progress.on_progress(RunProgress(HELDOUT, 128, 256, "positions", 128, 4.5))
        assert pipe.enough.wait(60)  # the heartbeat keeps printing while nothing changes
    lines = pipe.getvalue().splitlines()
    assert lines[0].startswith("[progress +0.0 s] preparing (static gates, data): starting")
    training = [ln for ln in lines if "] training: " in ln]
    assert training and training[0].split("] ", 1)[1].startswith(
        "training: 48/96 rows (50%), 1,536 tokens at ")
    assert "tokens/s, loss 5.250 nats/token (step 2), ETA " in training[0]
    held = [ln for ln in lines if "] held-out evaluation: " in ln]
    assert len(held) >= 2 and "128/256 positions (50%), 128 positions at " in held[-1]
    assert "loss 4.500 nats/token, ETA" in held[-1]


def test_a_phase_without_a_total_and_a_finished_one():
    state = PhaseState(TRAINING, TRAINING)
    state.last = RunProgress(TRAINING, 96, 96, "rows", 3072, None)
    assert state.describe().startswith("training: 96/96 rows (100%), 3,072 tokens at ")
    assert state.describe().endswith("finishing")
    state.last = RunProgress("replay evaluation", 3, None, "tasks", 0)
    assert state.describe() == "training: 3 tasks"


@pytest.mark.parametrize("bad", [0.0, 10.5])
def test_the_interval_is_bounded(bad, tiny_config, tmp_path):
    with pytest.raises(ValueError, match=r"progress interval must be in \(0, 10\] s"):
        EvalProgress(io.StringIO(), live=False, interval_s=bad)
    res = prism_in_process("eval", str(copy_example("baseline", tmp_path / "b")), "-c",
                           str(tiny_config), "--progress-every", str(bad))
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"error: --progress-every must be more than 0 and at most 10 seconds, not {bad:g}"]


def _eval(bits, nbytes, *, commit="c" * 64, se=None) -> EvalResult:
    bits, nbytes = np.asarray(bits, float), np.asarray(nbytes)
    return EvalResult(val_bpb_trained=float(bits.sum() / nbytes.sum()),
                      val_bpb_trained_se=se if se is not None else ratio_se(bits, nbytes),
                      val_row_bits=list(bits), val_row_bytes=[int(b) for b in nbytes],
                      heldout_round="local", heldout_commit=commit,
                      uniform_nats_per_token=math.log(256))


def test_the_held_out_difference_is_paired_on_the_same_plan():
    nbytes = [100, 120, 80, 100]
    a = _eval([205.1, 250.9, 164.0, 190.0], nbytes)
    b = _eval([200.0, 245.0, 160.0, 185.0], nbytes)
    d = heldout_difference(a, b)
    assert d.how == "paired over 4 rows of the same held-out plan"
    assert d.value == pytest.approx(a.val_bpb_trained - b.val_bpb_trained)
    diffs = np.array([5.1, 5.9, 4.0, 5.0])
    assert d.se == pytest.approx(ratio_se(diffs, np.array(nbytes, float)))
    # the rows move together: the paired SE is far below the two SEs combined
    assert d.se < 0.2 * math.hypot(a.val_bpb_trained_se, b.val_bpb_trained_se)


def test_other_plans_fall_back_to_the_unpaired_difference():
    a = _eval([210.0, 250.0], [100, 120], se=0.03)
    b = _eval([200.0, 245.0], [100, 120], commit="d" * 64, se=0.04)
    d = heldout_difference(a, b)
    assert d.how == "unpaired: the runs used different held-out plans"
    assert d.se == pytest.approx(0.05)
    assert heldout_difference(a, None) is None


def test_a_stored_reference_that_cannot_be_read_says_how_to_remake_it(tmp_path):
    (tmp_path / "record.json").write_text("{}")
    (tmp_path / "score.json").write_text("{}")
    with pytest.raises(ValueError) as err:
        load_stored(tmp_path)
    assert str(err.value) == (f"{tmp_path} does not hold a readable prism eval output "
                              f"(ValidationError); run `prism eval BUNDLE --out {tmp_path}` "
                              "again")
