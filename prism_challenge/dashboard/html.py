"""The dashboard's page shell and the few HTML helpers every page uses.

Every value that reaches a page goes through `esc` (miner-controlled strings such as bundle
names and refusal reasons included); helpers that take `html=` take markup built here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
 color:#1d2330;background:#f4f5f7}
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;gap:24px;
 align-items:baseline;flex-wrap:wrap}
header h1{font-size:18px;margin:0}header a{color:#cfe0ff;text-decoration:none}
header .meta{color:#aab3c5;font-size:13px}
main{max-width:1240px;margin:0 auto;padding:16px 24px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px;
 margin:0 0 16px}
h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:12px 0 6px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceef2;vertical-align:top}
th{background:#f7f8fa;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.leader td{background:#fff8e1}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;
 border:1px solid #ccd;background:#f1f3f6;white-space:nowrap}
.s-received{background:#e8f0fe}.s-queued{background:#e6f4ea}.s-running{background:#fef7e0}
.s-scored{background:#d7f5dd}.s-failed,.s-rejected{background:#fce8e6}
.warn{background:#fff3cd;border-color:#e0c36a}.dev{background:#fde2c8;border-color:#e3a36b}
.ok{background:#d7f5dd}.muted{color:#6b7385}
.mono{font-family:ui-monospace,monospace;white-space:nowrap}.t{white-space:nowrap}
nav a{margin-right:14px}
.prism-posteriors td:nth-child(n+3){white-space:nowrap}
.reason{max-width:420px;overflow-wrap:anywhere;white-space:pre-line}
.pairs th{width:180px}
.output{max-height:320px;overflow:auto;background:#f6f8fa;padding:8px;font-size:12px}
.counts{display:flex;gap:10px;flex-wrap:wrap;margin-bottom:8px}
.chart{max-width:100%;height:auto;font-size:11px}.chart .axis{font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:8px}
.chart .tick{fill:#555}.chart .legend{font-size:12px}
"""


def esc(value: object) -> str:
    """Escaped text of a value; None shows as a dash."""
    return "—" if value is None else escape(str(value), quote=True)


def when(ts: float | None) -> str:
    """A Unix time as UTC, to the second."""
    if ts is None:
        return "—"
    text = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f'<span class="t">{text}</span>'


def num(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def badge(text: str, cls: str = "") -> str:
    return f'<span class="badge {esc(cls)}">{esc(text)}</span>'


def status_badge(status: str) -> str:
    return badge(status, f"s-{status}")


def hotkey(value: str | None) -> str:
    """A hotkey shortened for a table cell, the whole of it on hover."""
    if value is None:
        return "—"
    short = value if len(value) <= 14 else f"{value[:6]}…{value[-6:]}"
    return f'<span class="mono" title="{esc(value)}">{esc(short)}</span>'


def link(href: str, text: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def table(
    head: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    numeric: Iterable[int] = (),
    row_classes: Sequence[str] | None = None,
    empty: str = "nothing yet",
) -> str:
    """A table of already-escaped cells (`head` is plain text and escaped here)."""
    numeric = set(numeric)
    rows = list(rows)
    if not rows:
        return f'<p class="muted">{esc(empty)}</p>'
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{esc(row_classes[i])}"' if row_classes and row_classes[i] else ""
        tds = "".join(
            f'<td class="num">{cell}</td>' if j in numeric else f"<td>{cell}</td>"
            for j, cell in enumerate(row)
        )
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def section(title: str, html: str, *, anchor: str = "") -> str:
    ident = f' id="{esc(anchor)}"' if anchor else ""
    return f"<section{ident}><h2>{esc(title)}</h2>{html}</section>"


def page(title: str, body: str, *, meta: str = "", refresh_s: int = 0) -> str:
    """A whole document: header with navigation, then `body` (markup)."""
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_s)}">' if refresh_s > 0 else ""
    nav = " ".join(
        link(href, text)
        for href, text in (
            ("/", "Overview"),
            ("/v1/program.md", "program.md"),
            ("/dashboard/journal", "journal"),
            ("/metrics", "metrics"),
            ("/docs", "API"),
        )
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{refresh}'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>PRISM validator</h1><nav>{nav}</nav><span class="meta">{meta}</span>'
        f"</header><main>{body}</main></body></html>"
    )
