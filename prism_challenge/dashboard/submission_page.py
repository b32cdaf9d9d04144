"""One submission's page: where it is, its score, every attempt, and its learning curve."""

from __future__ import annotations

from prism_challenge.dashboard.curve import Curve
from prism_challenge.dashboard.html import (
    badge,
    esc,
    hotkey,
    num,
    section,
    status_badge,
    table,
    when,
)
from prism_challenge.dashboard.overview_page import corpus_badge
from prism_challenge.dashboard.queries import ScoreView, SubmissionView
from prism_challenge.dashboard.records import RunDigest
from prism_challenge.dashboard.svg import HLine, Series, line_chart

# Score detail fields worth a row, in reading order (the rest stay in /v1 JSON).
SCORE_FIELDS = ("prequential_bpb", "tail_bpb", "uniform_bpb", "heldout_bpb", "heldout_se",
                "gap", "gap_bound", "penalty", "unconsumed_tokens", "exit_reason")


def _value(value: object) -> str:
    """A stored figure as the page shows figures: floats to 6 decimals, the rest as text."""
    return num(value, 6) if isinstance(value, float) else esc(value)


def _review(r) -> str:
    """What the LLM review did: a bundle refused before the review never had one."""
    if r.reviewed == "unreviewed":
        return badge("unreviewed", "warn")
    if r.reviewed == "pending" and r.status in ("rejected", "failed"):
        return esc("not reviewed (refused before the LLM review)")
    return esc(r.reviewed)


