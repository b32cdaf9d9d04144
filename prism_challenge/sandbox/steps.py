"""A run's per-step detail as packed columns, and the fixed-size summary a record carries.

A miner chooses how many steps its budget is cut into (up to one row each), so the per-step
detail of a run grows with a number the miner picks. It is therefore never a list of Python
objects: `StepColumns` holds one numpy array per field (step, rank, stream position, rows,
tokens, bytes, nats, time) plus the kept losses as one flat array with per-step offsets, and
travels as one compressed `.npz` blob (`to_bytes`, little-endian, no pickles) stored beside
the record (`run_records.steps`). The record itself keeps only a `StepSummary`, whose size
does not depend on the step count: totals, the first step's loss, the non-finite count and
the learning curve merged into at most `CURVE_BUCKETS` buckets. Scoring and replay read the
columns with vectorised numpy; pages read the summary.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

CURVE_BUCKETS = 1024  # learning-curve buckets a record keeps (consecutive batches merged)
NON_FINITE_SHOWN = 5

# column -> dtype (little-endian); `sample_start` has one more entry than the others
DTYPES = {"step": "<i8", "rank": "<i8", "offset_row": "<i8", "rows": "<i8", "tokens": "<i8",
          "bytes": "<i8", "nats": "<f8", "t": "<f8", "sample_start": "<i8", "sample": "<f8"}
NON_NEGATIVE = ("step", "rank", "offset_row", "tokens", "bytes")


class StepsError(ValueError):
    """Per-step columns that cannot be read (corrupt blob, ragged or negative columns)."""


@dataclass(frozen=True, eq=False)
class StepColumns:
    """Every scored batch of a run, one array per field, in the order they were reported."""

    step: np.ndarray
    rank: np.ndarray
    offset_row: np.ndarray  # stream position of the batch's first row
    rows: np.ndarray
    tokens: np.ndarray  # scored target tokens, counted by the feeder
    bytes: np.ndarray  # UTF-8 bytes of those tokens
    nats: np.ndarray  # the feeder's sum of the per-position losses
    t: np.ndarray  # seconds since the train sandbox started
    sample_start: np.ndarray  # batch i's kept losses are sample[sample_start[i]:[i+1]]
    sample: np.ndarray

    def __post_init__(self) -> None:
        for f in fields(self):
            value = np.ascontiguousarray(getattr(self, f.name), dtype=DTYPES[f.name])
            if value.ndim != 1:
                raise StepsError(f"step column {f.name} is not one-dimensional")
            object.__setattr__(self, f.name, value)
        n = len(self.step)
        ragged = [f.name for f in fields(self)
                  if f.name not in ("sample_start", "sample") and len(getattr(self, f.name)) != n]
        if ragged or len(self.sample_start) != n + 1:
            which = ", ".join(ragged) or "sample_start"
            raise StepsError(f"step columns of unequal length ({which}); the record's "
                             f"per-step blob is corrupt")
        starts = self.sample_start
        if starts[0] != 0 or starts[-1] != len(self.sample) or np.any(np.diff(starts) < 0):
            raise StepsError("kept-loss offsets do not cover the kept losses in order")
        for name in NON_NEGATIVE:
            if n and getattr(self, name).min() < 0:
                raise StepsError(f"step column {name} holds a negative value")
        if n and (self.rows.min() < 1 or not self.t.min() >= 0):
            raise StepsError("step column rows < 1 or t negative")

    # ---- building and packing -------------------------------------------------------------
    @classmethod
    def from_entries(cls, entries: Iterable) -> StepColumns:
        """From `BatchEntry`s or their dicts (a literal list, or a record from before columns)."""
        from prism_challenge.sandbox.record import BatchEntry

        cols: dict[str, list] = {name: [] for name in DTYPES if name != "sample_start"}
        starts = [0]
        for raw in entries:
            e = raw if isinstance(raw, BatchEntry) else BatchEntry.model_validate(raw)
            for name in ("step", "rank", "offset_row", "rows", "tokens", "bytes", "nats", "t"):
                cols[name].append(getattr(e, name))
            cols["sample"].extend(e.sample)
            starts.append(len(cols["sample"]))
        return cls(sample_start=np.array(starts), **{k: np.array(v) for k, v in cols.items()})

    @classmethod
    def empty(cls) -> StepColumns:
        return cls.from_entries([])

    def to_bytes(self) -> bytes:
        """An `.npz` (zip of `.npy`, deflate level 1: most of the gain, a fraction of the
        time of the default level on float columns)."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for f in fields(self):
                with zf.open(f"{f.name}.npy", "w") as fh:
                    np.lib.format.write_array(fh, getattr(self, f.name), allow_pickle=False)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> StepColumns:
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
                missing = set(DTYPES) - set(npz.files)
                if missing:
                    raise StepsError(f"per-step blob lacks column(s) {', '.join(sorted(missing))}")
                return cls(**{name: npz[name] for name in DTYPES})
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            if isinstance(exc, StepsError):
                raise
            raise StepsError(f"per-step blob is not a PRISM step table ({exc}); the record "
                             f"must be re-run or restored from a backup") from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepColumns):
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name), equal_nan=True)
                   for f in fields(self))

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.step)

    # ---- reading ---------------------------------------------------------------------------
    def stream_order(self) -> np.ndarray:
        """Indices in the order the stream served the batches (step, rank, offset_row)."""
        return np.lexsort((self.offset_row, self.rank, self.step))

    def position_order(self) -> np.ndarray:
        """Indices by stream position (offset_row, rank, step): the learning curve's order."""
        return np.lexsort((self.step, self.rank, self.offset_row))

    def samples(self, i: int) -> list[float]:
        """Batch i's kept losses, in `sampling.kept_positions` order."""
        return self.sample[self.sample_start[i]:self.sample_start[i + 1]].tolist()

    def held(self) -> np.ndarray:
        """A boolean per batch: it holds at least one kept loss."""
        return np.diff(self.sample_start) > 0

    @cached_property
    def _keys(self) -> tuple[int, np.ndarray, np.ndarray]:
        """(ranks, sorted step * ranks + rank, the batch index of each): built once."""
        width = int(self.rank.max(initial=0)) + 1
        key = self.step * width + self.rank
        order = np.argsort(key, kind="stable")
        return width, key[order], order

    def find(self, step: int, rank: int) -> int | None:
        """The index of the batch reported for (step, rank) (the last one if repeated);
        a binary search over keys sorted once."""
        width, keys, order = self._keys
        if rank >= width or step < 0 or rank < 0 or not len(self):
            return None
        want = step * width + rank
        at = int(np.searchsorted(keys, want, side="right")) - 1
        return int(order[at]) if at >= 0 and keys[at] == want else None

    def entries(self) -> Iterator:
        """Each batch as a `BatchEntry`: for inspecting small records, never a validator path."""
        from prism_challenge.sandbox.record import BatchEntry

        for i in range(len(self)):
            yield BatchEntry(step=int(self.step[i]), rank=int(self.rank[i]),
                             offset_row=int(self.offset_row[i]), rows=int(self.rows[i]),
                             tokens=int(self.tokens[i]), bytes=int(self.bytes[i]),
                             nats=float(self.nats[i]), t=float(self.t[i]), sample=self.samples(i))


