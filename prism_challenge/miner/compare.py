"""`prism eval --compare`: a bundle side by side with a reference run on the same machine and
config, each difference with its uncertainty.

The prequential bpb of two runs is measured on the same stream in full, so its difference
carries no sampling error (only the runs' own seed noise, which the validator never
averages either). The held-out bpb is a sample of val positions: two local runs share the
round's plan (the same rows and cuts), so their difference is paired row by row and its
standard error is the delta-method SE of the per-row differences, far smaller than the two
SEs combined; runs on different plans fall back to the unpaired sqrt(SE_a^2 + SE_b^2).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from prism_challenge.sandbox.heldout import ratio_se
from prism_challenge.sandbox.record import EvalResult, RunRecord
from prism_challenge.scoring import ScoreResult

RECORD_FILE, SCORE_FILE = "record.json", "score.json"


@dataclass(frozen=True)
class Side:
    """One run of the comparison: what it is called, its record and its score."""

    label: str
    record: RunRecord
    score: ScoreResult
    eligible: bool  # on its record and verified by its replay
    verified: bool = True  # False: its replay was skipped (`prism eval --no-replay`)


@dataclass(frozen=True)
class Difference:
    value: float
    se: float | None
    how: str  # "paired over N rows of the same plan" or why it is not


def is_stored_run(path: Path) -> bool:
    """A folder `prism eval` wrote (record.json and score.json), not a bundle folder."""
    return (path / RECORD_FILE).is_file() and (path / SCORE_FILE).is_file()


def load_stored(path: Path) -> Side:
    """A reference from an earlier `prism eval --out PATH` (ValueError when unreadable)."""
    try:
        record = RunRecord.model_validate_json((path / RECORD_FILE).read_text())
        summary = json.loads((path / SCORE_FILE).read_text())
        score = ScoreResult.model_validate(summary["score"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} does not hold a readable prism eval output "
                         f"({type(exc).__name__}); run `prism eval BUNDLE --out {path}` "
                         "again") from None
    name = summary.get("name") or record.digest[:12]
    return Side(f"{name} (stored)", record, score, bool(summary.get("eligible")),
                verified="not_verified" not in summary)


def heldout_difference(a: EvalResult | None, b: EvalResult | None) -> Difference | None:
    """Held-out bpb of `a` minus `b`: paired when both ran on the same plan rows."""
    if a is None or b is None or a.val_bpb_trained is None or b.val_bpb_trained is None:
        return None
    same_plan = (a.heldout_commit == b.heldout_commit and a.heldout_round == b.heldout_round
                 and len(a.val_row_bits) >= 2 and a.val_row_bytes == b.val_row_bytes
                 and len(a.val_row_bits) == len(b.val_row_bits) == len(a.val_row_bytes))
    if same_plan:
        d = np.asarray(a.val_row_bits) - np.asarray(b.val_row_bits)
        nbytes = np.asarray(a.val_row_bytes, dtype=np.float64)
        return Difference(float(d.sum() / nbytes.sum()), ratio_se(d, nbytes),
                          f"paired over {len(d):,} rows of the same held-out plan")
    se = (math.hypot(a.val_bpb_trained_se, b.val_bpb_trained_se)
          if a.val_bpb_trained_se is not None and b.val_bpb_trained_se is not None else None)
    return Difference(a.val_bpb_trained - b.val_bpb_trained, se,
                      "unpaired: the runs used different held-out plans")


def mismatches(a: RunRecord, b: RunRecord) -> list[str]:
    """Why two runs are not like for like (other data, geometry or budget); [] when they are."""
    out = []
    if a.manifest_sha256 != b.manifest_sha256:
        out.append("other data versions")
    if (a.seq_len, a.vocab_size) != (b.seq_len, b.vocab_size):
        out.append("other seq_len or vocabulary")
    if a.budget.tokens != b.budget.tokens:
        out.append(f"other token budgets ({a.budget.tokens:,} vs {b.budget.tokens:,})")
    return out


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _pm(x: float | None, se: float | None) -> str:
    return _f(x) + (f" ± {se:.4f}" if x is not None and se is not None else "")


def _diff(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a - b:+.4f}"


def _signed(d: Difference | None) -> str:
    if d is None:
        return "n/a"
    return f"{d.value:+.4f}" + (f" ± {d.se:.4f}" if d.se is not None else "")


def _eligible(side: Side) -> str:
    """'True' or 'False'; an eligible record whose replay was skipped is neither."""
    if not side.verified and side.score.eligible:
        return "not verified (record eligible, replay skipped)"
    return str(side.eligible)


def _rate(rec: RunRecord) -> float | None:
    return rec.consumed.scored_tokens / rec.train_s if rec.train_s else None


def print_comparison(console: Console, mine: Side, ref: Side) -> Difference | None:
    """The side-by-side table and the held-out difference line; returns that difference."""
    a, b = mine.record, ref.record
    ea, eb = a.eval, b.eval
    # labels are bundle names: headers as Text, never read as markup
    table = Table("measure", Column(Text(mine.label)), Column(Text(ref.label)),
                  "difference (this - ref)",
                  title="compared with the reference (same machine and config)",
                  title_justify="left")
    table.add_row("prequential bpb (same stream: no sampling error)",
                  _f(mine.score.prequential_bpb), _f(ref.score.prequential_bpb),
                  _diff(mine.score.prequential_bpb, ref.score.prequential_bpb))
    held = heldout_difference(ea, eb)
    table.add_row("held-out bpb, trained",
                  _pm(ea.val_bpb_trained if ea else None, ea.val_bpb_trained_se if ea else None),
                  _pm(eb.val_bpb_trained if eb else None, eb.val_bpb_trained_se if eb else None),
                  _signed(held))
    table.add_row("bpb that ranks", _f(mine.score.bpb), _f(ref.score.bpb),
                  _diff(mine.score.bpb, ref.score.bpb))
    ra, rb = _rate(a), _rate(b)
    table.add_row("training tokens/s", "n/a" if ra is None else f"{ra:,.0f}",
                  "n/a" if rb is None else f"{rb:,.0f}",
                  "n/a" if not (ra and rb) else f"x{ra / rb:.2f}")
    table.add_row("eligible (record and replay)", _eligible(mine), _eligible(ref), "")
    console.print(table)
    if held is not None:
        z = f", {held.value / held.se:+.1f} SE" if held.se else ""
        console.print(f"held-out difference: {_signed(held)} bpb ({held.how}{z})",
                      highlight=False)
    for why in mismatches(a, b):
        console.print(f"WARNING not like for like: {why}", highlight=False)
    return held
