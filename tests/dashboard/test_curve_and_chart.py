"""The learning curve (pure over a RunRecord) and the SVG chart, checked by hand."""

from __future__ import annotations

import math
import re

import pytest
from dashboard_store import LN2, make_record

from prism_challenge.dashboard import HLine, Series, learning_curve, line_chart
from prism_challenge.dashboard.svg import MARGIN_LEFT, MARGIN_RIGHT, nice_ticks, tick_label
from prism_challenge.sandbox.record import BatchEntry


def test_curve_is_bpb_per_batch_over_tokens_with_the_running_prequential_bpb():
    curve = learning_curve(make_record("a" * 64, bpb=(4.0, 2.0, 3.0)))
    assert [p.tokens for p in curve.points] == [100, 200, 300]
    assert [round(p.bpb, 12) for p in curve.points] == [4.0, 2.0, 3.0]
    assert [round(p.running_bpb, 12) for p in curve.points] == [4.0, 3.0, 3.0]
    assert curve.uniform_bpb == pytest.approx(8 * 100 / 400)  # log2(256) bits per token
    assert (curve.val_bpb_trained, curve.val_bpb_twin, curve.batches) == (1.25, 2.25, 3)


def test_batches_are_drawn_in_stream_order_whatever_the_record_order():
    record = make_record("a" * 64, bpb=(4.0, 2.0, 3.0))
    shuffled = record.with_steps(list(reversed(list(record.columns.entries()))))
    assert learning_curve(shuffled) == learning_curve(record)


def test_buckets_merge_nats_and_bytes_not_points():
    # The second bucket: 1200 bytes at 1 bpb and 400 bytes at 3 bpb are 1.5 bpb of their
    # bytes (2400 bits / 1600 bytes), not the 2.0 an average of the two batches would say.
    record = make_record("a" * 64, bpb=(4.0, 2.0, 1.0, 3.0))
    batches = list(record.columns.entries())
    batches[2] = batches[2].model_copy(update={"bytes": 1200, "nats": 1.0 * LN2 * 1200})
    curve = learning_curve(record.with_steps(batches), max_points=2)
    assert [p.tokens for p in curve.points] == [200, 400]
    assert curve.points[0].bpb == pytest.approx(3.0)
    assert curve.points[1].bpb == pytest.approx(1.5)
    assert curve.points[1].running_bpb == pytest.approx((1600 + 800 + 1200 + 1200) / 2400)


def test_zero_byte_and_non_finite_buckets_are_left_out_and_counted():
    record = make_record("a" * 64, bpb=(4.0, 2.0, 3.0))
    batches = list(record.columns.entries())
    batches[1] = BatchEntry(step=1, offset_row=1, rows=1, tokens=100, bytes=0, nats=5.0, t=1.0)
    batches[2] = batches[2].model_copy(update={"nats": math.inf})
    curve = learning_curve(record.with_steps(batches))
    assert [p.tokens for p in curve.points] == [100] and curve.skipped == 2


def test_bad_max_points_and_empty_record():
    with pytest.raises(ValueError, match="max_points must be at least 1"):
        learning_curve(make_record("a" * 64), max_points=0)
    empty = learning_curve(make_record("a" * 64).with_steps([]))
    assert (empty.points, empty.uniform_bpb, empty.batches) == ([], None, 0)


def test_nice_ticks_and_labels():
    assert nice_ticks(0, 10) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0.93, 4.07) == [1, 2, 3, 4]
    assert nice_ticks(0.93, 2.07) == [1, 1.25, 1.5, 1.75, 2]
    assert nice_ticks(0, 12_345) == [0, 2500, 5000, 7500, 10_000]
    assert nice_ticks(3, 3) == [3]
    with pytest.raises(ValueError):
        nice_ticks(1, math.nan)
    assert [tick_label(v) for v in (2500, 3_000_000, 0.25, 3)] == ["2.5k", "3M", "0.25", "3"]


def _points(svg: str, label: str) -> list[tuple[float, float]]:
    found = re.search(rf'data-label="{re.escape(label)}"[^>]*points="([^"]*)"', svg)
    return [tuple(map(float, p.split(","))) for p in found.group(1).split()]


def test_chart_maps_points_into_the_plot_and_drops_non_finite_ones():
    svg = line_chart(
        [Series("a", [(0, 1.0), (50, math.nan), (100, 2.0)], "#000")],
        x_label="tokens", y_label="bpb", width=400, height=200,
    )
    pts = _points(svg, "a")
    assert len(pts) == 2
    assert pts[0][0] == MARGIN_LEFT and pts[1][0] == 400 - MARGIN_RIGHT
    assert pts[0][1] > pts[1][1]  # the larger value is drawn higher
    assert svg.startswith("<svg") and svg.endswith("</svg>")


def test_chart_escapes_every_label():
    evil = "<script>x</script>"
    svg = line_chart([Series(evil, [(1, 1.0), (2, 2.0)], '"red')], x_label=evil,
                     y_label=evil, hlines=[HLine(evil, 1.5, "#f00")], title=evil)
    assert "<script>" not in svg
    # aria-label, title, data-label, legend, reference line, both axes
    assert svg.count("&lt;script&gt;") == 7
    assert 'stroke="&quot;red"' in svg


def test_empty_chart_says_so():
    svg = line_chart([Series("a", [], "#000")], x_label="x", y_label="y")
    assert "no data to plot" in svg and "polyline" not in svg


def test_short_series_get_a_dot_per_point():
    one = line_chart([Series("a", [(100, 5.0)], "#000")], x_label="x", y_label="y")
    assert one.count("<circle") == 1
    long = line_chart([Series("a", [(i, 1.0 / (i + 1)) for i in range(31)], "#000")],
                      x_label="x", y_label="y")
    assert long.count("<circle") == 0 and len(_points(long, "a")) == 31