class RowsAndNats:
    """(step, rank) -> (rows, nats) over the columns, the lookup a replay plan needs."""

    def __init__(self, columns: StepColumns) -> None:
        self.columns = columns

    def get(self, key: tuple[int, int], default=None):
        i = self.columns.find(*key)
        if i is None:
            return default
        return int(self.columns.rows[i]), float(self.columns.nats[i])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and self.get(key) is not None

    def __len__(self) -> int:
        return len(self.columns)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CurveBucket(_Model):
    """Consecutive batches by stream position, merged: their summed counts and loss."""

    batches: int = Field(ge=1)
    tokens: int = Field(ge=0)
    bytes: int = Field(ge=0)
    nats: float


class StepSummary(_Model):
    """What pages and gates need of the per-step detail, in a size fixed whatever the schedule."""

    count: int = Field(ge=0)  # batches recorded
    tokens: int = Field(ge=0)
    bytes: int = Field(ge=0)
    nats: float  # math.fsum over the batches
    first_step_tokens: int = Field(0, ge=0)  # the first step, all ranks: the init's loss
    first_step_nats: float = 0.0
    non_finite: int = Field(0, ge=0)  # batches with a NaN or infinite loss
    non_finite_shown: list[str] = Field([], max_length=NON_FINITE_SHOWN)
    curve: list[CurveBucket] = Field([], max_length=CURVE_BUCKETS)


def summarise(cols: StepColumns) -> StepSummary:
    """The fixed-size summary of `cols` (exact sums; curve buckets of consecutive batches)."""
    n = len(cols)
    bad = np.flatnonzero(~np.isfinite(cols.nats))
    shown = [f"batch step {cols.step[i]} rank {cols.rank[i]}" for i in bad[:NON_FINITE_SHOWN]]
    first_tokens, first_nats = 0, 0.0
    if n:
        at_first = cols.step == cols.step.min()
        first_tokens = int(cols.tokens[at_first].sum())
        first_nats = _fsum(cols.nats[at_first])
    curve = []
    if n:
        order = cols.position_order()
        size = max(1, math.ceil(n / CURVE_BUCKETS))
        starts = np.arange(0, n, size)
        counts = np.diff(np.append(starts, n))
        for c, tok, byt, nat in zip(counts.tolist(),
                                    np.add.reduceat(cols.tokens[order], starts).tolist(),
                                    np.add.reduceat(cols.bytes[order], starts).tolist(),
                                    np.add.reduceat(cols.nats[order], starts).tolist(),
                                    strict=True):
            curve.append(CurveBucket(batches=c, tokens=tok, bytes=byt, nats=nat))
    return StepSummary(count=n, tokens=int(cols.tokens.sum()), bytes=int(cols.bytes.sum()),
                       nats=_fsum(cols.nats), first_step_tokens=first_tokens,
                       first_step_nats=first_nats, non_finite=len(bad), non_finite_shown=shown,
                       curve=curve)


def _fsum(values: np.ndarray) -> float:
    """The correctly rounded sum (numpy's when a value is not finite: NaN or inf it is)."""
    if np.isfinite(values).all():
        return math.fsum(values.tolist())
    return float(values.sum())
