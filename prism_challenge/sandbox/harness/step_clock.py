"""Where the host's time goes, for the benchmarks (never scored): the sandbox's start-up
phases (`StartClock`), each scored step (`StepClock`) and the eval sandbox's work
(`WorkClock`).

Each step of `ctx.batches()` passes the same marks: asking the feeder for rows (`rows`:
sending the last steps' losses and waiting for the reply), putting them on the device
(`prepare`), the scored forward (`forward`: on a GPU, the time to queue its kernels), the
loss and its queueing for the feeder (`loss`), and the miner's own code until it asks for
the next batch (`miner`: backward, optimizer step). On a GPU a segment that waits for the
device shows up long: that is where a harness step loses to a bare loop.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

SEGMENTS = ("rows", "prepare", "forward", "loss", "miner")
WARMUP = 5  # first steps left out: allocator, autotuning and compile warm-up


def since_process_start() -> float | None:
    """Seconds since this process was created (the interpreter's own start-up included), from
    /proc; None where /proc does not say."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, field 22 of proc(5)
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class StartClock:
    """Seconds of each start-up phase, in order: `interpreter` (process creation to the
    harness's first line), then what `mark` names (torch imported, hello answered, the
    miner's architecture imported and built, on the device, ready)."""

    def __init__(self) -> None:
        before = since_process_start()
        self.phases: dict[str, float] = {"interpreter": round(before, 4)} if before else {}
        self._last = time.perf_counter()

    def mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = round(now - self._last, 4)
        self._last = now

    def add(self, other: dict) -> None:
        """Another clock's `{"seconds": ..., "counts": ...}` (a task process's), summed in."""
        for kind, sec in other.get("seconds", {}).items():
            self.seconds[kind] = self.seconds.get(kind, 0.0) + float(sec)
            self.counts[kind] = self.counts.get(kind, 0) + int(other["counts"].get(kind, 1))

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.phases))


class StepClock:
    def __init__(self) -> None:
        self.totals = dict.fromkeys(SEGMENTS, 0.0)
        self.steps = 0
        self._last = time.perf_counter()
        self._seen = 0

    def mark(self, segment: str) -> None:
        """The segment that just ended (`miner` ends when the next batch is asked for)."""
        now = time.perf_counter()
        # `miner` closes the step whose loss was marked last, the others the coming one
        if self._seen - (segment == "miner") >= WARMUP:
            self.totals[segment] += now - self._last
        self._last = now
        if segment == "loss":
            self._seen += 1
            self.steps = max(0, self._seen - WARMUP)

    def restart(self) -> None:
        self._last = time.perf_counter()

    def summary(self) -> dict:
        """Milliseconds per step of each segment, over the steps after the warm-up."""
        n = max(self.steps, 1)
        return {"steps": self.steps,
                "ms_per_step": {k: round(v * 1e3 / n, 4) for k, v in self.totals.items()}}

    def add(self, other: dict) -> None:
        """Another clock's `{"seconds": ..., "counts": ...}` (a task process's), summed in."""
        for kind, sec in other.get("seconds", {}).items():
            self.seconds[kind] = self.seconds.get(kind, 0.0) + float(sec)
            self.counts[kind] = self.counts.get(kind, 0) + int(other["counts"].get(kind, 1))

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.summary()))


class WorkClock:
    """Seconds and counts of the eval sandbox's work by kind, summed over its tasks: `setup`
    (seeding, architecture.py, the held-out build), `spare_prepare` (a task process's threads,
    device context and model placement, while the previous task runs), `spare_idle` (its
    wait for that task's end), `wait` (for the host's next task), `build_pristine`,
    `build_full` and `build_kept` (a task's model: the held-out build as forked, a snapshot
    built in full, the same snapshot again), `forward` (the forward pass, and the picked
    logits back on the host), `probe` (the causality probe) and `send` (the answer to the
    host)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._last = time.perf_counter()

    def mark(self, kind: str) -> None:
        """The work of `kind` that just ended (since the previous mark)."""
        now = time.perf_counter()
        self.seconds[kind] = self.seconds.get(kind, 0.0) + now - self._last
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self._last = now

    def add(self, other: dict) -> None:
        """Another clock's `{"seconds": ..., "counts": ...}` (a task process's), summed in."""
        for kind, sec in other.get("seconds", {}).items():
            self.seconds[kind] = self.seconds.get(kind, 0.0) + float(sec)
            self.counts[kind] = self.counts.get(kind, 0) + int(other["counts"].get(kind, 1))

    def write(self, path: Path) -> None:
        path.write_text(json.dumps({"seconds": {k: round(v, 4) for k, v in self.seconds.items()},
                                    "counts": self.counts}))
