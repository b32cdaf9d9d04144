"""A line chart as inline SVG markup: the dashboard's plots with no script and no CDN.

Hand-written rather than matplotlib: it renders in microseconds, has no global rcParams to
race between request threads, and every label passes through `html.escape`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 28, 44
MARKERS_UP_TO = 30  # series this short also get a dot per point (one point draws no line)


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]
    color: str
    width: float = 1.5
    dashed: bool = False


@dataclass(frozen=True)
class HLine:
    """A horizontal reference line (e.g. a know-nothing model's bpb)."""

    label: str
    y: float
    color: str


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values (1, 2, 2.5 or 5 times a power of ten) in [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"bad tick range [{lo}, {hi}]")
    if hi == lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def tick_label(value: float) -> str:
    """Compact: 1.5k, 2M, 0.25, 3."""
    magnitude = abs(value)
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.4g}"


def line_chart(
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    hlines: Sequence[HLine] = (),
    width: int = 760,
    height: int = 320,
    title: str = "",
) -> str:
    """An `<svg>` element; non-finite points are left out, an empty chart says so."""
    clean = [
        [(x, y) for x, y in s.points if math.isfinite(x) and math.isfinite(y)] for s in series
    ]
    refs = [h for h in hlines if math.isfinite(h.y)]
    xs = [x for pts in clean for x, _ in pts]
    ys = [y for pts in clean for _, y in pts] + [h.y for h in refs]
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title or y_label)}"><title>{escape(title or y_label)}</title>'
    )
    if not xs:
        return (
            f'{head}<text x="{width / 2}" y="{height / 2}" text-anchor="middle" '
            f'fill="#666">no data to plot</text></svg>'
        )
    x_lo, x_hi = 0.0, max(xs) if max(xs) > 0 else 1.0
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.05 or abs(y_hi) * 0.05 or 1.0
    y_lo, y_hi = y_lo - pad, y_hi + pad
    plot_w = width - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = height - MARGIN_TOP - MARGIN_BOTTOM

    def px(x: float) -> float:
        return MARGIN_LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return MARGIN_TOP + (y_hi - y) / (y_hi - y_lo) * plot_h

    out = [head, f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{plot_w}" '
           f'height="{plot_h}" fill="#fff" stroke="#bbb"/>']
    for t in nice_ticks(y_lo, y_hi):
        y = py(t)
        out.append(
            f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#eee"/><text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'class="tick">{escape(tick_label(t))}</text>'
        )
    for t in nice_ticks(x_lo, x_hi):
        x = px(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{MARGIN_TOP + plot_h}" '
            f'y2="{MARGIN_TOP + plot_h + 4}" stroke="#888"/><text x="{x:.1f}" '
            f'y="{MARGIN_TOP + plot_h + 17}" text-anchor="middle" class="tick">'
            f"{escape(tick_label(t))}</text>"
        )
    for i, h in enumerate(refs):
        y = py(h.y)
        # Labels alternate right / left so that two close lines stay readable.
        label_x, anchor = (MARGIN_LEFT + plot_w - 4, "end") if i % 2 == 0 else (
            MARGIN_LEFT + 4, "start")
        out.append(
            f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{escape(h.color)}" stroke-dasharray="6 4"/>'
            f'<text x="{label_x}" y="{y - 4:.1f}" text-anchor="{anchor}" '
            f'class="ref" fill="{escape(h.color)}">'
            f"{escape(h.label)} {h.y:.3f}</text>"
        )
    legend_x = MARGIN_LEFT
    for s, pts in zip(series, clean, strict=True):
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="4 3"' if s.dashed else ""
        out.append(
            f'<polyline class="series" data-label="{escape(s.label)}" fill="none" '
            f'stroke="{escape(s.color)}" stroke-width="{s.width}"{dash} points="{coords}"/>'
        )
        if len(pts) <= MARKERS_UP_TO:
            out.extend(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{s.width + 1.5}" '
                f'fill="{escape(s.color)}"/>'
                for x, y in pts
            )
        out.append(
            f'<rect x="{legend_x}" y="8" width="14" height="4" fill="{escape(s.color)}"/>'
            f'<text x="{legend_x + 18}" y="14" class="legend">{escape(s.label)}</text>'
        )
        legend_x += 26 + 7 * len(s.label)
    out.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2}" y="{height - 6}" text-anchor="middle" '
        f'class="axis">{escape(x_label)}</text><text x="14" y="{MARGIN_TOP + plot_h / 2}" '
        f'text-anchor="middle" class="axis" transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2})">'
        f"{escape(y_label)}</text></svg>"
    )
    return "".join(out)
