"""`prism eval`'s progress lines and `--compare` arithmetic, without a sandbox: the phases
as the runner reports them, and held-out differences paired on the same plan rows."""

from __future__ import annotations

import io
import math
import re
import threading

import numpy as np
import pytest
from miner_kit import copy_example, prism_in_process
from rich.console import Console

from prism_challenge.miner.compare import Side, heldout_difference, load_stored, print_comparison
from prism_challenge.miner.progress import EvalProgress, PhaseState
from prism_challenge.sandbox.heldout import ratio_se
from prism_challenge.sandbox.progress import HELDOUT, TRAINING, RunProgress
from prism_challenge.sandbox.record import EvalResult, RunRecord
from prism_challenge.scoring import ScoreResult


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
        progress.on_progress(RunProgress(TRAINING, 0, 96, "rows", 0))  # still starting
        progress.on_progress(RunProgress(TRAINING, 16, 96, "rows", 16 * 32, 5.5, 0))
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
    # one report that moved: no rate and no ETA yet, only what is known
    assert len(held) >= 2 and held[-1].endswith(
        "held-out evaluation: 128/256 positions (50%), 128 positions, loss 4.500 nats/token")


def test_a_phase_without_a_total_and_a_finished_one():
    state = PhaseState(TRAINING, TRAINING)
    state.update(RunProgress(TRAINING, 0, 96, "rows", 0))
    assert state.describe() == "training: starting (0 s)"  # the sandbox is starting
    state.update(RunProgress(TRAINING, 96, 96, "rows", 3072, None))
    # one report that moved: no rate yet (the start-up is not a rate), and nothing left
    assert state.describe() == "training: 96/96 rows (100%), 3,072 tokens, finishing"
    state.update(RunProgress("replay evaluation", 3, None, "tasks", 0))
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


def _record(bpb_rows: list[float], *, budget_tokens: int = 3072, train_s: float = 6.0):
    nbytes = [100] * len(bpb_rows)
    return RunRecord.model_validate({
        "digest": "d" * 64, "corpus": "demo", "manifest_sha256": "f" * 64, "vocab_size": 256,
        "seq_len": 32, "param_cap": 10**6, "exit_reason": "ok", "train_s": train_s,
        "budget": {"rows": 96, "tokens": budget_tokens, "scored_tokens": 3000, "bytes": 9000},
        "consumed": {"rows": 96, "scored_tokens": 3000, "bytes": 9000, "nats": 1.0},
        "batches": [],
        "eval": _eval([b * 100 for b in bpb_rows], nbytes).model_dump(),
    })


def _score(bpb: float) -> ScoreResult:
    return ScoreResult(bpb=bpb, prequential_bpb=bpb, uniform_bpb=8.0, tail_bpb=bpb,
                       heldout_delta=0.4, gap=0.0, penalty=0.0, eligible=True, reasons=[], notes=[],
                       unconsumed_tokens=0, exit_reason="ok")


def test_the_comparison_table_and_its_difference_line():
    console = Console(file=io.StringIO(), width=240, color_system=None)
    mine = Side("[bold]mine", _record([2.40, 2.52, 2.31, 2.45]), _score(2.70), True)
    ref = Side("baseline (stored)", _record([2.50, 2.60, 2.40, 2.55], train_s=12.0),
               _score(2.80), True)
    held = print_comparison(console, mine, ref)
    text = console.file.getvalue()
    assert "[bold]mine" in text  # a bundle name is printed as written
    assert re.search(r"prequential bpb \(same stream: no sampling error\)\s+│ 2\.7000\s+│ "
                     r"2\.8000\s+│ -0\.1000", text)
    assert re.search(r"training tokens/s\s+│ 500\s+│ 250\s+│ x2\.00", text)
    assert held.value == pytest.approx(-0.0925)
    assert f"held-out difference: -0.0925 ± {held.se:.4f} bpb (paired over 4 rows of the " \
           "same held-out plan, " in text
    assert "not like for like" not in text
    other = Side("other", _record([2.5] * 4, budget_tokens=6144), _score(2.8), False)
    print_comparison(console, mine, other)
    assert "WARNING not like for like: other token budgets (3,072 vs 6,144)" in \
        console.file.getvalue()
