"""The learning-curve PNG of `prism eval`: each batch's prequential bpb over the stream.

Uses matplotlib's object API with the Agg canvas, so no global backend is switched and no
display is needed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from prism_challenge.sandbox.record import RunRecord
from prism_challenge.scoring import ScoreResult


def batch_curve(record: RunRecord) -> tuple[list[int], list[float]]:
    """(target tokens consumed so far, bpb of the batch) in stream order; empty batches skipped."""
    cols = record.columns
    order = np.lexsort((cols.rank, cols.offset_row))
    seen = np.cumsum(cols.rows[order]) * record.seq_len
    nbytes, nats = cols.bytes[order], cols.nats[order]
    keep = nbytes > 0
    return seen[keep].tolist(), (nats[keep] / math.log(2) / nbytes[keep]).tolist()


def _smooth(ys: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot_learning_curve(record: RunRecord, score: ScoreResult, path: Path, title: str) -> Path:
    xs, ys = batch_curve(record)
    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if xs:
        ax.plot(xs, ys, color="0.75", lw=0.8, label="batch bpb")
        ax.plot(xs, _smooth(ys, max(1, len(ys) // 25)), color="C0", lw=1.8,
                label="moving average")
    ax.axhline(score.uniform_bpb, color="C3", ls=":", label=f"uniform {score.uniform_bpb:.3f}")
    ev = record.eval
    if ev is not None and ev.val_bpb_trained is not None:
        se = f" ± {ev.val_bpb_trained_se:.3f}" if ev.val_bpb_trained_se is not None else ""
        ax.axhline(ev.val_bpb_trained, color="C2", ls="--",
                   label=f"held-out, trained {ev.val_bpb_trained:.3f}{se}")
    if record.consumed.rows < record.budget.rows:  # cut short: mark where the budget ends
        ax.axvline(record.budget.rows * record.seq_len, color="C1", ls="-.",
                   label=f"budget end (run stopped: {record.exit_reason}, "
                         f"{score.unconsumed_tokens:,} tokens charged)")
    if score.prequential_bpb is not None:
        ax.axhline(score.prequential_bpb, color="C0", ls="--",
                   label=f"prequential {score.prequential_bpb:.3f}")
    ax.set_xlabel("target tokens consumed")
    ax.set_ylabel("bits per byte")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