def _pairs(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="pairs"><tbody>{body}</tbody></table>'


def summary_html(view: SubmissionView) -> str:
    r = view.row
    return _pairs([
        ("name", esc(r.name)),
        ("status", status_badge(r.status)),
        ("reason", f'<span class="reason">{esc(r.reason)}</span>'),
        ("attempts", str(r.attempts)),
        ("LLM review", _review(r)),
        ("hotkey", hotkey(r.hotkey)),
        ("digest", f'<span class="mono">{esc(r.digest)}</span>'),
        ("accepted", when(r.accepted_at) + (f" (block {r.block})" if r.block else "")),
        ("updated", when(r.updated_at)),
    ])


def score_html(score: ScoreView | None) -> str:
    if score is None:
        return '<p class="muted">not scored (yet)</p>'
    rows = [
        ("corpus", corpus_badge(score.corpus)),
        ("bpb", num(score.bpb, 6)),
        ("held-out Δ", num(score.heldout_delta, 6)),
        ("eligible", badge("eligible", "ok") if score.eligible else badge("not eligible", "warn")),
        *([("censored", badge("censored: stopped early, the bpb is a lower bound", "warn"))]
          if score.detail.get("censored") else []),
        ("reason", f'<span class="reason">{esc(score.reason)}</span>'),
    ]
    rows += [(k, _value(score.detail[k])) for k in SCORE_FIELDS if k in score.detail]
    rows.append(("scored", when(score.created_at)))
    return _pairs(rows)


def runs_html(runs: list[RunDigest]) -> str:
    rows = []
    for run in runs:
        rec = run.record
        if rec is None:
            rows.append([str(run.attempt), badge("unreadable", "warn"), esc(run.error), "", "",
                         "", when(run.created_at)])
            continue
        rows.append([
            str(run.attempt),
            esc(rec.exit_reason),
            f'<span class="reason">{esc(rec.exit_detail or "")}</span>',
            str(run.batches),
            f"{rec.consumed.scored_tokens:,} / {rec.budget.scored_tokens:,}",
            f"{rec.startup_s:.1f} / {rec.train_s:.1f} / {rec.eval_s:.1f}",
            when(run.created_at),
        ])
    return table(
        ["attempt", "exit", "detail", "batches", "tokens consumed / budget",
         "startup / train / eval s", "recorded"],
        rows, numeric=(0, 3, 4, 5), empty="no run recorded yet",
    )


def curve_chart(curve: Curve) -> str:
    refs = [
        HLine(label, value, color)
        for label, value, color in (
            ("uniform", curve.uniform_bpb, "#888888"),
            ("val trained", curve.val_bpb_trained, "#1a7f37"),
            ("val twin", curve.val_bpb_twin, "#b42318"),
        )
        if value is not None
    ]
    return line_chart(
        [
            Series("bpb per batch", [(p.tokens, p.bpb) for p in curve.points], "#8fb5e8", 1.2),
            Series("prequential bpb so far",
                   [(p.tokens, p.running_bpb) for p in curve.points if p.running_bpb is not None],
                   "#1f3a93", 2.2),
        ],
        x_label="scored tokens consumed",
        y_label="bits per byte",
        hlines=refs,
        title="learning curve",
    )


def curve_html(runs: list[RunDigest]) -> str:
    latest = next((r for r in reversed(runs) if r.curve is not None and r.batches), None)
    if latest is None:
        return '<p class="muted">no scored batches yet</p>'
    curve = latest.curve
    note = (f"attempt {latest.attempt}: {curve.batches} batches drawn as "
            f"{len(curve.points)} points")
    if curve.skipped:
        note += f"; {curve.skipped} left out (no bytes or a non-finite loss)"
    return f'<p class="muted">{esc(note)}</p>{curve_chart(curve)}'


TELEMETRY_COLORS = ("#1f3a93", "#b42318", "#1a7f37", "#9a6700", "#6639ba", "#0e7490")


def telemetry_html(runs: list[RunDigest]) -> str:
    """The miner's own `ctx.log` numbers of the latest readable attempt, one small chart per
    name (their scales differ: a loss, a learning rate). Shown, never scored."""
    latest = next((r for r in reversed(runs) if r.record is not None), None)
    series = latest.record.telemetry_series() if latest is not None else {}
    if not series:
        return '<p class="muted">the training script logged nothing (ctx.log)</p>'
    charts = [
        line_chart([Series(name, [(float(s), v) for s, v in points],
                           TELEMETRY_COLORS[i % len(TELEMETRY_COLORS)], 1.6)],
                   x_label="step", y_label=name, width=380, height=200, title=name)
        for i, (name, points) in enumerate(series.items())
    ]
    note = (f"attempt {latest.attempt}: reported by the training script (ctx.log), "
            "never scored")
    return f'<p class="muted">{esc(note)}</p><div class="charts">{"".join(charts)}</div>'


OUTPUT_SHOWN_CHARS = 16 * 1024


def output_html(runs: list[RunDigest]) -> str:
    """The training loop's own output (print(), warnings) of the latest readable attempt:
    its last 16 KiB, escaped, in a scrolling block (the record keeps 64 KiB)."""
    latest = next((r for r in reversed(runs) if r.record is not None), None)
    text = latest.record.train_output if latest is not None else ""
    if not text.strip():
        return '<p class="muted">the training script printed nothing</p>'
    shown = text[-OUTPUT_SHOWN_CHARS:]
    cut = f", its last {len(shown):,} characters" if len(shown) < len(text) else ""
    note = (f"attempt {latest.attempt}: what the training sandbox printed (stdout and "
            f"stderr{cut}), shown, never scored")
    return (f'<p class="muted">{esc(note)}</p>'
            f'<pre class="output">{esc(shown)}</pre>')


def _probe(probe) -> str:
    if probe is None:
        return "—"
    verdict = badge("ok", "ok") if probe.ok else badge("failed", "warn")
    return f"{verdict} max |Δlogit| {probe.max_abs_diff:.3g}"


def measured_html(runs: list[RunDigest]) -> str:
    """What the harness and the eval sandbox measured on the latest readable attempt."""
    latest = next((r for r in reversed(runs) if r.record is not None), None)
    if latest is None:
        return '<p class="muted">no run recorded yet</p>'
    rec = latest.record
    rows: list[tuple[str, str]] = [("attempt", str(latest.attempt))]
    if rec.axes is not None:
        a = rec.axes
        optimizers = ", ".join(
            f"{o.cls}(" + ", ".join(f"{k}={v}" for k, v in sorted(o.hparams.items())) + ")"
            for o in a.optimizers
        )
        census = ", ".join(f"{k}×{n}" for k, n in sorted(a.module_census.items()))
        rows += [
            ("parameters", f"{a.param_count:,} (cap {rec.param_cap:,})"),
            ("layers", str(a.layer_count)),
            ("modules", esc(census)),
            ("optimizers", esc(optimizers or None)),
            ("batch size", esc(a.batch_size)),
            ("precision / compile", esc(f"{a.precision} / {a.compile}")),
            ("world size", str(a.world_size)),
        ]
    rows.append(("kept losses", f"each position with chance {rec.keep_rate:.3g}"
                 if rec.keep_rate else f"{rec.sample_rows} positions per batch"))
    if rec.eval is not None:
        rows += [
            ("causality screen (trained)", _probe(rec.eval.probe_trained)),
            ("causality screen (twin)", _probe(rec.eval.probe_twin)),
            ("held-out positions / bytes (target-absent)",
             f"{rec.eval.val_tokens:,} / {rec.eval.val_bytes:,}"),
        ]
    if rec.limits_hit:
        rows.append(("limits hit", esc(", ".join(rec.limits_hit))))
    return _pairs(rows)


def render_submission(view: SubmissionView) -> str:
    return "".join([
        section(f"Submission #{view.row.id}", summary_html(view)),
        section("Learning curve", curve_html(view.runs), anchor="curve"),
        section("Telemetry", telemetry_html(view.runs), anchor="telemetry"),
        section("Training output", output_html(view.runs), anchor="output"),
        section("Score", score_html(view.score), anchor="score"),
        section("Measured", measured_html(view.runs), anchor="measured"),
        section("Runs", runs_html(view.runs), anchor="runs"),
    ])
