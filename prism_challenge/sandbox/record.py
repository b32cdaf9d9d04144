"""The run record: the challenge-authored account of one re-execution (docs/sandbox.md).

It is assembled outside the miner's process (by the feeder and the eval sandbox's output)
and is the only input of scoring and of the research registry. Versioned: readers refuse a
version they do not know.

Its JSON has a size fixed whatever the schedule: the per-step detail is `steps`, packed
columns that never enter the JSON (`steps.py`; stored as a blob beside it, sent as base64 in
`to_wire`), and `summary`, what pages and gates need of it. A record of version 1 or 2 (a
`batches` list of per-step objects) is converted when it is read.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from prism_challenge.sandbox.stack import Stack
from prism_challenge.sandbox.steps import StepColumns, StepSummary, summarise

RECORD_VERSION = 3


def competition_key(corpus: str, manifest_sha256: str, tokens: int, seq_len: int,
                    param_cap: int, lanes: int) -> str:
    """What a score competes within: the corpus name and, after '@', a hash of the terms that
    move a bpb (data version, token budget, row length, parameter cap, stream lanes).

    Two runs under other terms measured different things: their scores are never ranked
    together, never pooled across validators, and a leader under other terms sets no
    early-stop bar. An operator who changes the data or the budget starts a new leaderboard
    rather than comparing new runs with old ones."""
    terms = f"{manifest_sha256}:{tokens}:{seq_len}:{param_cap}:{lanes}"
    return f"{corpus}@{hashlib.sha256(terms.encode()).hexdigest()[:12]}"


def corpus_name(key: str) -> str:
    """The corpus name of a competition key ("demo" of "demo@1f2e..."; a bare name as is)."""
    return key.partition("@")[0]

ExitReason = Literal[
    "ok",  # train() returned and the final weights were saved
    "budget",  # the token budget ran out and the harness stopped the run cleanly
    "deadline",  # wall-clock deadline hit; the rest of the budget is charged
    "memory",  # memory limit hit, process tree killed
    "pids",  # process limit hit (fork bomb), process tree killed
    "disk",  # scratch-space limit hit
    "output",  # flooded stdout/stderr past the output limit
    "crash",  # the miner's code raised or a process died
    "contract",  # build_model/train broke the contract (bad output shape, over the cap...)
    "infra",  # the validator's side failed (retryable)
]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BatchEntry(Model):
    """One scored batch, as the harness reported it and the feeder counted it (a row of
    `StepColumns`; the per-step list of records before version 3)."""

    step: int = Field(ge=0)
    rank: int = Field(0, ge=0)
    offset_row: int = Field(ge=0)  # stream position of the batch's first row (stream order)
    rows: int = Field(ge=1)
    tokens: int = Field(ge=0)  # scored target tokens, counted by the feeder
    bytes: int = Field(ge=0)  # UTF-8 bytes of those tokens, counted by the feeder
    nats: float  # the feeder's sum of the per-position losses the harness reported
    t: float = Field(ge=0)  # seconds since the train sandbox started when it was reported
    # losses at the positions the record keeps (drawn by `RunRecord.sample_secret`, each
    # with chance `RunRecord.keep_rate`), in `sampling.kept_positions` order
    sample: list[float] = []


class Budget(Model):
    rows: int = Field(ge=0)
    tokens: int = Field(ge=0)  # target tokens in the budget (rows * seq_len)
    scored_tokens: int = Field(ge=0)  # of which non-separator
    bytes: int = Field(ge=0)


class Consumed(Model):
    rows: int = Field(ge=0)
    scored_tokens: int = Field(ge=0)
    bytes: int = Field(ge=0)
    nats: float


class OptimizerAxis(Model):
    """One optimiser that stepped the model's own parameters (decoys are not recorded)."""

    cls: str
    hparams: dict[str, float | int | bool | str | None | list[float]]
    steps: int = Field(0, ge=0)  # steps that could move a model parameter (0: older record)
    moved: int = Field(0, ge=0)  # model parameter elements those steps could move, summed
    # how far those steps moved them: L1 norm of each step's change, summed (estimated from
    # elements drawn at every step; 0: older record)
    update: float = Field(0.0, ge=0)


