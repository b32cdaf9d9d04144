"""The journal as markdown (`GET /v1/journal.md`): newest entries first, runs linked to
their dashboard pages. Proposals are LLM output: they are shown as inline code, never as
markdown of their own."""

from __future__ import annotations

import json
from datetime import UTC, datetime


def run_link(sid: int) -> str:
    return f"[#{sid}](/dashboard/submissions/{sid})"


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC") if ts else "—"


def code(value: object) -> str:
    """A value as one inline code span (backticks and newlines cannot break out of it)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def proposal_line(v: dict) -> str:
    raw = v["proposal"]
    what = raw.get("spec", raw) if isinstance(raw, dict) else raw
    if v["accepted"]:
        return f"- accepted as {v['accepted']}: {code(what)} ({v['reason']})"
    return f"- refused: {code(what)}: {v['reason']}"


def entry_lines(e: dict) -> list[str]:
    when = f"after {e['at']} scored, {_when(e.get('time', 0))}"
    if e["kind"] == "note":
        return [f"### Note on {e['hypothesis']} ({when})", "",
                f"{e['statement']}: {code(e['text'])}", ""]
    if e["kind"] == "cycle_failed":
        return [f"### Research cycle failed ({when}, {e['trigger']})", "",
                f"{code(e['error'])} (failure {e['failures']}, {e['streak']} in a row); "
                "nothing else changed, the cycle is retried after a backoff.", ""]
    out = [f"### Research cycle {e['cycle']} ({when}, {e['trigger']}, model {code(e['model'])})",
           ""]
    if e["stalled"]:
        out.append(f"Progress stalled (stall cycle {e['stall_cycle']}): new axes were asked for.")
    if e["skipped"]:
        out.append(f"No claims asked for: {e['skipped']}.")
    out += ["", "Proposed claims:"] + [proposal_line(v) for v in e["proposed"]]
    if not e["proposed"]:
        out.append("- none")
    if e["axes_proposed"]:
        out += ["", "Proposed axes:"] + [proposal_line(v) for v in e["axes_proposed"]]
    out += ["", "New claims:"] + [f"- {n['id']} ({n['origin']}): {n['statement']}"
                                  for n in e["new"]]
    if not e["new"]:
        out.append("- none")
    out += ["", "Claims that moved since the previous cycle:"]
    for m in e["moved"]:
        runs = "; ".join(
            f"{r['outcome']}: " + " vs ".join(run_link(s) for s in r["submissions"])
            for r in m["runs"]
        )
        more = f" (+{m['runs_left_out']} earlier contrasts)" if m["runs_left_out"] else ""
        out.append(f"- {m['id']} {m['statement']}: mean {m['mean'][0]:.3f} -> {m['mean'][1]:.3f}, "
                   f"contrasts {m['contrasts'][0]} -> {m['contrasts'][1]}, "
                   f"{m['status'][0]} -> {m['status'][1]}" + (f"; runs: {runs}{more}" if runs
                                                               else ""))
    if not e["moved"]:
        out.append("- none")
    if e["axes"]:
        out += ["", "Axes: " + ", ".join(f"{a['name']} {a['status'][0]} -> {a['status'][1]}"
                                         for a in e["axes"])]
    return out + [""]


def journal_markdown(total: int, entries: list[dict]) -> str:
    head = ["# PRISM research journal", "",
            f"{total} entries; the {len(entries)} newest, newest first "
            "(`GET /v1/journal` pages through all of them).", ""]
    return "\n".join(head + [line for e in entries for line in entry_lines(e)])
