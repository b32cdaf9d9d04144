"""The replay's probe, in process on real models: compact rounds (the cut rows only) for a
model whose rows do not depend on each other and that draws no random numbers, the full
batch for one that draws them (dropout) or depends on the batch's size, and in every case
the scored forward's losses at every asked position; no forward ever holds two copies of
one row or a target it is scored on."""

from __future__ import annotations

from pathlib import Path

import torch

from prism_challenge.sandbox.harness.lm_loss import token_nats
from prism_challenge.sandbox.harness.loading import build_model, load_module
from prism_challenge.sandbox.harness.replay_probe import ReplayProbe

ROOT = Path(__file__).resolve().parents[2]
SEP, VOCAB, T, ROWS = 0, 512, 32, 6
# rows 1 and 4 hold several kept positions (three rounds); rows 0, 2, 5 one, row 3 none
ASKED = {"rows": [0, 1, 1, 1, 2, 4, 4, 5], "positions": [5, 0, 17, 31, 9, 3, 30, 12]}
FULL_ROUNDS = 3 * ROWS  # rows a full-batch probe of ASKED forwards


def _model(folder: Path):
    architecture = load_module(folder / "architecture.py", f"arch_{folder.name}")
    return build_model(architecture, vocab_size=VOCAB, seq_len=T, max_params=10**8, seed=7)


def _batch():
    g = torch.Generator().manual_seed(3)
    rows = torch.randint(1, VOCAB, (ROWS, T + 1), generator=g)
    rows[:, 0] = torch.arange(1, ROWS + 1)  # a row's first token names it
    return rows[:, :-1].clone(), rows[:, 1:]


def _probe_then_score(model, probe=None):
    """What the harness does at a probed step: the probe, then the scored forward under
    the RNG the probe left untouched. Returns (probe losses, scored losses there, probe)."""
    inputs, targets = _batch()
    probe = probe or ReplayProbe(model, model, None, SEP, T)
    torch.manual_seed(11)
    got = probe.losses(model, inputs, targets, ASKED, None)
    model.train()
    with torch.enable_grad():
        scored = token_nats(model(inputs), targets, SEP).detach()
    want = [float(scored[r, p]) for r, p in zip(ASKED["rows"], ASKED["positions"], strict=True)]
    return got, want, probe


def test_a_row_independent_model_is_probed_on_the_cut_rows_only():
    model = _model(ROOT / "examples" / "baseline")
    got, want, probe = _probe_then_score(model)
    assert got == want  # the first probed step is answered both ways; the full batch's
    assert not probe.full_batch and probe.rows_forwarded == len(ASKED["rows"]) + FULL_ROUNDS
    got, want, probe = _probe_then_score(model, probe)
    assert probe.forwards == 3 + 3 + 3  # row 1's three positions: three rounds a time
    assert probe.rows_forwarded == 2 * len(ASKED["rows"]) + FULL_ROUNDS  # 8 rows, not 18
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-4


def test_a_model_that_draws_random_numbers_is_probed_on_the_full_batch_exactly():
    got, want, probe = _probe_then_score(_model(ROOT / "tests/fixtures/honest/gpt_dropout"))
    assert probe.full_batch  # its compact forward drew dropout masks: given up, then full
    assert probe.rows_forwarded == 5 + FULL_ROUNDS  # one compact round, then three full
    assert got == want  # the scored forward's own masks: bit for bit


class BatchSized(torch.nn.Module):
    """Row-independent in content, yet its logits scale with how many rows it is given."""

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids):
        return self.inner(input_ids) * (1.0 + 0.05 * input_ids.shape[0])


def test_a_model_that_depends_on_the_batch_size_is_probed_on_the_full_batch():
    model = BatchSized(_model(ROOT / "examples" / "baseline"))
    got, want, probe = _probe_then_score(model)
    assert probe.full_batch and got == want
    _probe_then_score(model, probe)
    assert probe.rows_forwarded == len(ASKED["rows"]) + 2 * FULL_ROUNDS


def test_a_compiled_forward_keeps_the_batch_shape():
    model = _model(ROOT / "examples" / "baseline")
    inputs, targets = _batch()
    probe = ReplayProbe(model, model, None, SEP, T)
    probe.losses(model, inputs, targets, ASKED, None, compiled=True)
    assert probe.rows_forwarded == FULL_ROUNDS


class Recording(torch.nn.Module):
    """Wraps a model and keeps every input it is given."""

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner = inner
        self.seen: list[torch.Tensor] = []

    def forward(self, input_ids):
        self.seen.append(input_ids.clone())
        return self.inner(input_ids)


def test_no_probe_forward_shows_a_target_it_is_scored_on():
    model = Recording(_model(ROOT / "examples" / "baseline"))
    inputs, _ = _batch()
    _, _, probe = _probe_then_score(model)  # the first step, answered both ways
    model.seen.clear()
    _probe_then_score(model, probe)
    probed = model.seen[:-1]  # the last input is the scored forward's
    assert [len(x) for x in probed] == [5, 2, 1]
    for x in probed:
        sources = [int(row[0]) - 1 for row in x]
        assert len(set(sources)) == len(sources)  # never two copies of one row
        for row, r in zip(x, sources, strict=True):
            kept = int(torch.nonzero(row != SEP).max())  # last token before the filler
            assert torch.equal(row[: kept + 1], inputs[r, : kept + 1])
            assert (row[kept + 1:] == SEP).all()
            assert kept in [p for rr, p in zip(ASKED["rows"], ASKED["positions"], strict=True)
                            if rr == r]
