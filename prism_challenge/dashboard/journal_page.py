"""The research journal page: research credit per hotkey, operator notes, and one block per
research cycle (what was proposed, accepted or refused and why, which claims moved, with
links to the submissions whose contrasts moved them, which axes changed status).

Proposals and notes are LLM or operator text: everything goes through `esc`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from prism_challenge.dashboard.html import badge, esc, hotkey, link, num, section, table, when

PAGE = 20


@dataclass(frozen=True)
class JournalView:
    total: int
    offset: int
    entries: list[dict]  # newest first
    credit: list[dict]  # registry.credit_table rows
    credit_cap: float
    notes: dict[str, tuple[str, list[dict]]]  # hid -> (statement, notes)
    error: str | None = None  # why credit and notes could not be read


def credit_html(rows: list[dict], cap: float) -> str:
    head = (f'<p class="muted">Points over the credit window: 1 per run used as matched '
            f"evidence on an open claim, 3 for the run that decides a claim; one paid run per "
            f"design and hotkey (near-duplicates earn nothing); at most {cap:g} per "
            "hotkey.</p>")
    return head + table(
        ["hotkey", "points", "share of the research pot", "runs paid", "cap"],
        [[hotkey(r["hotkey"]), num(r["points"], 2), f"{r['share']:.2%}", str(r["runs"]),
          badge("capped", "warn") if r["capped"] else ""] for r in rows],
        numeric=(1, 2, 3), empty="no research credit in the window yet",
    )


def _proposal(v: dict) -> str:
    raw = v["proposal"]
    what = raw.get("spec", raw) if isinstance(raw, dict) else raw
    text = f'<span class="mono">{esc(json.dumps(what, sort_keys=True, default=str))}</span>'
    if v["accepted"]:
        return f"{badge('accepted', 'ok')} {esc(v['accepted'])}: {text} ({esc(v['reason'])})"
    return f"{badge('refused', 'warn')} {text}: {esc(v['reason'])}"


def _runs(m: dict) -> str:
    parts = [
        esc(r["outcome"]) + " " + " vs ".join(
            link(f"/dashboard/submissions/{int(s)}", f"#{int(s)}") for s in r["submissions"])
        for r in m["runs"]
    ]
    if m["runs_left_out"]:
        parts.append(esc(f"+{m['runs_left_out']} earlier"))
    return "; ".join(parts) or "—"


def _items(lines: list[str], empty: str) -> str:
    if not lines:
        return f'<p class="muted">{esc(empty)}</p>'
    return "<ul>" + "".join(f"<li>{x}</li>" for x in lines) + "</ul>"


def entry_html(e: dict) -> str:
    when_ = f"after {esc(e['at'])} scored, {when(e.get('time') or None)}"
    if e["kind"] == "note":
        return (f"<h3>Note on {esc(e['hypothesis'])}</h3><p>{when_}: {esc(e['statement'])}"
                f"</p><blockquote>{esc(e['text'])}</blockquote>")
    if e["kind"] == "cycle_failed":
        return (f"<h3>{badge('failed', 'warn')} research cycle ({esc(e['trigger'])})</h3>"
                f'<p>{when_}: <span class="reason">{esc(e["error"])}</span> (failure '
                f"{esc(e['failures'])}, {esc(e['streak'])} in a row); nothing else changed.</p>")
    head = (f"<h3>Research cycle {esc(e['cycle'])} ({esc(e['trigger'])}, model "
            f"{esc(e['model'])})</h3><p>{when_}"
            + (f"; progress stalled (stall cycle {esc(e['stall_cycle'])})" if e["stalled"] else "")
            + (f"; no claims asked for: {esc(e['skipped'])}" if e["skipped"] else "") + "</p>")
    moved = table(
        ["claim", "statement", "mean θ", "contrasts", "status", "evidence runs"],
        [[esc(m["id"]), esc(m["statement"]), f"{m['mean'][0]:.3f} → {m['mean'][1]:.3f}",
          f"{m['contrasts'][0]} → {m['contrasts'][1]}",
          esc(f"{m['status'][0]} → {m['status'][1]}"), _runs(m)] for m in e["moved"]],
        empty="no claim moved since the previous cycle",
    )
    return "".join([
        head,
        "<h4>Proposed claims</h4>", _items([_proposal(v) for v in e["proposed"]], "none"),
        *(["<h4>Proposed axes</h4>", _items([_proposal(v) for v in e["axes_proposed"]], "")]
          if e["axes_proposed"] else []),
        "<h4>New claims</h4>",
        _items([f"{esc(n['id'])} ({esc(n['origin'])}): {esc(n['statement'])}"
                for n in e["new"]], "none"),
        "<h4>Moved</h4>", moved,
        *(["<h4>Axes</h4>", _items([esc(f"{a['name']}: {a['status'][0]} → {a['status'][1]}")
                                     for a in e["axes"]], "")] if e["axes"] else []),
    ])


def notes_html(notes: dict[str, tuple[str, list[dict]]]) -> str:
    rows = [[esc(hid), esc(statement), "<br>".join(esc(n["text"]) for n in items)]
            for hid, (statement, items) in sorted(notes.items())]
    return table(["claim", "statement", "notes"], rows,
                 empty='no notes yet (prism registry note H001 "...")')


def render_journal(view: JournalView) -> str:
    pages = []
    if view.offset > 0:
        pages.append(link(f"/dashboard/journal?offset={max(view.offset - PAGE, 0)}", "newer"))
    if view.offset + PAGE < view.total:
        pages.append(link(f"/dashboard/journal?offset={view.offset + PAGE}", "older"))
    entries = "".join(f"<article>{entry_html(e)}</article>" for e in view.entries) or (
        '<p class="muted">no research cycle yet</p>')
    nav = f"<p>{view.total} entries. {' · '.join(pages)} · " + link(
        "/v1/journal.md", "journal.md") + "</p>"
    error = f'<p>{badge("unavailable", "warn")} {esc(view.error)}</p>' if view.error else ""
    return "".join([
        section("Research credit", error + credit_html(view.credit, view.credit_cap),
                anchor="credit"),
        section("Operator notes", notes_html(view.notes), anchor="notes"),
        section("Journal", nav + entries, anchor="journal"),
    ])
