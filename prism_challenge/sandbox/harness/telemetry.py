"""`ctx.log`: the miner's own telemetry, bounded so no run can flood the validator with it.

At most `MAX_KEYS` distinct names per run (short identifiers), finite numbers only, and at
most `MAX_POINTS` points: past that the series is thinned (every other point dropped and
later points kept at half the rate), so the whole run stays covered in bounded memory.
"""

from __future__ import annotations

import math
import re

MAX_KEYS = 16
MAX_KEY_CHARS = 48
MAX_POINTS = 1000
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


class Telemetry:
    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.points: list[dict] = []
        self.stride = 1
        self.calls = 0

    def log(self, step: int, scalars: dict) -> None:
        self.calls += 1
        if (self.calls - 1) % self.stride:
            return
        values = {}
        for key, value in scalars.items():
            if not (isinstance(key, str) and len(key) <= MAX_KEY_CHARS and _KEY.fullmatch(key)):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            value = float(value)
            if not math.isfinite(value):
                continue
            if key not in self.keys:
                if len(self.keys) >= MAX_KEYS:
                    continue
                self.keys.add(key)
            values[key] = value
        if not values:
            return
        self.points.append({"step": int(step), "values": values})
        if len(self.points) >= MAX_POINTS:
            self.points = self.points[::2]
            self.stride *= 2
