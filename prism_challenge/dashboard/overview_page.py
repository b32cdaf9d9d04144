"""The overview page: status counts, leaderboard, queue, weights plan, registry panel."""

from __future__ import annotations

import time
from urllib.parse import quote

from prism_challenge.dashboard.html import (
    badge,
    esc,
    hotkey,
    link,
    num,
    section,
    status_badge,
    table,
    when,
)
from prism_challenge.dashboard.queries import Overview, SubmissionRow
from prism_challenge.registry.panel import posteriors_panel
from prism_challenge.sandbox.record import corpus_name
from prism_challenge.scoring.leaderboard import Entry


def submission_link(submission_id: int, name: str | None) -> str:
    return link(f"/dashboard/submissions/{submission_id}", name or f"submission #{submission_id}")


def corpus_badge(corpus: str | None) -> str:
    if corpus is None:
        return badge("no corpus scored yet")
    if corpus_name(corpus) == "demo":
        return badge("demo corpus: development scores only", "dev")
    return badge(f"corpus: {corpus}", "ok")


def _review(entry: Entry) -> str:
    return badge("unreviewed", "warn") if entry.unreviewed else "reviewed"


def _with_se(value: float | None, se: float | None) -> str:
    """'2.7000 ± 0.0120', the value alone without an SE, '—' without a value."""
    return num(value) + (f" ± {num(se)}" if value is not None and se is not None else "")


def _gap(e: Entry) -> str:
    """'0.0100 (-0.0300)': the gap and the bound gap - z SE the penalty judges."""
    if e.gap is None:
        return num(None)
    return num(e.gap) + (f" ({num(e.gap_bound)})" if e.gap_bound is not None else "")


def leaderboard_html(view: Overview) -> str:
    board = view.board
    parts = [f"<p>{corpus_badge(board.corpus)} "]
    others = [c for c in view.corpora if c != board.corpus]
    if others:
        parts.append(
            "also scored on: "
            + ", ".join(link(f"/?corpus={quote(c, safe='')}", c) for c in others)
        )
    parts.append(
        f' <span class="muted">ε grid {board.epsilon_bpb:g} bpb, dethrone margin '
        f"{board.dethrone_margin:.2%} + {board.dethrone_z:g} SE of the paired difference"
        "</span></p>"
    )
    rows, classes = [], []
    for s in board.standings:
        e = s.entry
        rows.append([
            str(s.rank) + (" ★" if s.leader else ""),
            submission_link(e.submission_id, e.name),
            hotkey(e.hotkey),
            num(e.bpb),
            _with_se(e.heldout_bpb, e.heldout_se),
            _gap(e),
            num(e.heldout_delta),
            when(e.accepted_at),
            _review(e),
        ])
        classes.append("leader" if s.leader else "")
    parts.append(table(
        ["rank", "submission", "hotkey", "bpb", "held-out ± SE", "gap (bound)", "held-out Δ",
         "accepted", "review"],
        rows, numeric=(3, 4, 5, 6), row_classes=classes, empty="nothing eligible scored yet",
    ))
    if board.ineligible:
        parts.append("<h3>Not eligible (latest per hotkey)</h3>")
        parts.append(table(
            ["submission", "hotkey", "bpb", "reason"],
            [[submission_link(e.submission_id, e.name), hotkey(e.hotkey), num(e.bpb),
              f'<span class="reason">{esc(e.reason)}</span>'] for e in board.ineligible],
            numeric=(2,),
        ))
    if board.departed:
        parts.append("<h3>Left the subnet (best per hotkey; not ranked, not paid)</h3>")
        parts.append(table(
            ["submission", "hotkey", "bpb", "accepted"],
            [[submission_link(e.submission_id, e.name) + " " + badge("deregistered", "warn"),
              hotkey(e.hotkey), num(e.bpb), when(e.accepted_at)] for e in board.departed],
            numeric=(2,),
        ))
    if board.censored:
        parts.append("<h3>Censored: stopped early (latest per hotkey)</h3>")
        parts.append(table(
            ["submission", "hotkey", "bpb at least", "why"],
            [[submission_link(e.submission_id, e.name) + " " + badge("censored", "warn"),
              hotkey(e.hotkey), "≥ " + num(e.bpb),
              '<span class="reason">stopped at a checkpoint: it could no longer beat the '
              "leader by the dethrone margin</span>"] for e in board.censored],
        ))
    return "".join(parts)


