"""The causality screen itself (sandbox/harness/probe.py), on models small enough to run in
the test process: what it changes in a batch, and which dependence each change exposes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from prism_challenge.sandbox.harness.probe import probe  # noqa: E402

V = 16


class Reads(torch.nn.Module):
    """Logits from the row's own tokens up to each position, plus (when `row` is set) the
    token at the same position of batch row `row`."""

    def __init__(self, row: int | None = None) -> None:
        super().__init__()
        self.row = row
        self.embed = torch.nn.Embedding(V, V)

    def forward(self, x):
        own = self.embed(x).cumsum(dim=1)
        if self.row is None:
            return own
        return own + self.embed(x[self.row]).expand_as(own)


def _batch():
    return torch.randint(0, V, (4, 12), generator=torch.Generator().manual_seed(1))


def test_a_causal_model_passes_exactly():
    torch.manual_seed(0)
    assert probe(Reads(), _batch(), [2, 7], V, seed=5)["max_abs_diff"] == 0.0


@pytest.mark.parametrize("row", [0, 3])
def test_a_row_read_by_the_others_is_seen_whichever_row_it_is(row):
    """Row 0 read by every other row (and itself: for row 0 that is causal) is found by
    changing row 0 alone; the last row read by all is found by changing every row but
    row 0."""
    torch.manual_seed(0)
    assert probe(Reads(row), _batch(), [2, 7], V, seed=5)["max_abs_diff"] > 0.1
