"""The run record: the challenge-authored account of one re-execution (docs/sandbox.md).

It is assembled outside the miner's process (by the feeder and the eval sandbox's output)
and is the only input of scoring and of the research registry. Versioned: readers refuse a
version they do not know.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RECORD_VERSION = 2

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
    """One scored batch, as the harness reported it and the feeder counted it."""

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
    ok: bool
    max_abs_diff: float
    positions: list[int]


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


class RunRecord(Model):
    version: Literal[1, 2] = RECORD_VERSION
    digest: str
    corpus: str  # "demo" or "fineweb-edu" (from the data MANIFEST)
    manifest_sha256: str
    vocab_size: int = Field(ge=2)
    seq_len: int = Field(ge=1)
    param_cap: int = Field(ge=1)
    budget: Budget
    consumed: Consumed
    batches: list[BatchEntry]
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
    placement: Placement | None = None
    stopped_early: EarlyStop | None = None

    def telemetry_series(self) -> dict[str, list[tuple[int, float]]]:
        """`ctx.log` as one (step, value) series per name, in step order (names sorted)."""
        series: dict[str, list[tuple[int, float]]] = {}
        for point in sorted(self.telemetry, key=lambda p: p.step):
            for name, value in point.values.items():
                series.setdefault(name, []).append((point.step, value))
        return dict(sorted(series.items()))
