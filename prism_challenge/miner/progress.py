"""`prism eval`'s progress: every phase (training, held-out evaluation, replay) shows its
count, tokens/s, the current loss and an ETA.

On a terminal it is a live rich bar. In a pipe or a log a bar would print nothing readable,
so a heartbeat thread prints one line every `interval_s` seconds (at most `MAX_INTERVAL_S`)
with the phase's latest state, whether or not the sandbox reported anything new: a phase
that stalls shows as the same line repeating, never as silence.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from prism_challenge.sandbox.progress import MAX_INTERVAL_S, RunProgress


class PhaseState:
    """One phase's latest progress; its rate is measured from the first report that moved
    (a sandbox's start-up, importing torch and building the model, is not a rate)."""

    def __init__(self, label: str, phase: str | None = None) -> None:
        self.label = label  # the runner's words for it, until its first report names it
        self.phase = phase
        self.t0 = time.monotonic()
        self.last: RunProgress | None = None
        self.first: tuple[float, int, int] | None = None  # (time, done, tokens) when it moved

    def update(self, progress: RunProgress) -> None:
        if self.first is None and progress.done > 0:
            self.first = (time.monotonic(), progress.done, progress.tokens)
        self.last = progress

    def describe(self) -> str:
        """'training: 48/96 rows (50%), 1,536 tokens at 812 tokens/s, loss 5.213, ETA 2 s'"""
        p, now = self.last, time.monotonic()
        if p is None or p.done == 0:
            return f"{self.label}: starting ({now - self.t0:.0f} s)"
        count = f"{p.done:,}/{p.total:,} {p.unit}" if p.total else f"{p.done:,} {p.unit}"
        if p.total:
            count += f" ({p.done / p.total:.0%})"
        parts = [count]
        t1, done1, tokens1 = self.first or (now, p.done, p.tokens)
        span = now - t1
        if p.tokens:
            word = "tokens" if p.unit == "rows" else "positions"
            rate = f" at {(p.tokens - tokens1) / span:,.0f} {word}/s" \
                if span > 0 and p.tokens > tokens1 else ""
            parts.append(f"{p.tokens:,} {word}{rate}")
        if p.loss is not None:
            at = f" (step {p.step})" if p.step is not None else ""
            parts.append(f"loss {p.loss:.3f} nats/token{at}")
        if p.total and p.done >= p.total:
            parts.append("finishing")
        elif p.total and p.done > done1 and span > 0:
            parts.append(f"ETA {span * (p.total - p.done) / (p.done - done1):,.0f} s")
        return f"{self.label}: " + ", ".join(parts)


class EvalProgress:
    """The `on_event` / `on_progress` pair for `evaluate_bundle`, as a context manager."""

    def __init__(self, stream: TextIO, *, live: bool, interval_s: float = MAX_INTERVAL_S
                 ) -> None:
        if not 0 < interval_s <= MAX_INTERVAL_S:
            raise ValueError(f"the progress interval must be in (0, {MAX_INTERVAL_S:g}] s, "
                             f"not {interval_s:g}")
        self.stream, self.live, self.interval_s = stream, live, interval_s
        self.phase = PhaseState("preparing (static gates, data)")
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Progress | None = None
        self._task = None

    # ---- callbacks ------------------------------------------------------------------------
    def on_event(self, message: str) -> None:
        """A new phase begins (the runner's own words for it); off a terminal the phase that
        ends prints its last state first."""
        if not self.live and self._thread is not None and self.phase.last is not None:
            print(self.line(), file=self.stream, flush=True)
        with self._lock:
            self.phase = PhaseState(message)
        self._refresh()

    def on_progress(self, progress: RunProgress) -> None:
        with self._lock:
            if self.phase.phase is None:  # the phase the last event began
                self.phase.phase = self.phase.label = progress.phase
            elif self.phase.phase != progress.phase:
                self.phase = PhaseState(progress.phase, progress.phase)
            self.phase.update(progress)
        self._refresh()

    # ---- output ---------------------------------------------------------------------------
    def line(self) -> str:
        with self._lock:
            text = self.phase.describe()
        return f"[progress +{time.monotonic() - self.t0:.1f} s] {text}"

    def _refresh(self) -> None:
        if self._bar is None:
            return
        with self._lock:
            p, text = self.phase.last, self.phase.describe()
        self._bar.update(self._task, description=text,
                         completed=p.done if p else 0, total=p.total if p else None)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            print(self.line(), file=self.stream, flush=True)

    def __enter__(self) -> EvalProgress:
        if self.live:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TimeElapsedColumn(), console=Console(file=self.stream),
                                 transient=False)
            self._task = self._bar.add_task("starting", total=None)
            self._bar.__enter__()
        else:
            print(self.line(), file=self.stream, flush=True)
            self._thread = threading.Thread(target=self._beat, name="prism-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        print(self.line(), file=self.stream, flush=True)