def queue_html(view: Overview) -> str:
    counts = " ".join(f"{status_badge(s)} {n}" for s, n in view.counts.items())
    return f'<div class="counts">{counts}</div>' + table(
        ["id", "submission", "hotkey", "status", "attempts", "reason", "accepted", "updated"],
        [_queue_row(r) for r in view.queue],
        numeric=(0, 4),
        empty="no submissions yet",
    )


def _queue_row(r: SubmissionRow) -> list[str]:
    return [
        str(r.id),
        submission_link(r.id, r.name),
        hotkey(r.hotkey),
        status_badge(r.status),
        str(r.attempts),
        f'<span class="reason">{esc(r.reason)}</span>',
        when(r.accepted_at),
        when(r.updated_at),
    ]


def weights_html(view: Overview) -> str:
    if view.plan is None:
        return f'<p>{badge("weights misconfigured", "warn")} {esc(view.plan_error)}</p>'
    plan = view.plan
    mode = badge("dry run: nothing is set on-chain", "ok") if plan.dry_run else badge(
        "LIVE: these weights are set on-chain", "warn"
    )
    head = (
        f"<p>{mode} netuid {plan.netuid}, block {esc(plan.block)}, corpus {esc(plan.corpus)}; "
        f'uids <span class="mono">{esc(plan.uids)}</span>, u16 '
        f'<span class="mono">{esc(plan.weights_u16)}</span></p>'
    )
    rows = table(
        ["uid", "hotkey", "share", "u16", "bpb", "why"],
        [[str(r.uid), hotkey(r.hotkey), f"{r.share:.4f}", str(r.u16), num(r.bpb),
          f'<span class="reason">{esc("; ".join(r.reasons))}</span>'] for r in plan.rows],
        numeric=(0, 2, 3, 4),
    )
    excluded = ""
    if plan.excluded:
        excluded = "<h3>Excluded</h3>" + table(
            ["hotkey", "reason"], [[hotkey(x.hotkey), esc(x.reason)] for x in plan.excluded]
        )
    return head + rows + excluded + equivocations_html(view)


def equivocations_html(view: Overview) -> str:
    """One line per validator proven to equivocate (agreement/equivocation.py)."""
    return "".join(
        f'<p>{badge("equivocation", "warn")} validator {hotkey(v)} signed two different '
        f'measurements of run <span class="mono">{esc(d[:16])}</span>; its measurements are '
        f"excluded until {esc(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(until)))} "
        # one-page proofs are served only to an asker that says it checks them
        f"(proof at /v1/equivocations?one_page=true)</p>" for v, d, until in view.equivocations)


def credit_share_html(view: Overview) -> str:
    """Each hotkey's share of the research pot (the weights plan pays research_share x it)."""
    rows = [[hotkey(hk), f"{share:.2%}"] for hk, share in
            sorted(view.research_credit.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "<h3>Research credit</h3>" + table(
        ["hotkey", "share of the research pot"], rows, numeric=(1,),
        empty="no research credit in the window (or weights.research_share is 0)",
    )


def registry_html(view: Overview) -> str:
    brief = (f'<p>{link("/v1/program.md", "program.md")}: the brief miners get '
             f'(per hotkey: /v1/program.md?hotkey=…); {link("/dashboard/journal", "journal")}: '
             "research cycles, notes, and research credit per hotkey.</p>")
    brief += credit_share_html(view)
    if not view.hypotheses:
        return brief + (
            '<p class="muted">no hypotheses yet (the registry seeds them on first use)</p>'
        )
    return brief + posteriors_panel(view.hypotheses)


def render_overview(view: Overview) -> str:
    """The page body (markup) for `view`."""
    return "".join([
        section("Leaderboard", leaderboard_html(view), anchor="leaderboard"),
        section("Queue", queue_html(view), anchor="queue"),
        section("Weights plan", weights_html(view), anchor="weights"),
        section("Research registry", registry_html(view), anchor="registry"),
    ])