class MeasuredAxes(Model):
    """What the harness observed about the submission (the registry's measured axes)."""

    param_count: int = Field(ge=0)
    # elements of every tensor the model holds (parameters, buffers, tensor attributes)
    state_count: int | None = Field(None, ge=0)
    layer_count: int = Field(ge=0)
    module_census: dict[str, int]
    optimizers: list[OptimizerAxis] = []  # the furthest-moving first
    batch_size: int | None = None  # rows per scored step (row-weighted median, the feeder's)
    precision: str = "fp32"  # of the iterator that produced most scored rows
    compile: bool = False  # most scored rows came from a compiled forward
    world_size: int = 1
    # model state kept outside parameters and buffers, as the harness saw it change
    state_outside: list[str] = Field([], max_length=8)


class AuditEntry(Model):
    step: int
    rank: int = 0
    recorded_nats: float
    recomputed_nats: float | None = None
    ok: bool | None = None


class ProbeResult(Model):
    """The causality screen, and the held-out recheck: `max_abs_diff` is the largest change
    of a logit when later tokens or other rows changed; `rows_apart` the largest change (in
    nats) of a held-out answer given again with other rows beside it (None: not measured)."""

    ok: bool
    max_abs_diff: float
    positions: list[int]
    rows_apart: float | None = None


class EvalResult(Model):
    """What the eval sandbox (architecture.py only) measured.

    Held-out values are target-absent: each scored position was predicted from inputs that
    held its context and not the token it predicts, so no look-ahead can lower them.
    """

    val_bpb_trained: float | None = None
    val_bpb_twin: float | None = None  # capped at the know-nothing bpb
    val_tokens: int = 0  # held-out positions scored
    # standard errors of the held-out bpbs, from the per-row losses (rows are the clusters)
    val_bpb_trained_se: float | None = None
    val_bpb_twin_se: float | None = None
    # SE of the delta twin - trained: both answer the same positions, so it is the SE of the
    # per-row paired difference (smaller than either SE when the two losses move together)
    heldout_delta_se: float | None = None
    # the trained model's bits and the text bytes of each held-out plan row, in plan order:
    # two runs on the same round's plan compare row by row (a paired difference and its SE)
    val_row_bits: list[float] = []
    val_row_bytes: list[int] = []
    # the round whose secret drew the plan, and sha256 of that secret (published beforehand)
    heldout_round: str = ""
    heldout_commit: str = ""
    val_bytes: int = 0
    # the random-init twin's target-absent loss per token: the first batch's reference
    twin_step0_nats_per_token: float | None = None
    uniform_nats_per_token: float  # ln(vocab_size): what a know-nothing model pays
    probe_trained: ProbeResult | None = None
    probe_twin: ProbeResult | None = None
    step0_weights_match_twin: bool | None = None  # info: train() changed weights before step 0
    exit_reason: ExitReason = "ok"
    detail: str = ""


TRAIN_OUTPUT_CHARS = 64 * 1024


def output_tail(text: str, limit: int = TRAIN_OUTPUT_CHARS) -> str:
    """The last `limit` characters of a sandbox's output, NULs replaced (PostgreSQL's JSON
    refuses them), cut at a line start when one is near."""
    tail = text[-limit:].replace("\x00", "\ufffd")
    if len(text) > limit and "\n" in tail[:200]:
        tail = tail[tail.index("\n") + 1:]
    return tail


class TelemetryPoint(Model):
    """What `ctx.log` reported at one step: shown, never scored."""

    step: int = Field(ge=0)
    values: dict[str, float]


class Placement(Model):
    """Where the run executed: the validator slot, the GPUs and CPU cores it owned, and the
    launcher that started training."""

    slot: int | None = None  # None: a run outside the validator's slots (`prism eval`)
    node: str | None = None  # the cluster node that ran it (validator.executor: ray)
    gpus: list[str] = []
    cpus: list[int] = []
    launcher: str


class EarlyStop(Model):
    """The run was stopped at a checkpoint because even the conservative bound on its final
    prequential bpb could not clear the bar the validator fixed before it started: its score
    is censored (known only to be at least `bound_bpb`), never a full result."""

    checkpoint: float = Field(gt=0, lt=1)  # fraction of the budget's rows
    position: int = Field(ge=0)  # stream rows consumed when judged
    bound_bpb: float
    target_bpb: float  # (1 - dethrone margin) * the leader's bpb
    leader_submission: int
    max_gain: float


class RecordError(ValueError):
    """A record read without the per-step columns a caller needs."""


class RunRecord(Model):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    version: Literal[1, 2, 3] = RECORD_VERSION
    digest: str
    corpus: str  # "demo" or "fineweb-edu" (from the data MANIFEST)
    manifest_sha256: str
    vocab_size: int = Field(ge=2)
    seq_len: int = Field(ge=1)
    param_cap: int = Field(ge=1)
    budget: Budget
    consumed: Consumed
    summary: StepSummary  # bounded: totals, first step, non-finite count, curve buckets
    # the per-step columns; never in the JSON (None when read without its blob)
    steps: StepColumns | None = Field(None, exclude=True, repr=False)
    axes: MeasuredAxes | None = None
    audits: list[AuditEntry] = []
    eval: EvalResult | None = None
    exit_reason: ExitReason
    exit_detail: str = ""
    limits_hit: list[str] = []
    startup_s: float = 0.0
    train_s: float = 0.0
    eval_s: float = 0.0
    lanes: int = 0  # the stream order's lane count (0: a record made before lanes)
    sample_rows: int = 0  # records before per-position keeping: positions kept per batch
    keep_rate: float = Field(0.0, ge=0, le=1)  # each scored position's chance of being kept
    sample_secret: str = ""  # hex; decided which positions were kept (known after the run)
    telemetry: list[TelemetryPoint] = []
    # the training sandbox's own stdout and stderr (the loop's print()s), its last
    # TRAIN_OUTPUT_CHARS characters: shown, never scored
    train_output: str = Field("", max_length=TRAIN_OUTPUT_CHARS)
    placement: Placement | None = None
    stopped_early: EarlyStop | None = None
    # what the run computed with (stack.py): a replay on another stack is not comparable
    stack: Stack | None = None

    @model_validator(mode="before")
    @classmethod
    def _pack(cls, data: Any) -> Any:
        """Per-step input as columns: a `batches` list (a record before version 3, or one
        built in code), or the blob/base64 of `steps`; the summary computed from them."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "batches" in data:
            if data.get("steps") is not None:
                raise ValueError("a record has either a batches list or steps, not both")
            data["steps"] = StepColumns.from_entries(data.pop("batches") or [])
        steps = data.get("steps")
        if isinstance(steps, str):
            steps = base64.b64decode(steps, validate=True)
        if isinstance(steps, bytes | bytearray | memoryview):
            steps = StepColumns.from_bytes(bytes(steps))
        data["steps"] = steps
        if isinstance(steps, StepColumns) and data.get("summary") is None:
            data["summary"] = summarise(steps)
        return data

    @property
    def competition(self) -> str:
        """The key its score is stored, ranked and pooled under (`competition_key`)."""
        return competition_key(self.corpus, self.manifest_sha256, self.budget.tokens,
                               self.seq_len, self.param_cap, self.lanes)

    @property
    def columns(self) -> StepColumns:
        """The per-step columns; a clear error when the record was read without them."""
        if self.steps is None:
            raise RecordError("this run record was read without its per-step columns "
                              "(run_records.steps); read it with RunRecord.stored(row)")
        return self.steps

    def steps_blob(self) -> bytes | None:
        """The columns packed for the store (None when the record has none)."""
        return None if self.steps is None else self.steps.to_bytes()

    def to_wire(self) -> dict:
        """The record as JSON with its columns as base64 (between processes and hosts)."""
        blob = self.steps_blob()
        return {**self.model_dump(mode="json"),
                "steps": None if blob is None else base64.b64encode(blob).decode()}

    def with_steps(self, steps: StepColumns | Iterable[BatchEntry]) -> RunRecord:
        """A copy whose per-step columns are `steps` (the summary computed again)."""
        cols = steps if isinstance(steps, StepColumns) else StepColumns.from_entries(steps)
        return self.model_copy(update={"steps": cols, "summary": summarise(cols)})

    @classmethod
    def stored(cls, row: Any) -> RunRecord:
        """A record from its store row: the JSON and its per-step blob."""
        return cls.model_validate({**row.record, "steps": row.steps})

    def telemetry_series(self) -> dict[str, list[tuple[int, float]]]:
        """`ctx.log` as one (step, value) series per name, in step order (names sorted)."""
        series: dict[str, list[tuple[int, float]]] = {}
        for point in sorted(self.telemetry, key=lambda p: p.step):
            for name, value in point.values.items():
                series.setdefault(name, []).append((point.step, value))
        return dict(sorted(series.items()))
