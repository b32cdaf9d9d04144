"""One re-execution of a submission, end to end: feeder + train sandbox + eval sandbox.

This is the only place that knows the sandbox layout (what is mounted where). `run` returns
a `RunRecord` assembled from what the challenge itself observed; `replay` re-runs a scored
run for a contender and returns a `ReplayRecord`. Nothing the miner's process wrote is ever
unpickled here (weights and snapshots are only loaded inside the eval sandbox), and nothing
the validator knows is placed in a sandbox as a file: rows, cut inputs and plans travel over
sockets, one batch or task at a time.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism_challenge.config.settings import Settings
from prism_challenge.hardware.devices import discover_gpus
from prism_challenge.hardware.slots import Slot
from prism_challenge.isolation import (
    GpuDevice,
    IsolationBackend,
    Limits,
    Mount,
    SandboxResult,
    SandboxSpec,
    minimal_env,
)
from prism_challenge.sandbox.early_eval import EarlyEval
from prism_challenge.sandbox.early_stop import EarlyStopPlan, plan_early_stop
from prism_challenge.sandbox.eval_server import Answer, EvalServer, Task
from prism_challenge.sandbox.feeder import Feeder, FeederPlan, ReplayPlan
from prism_challenge.sandbox.harness.axes import step_rows
from prism_challenge.sandbox.heldout import (
    RECHECK,
    HeldOutPlan,
    heldout_plan,
    ratio_se,
    recheck_task,
    row_nats,
    rows_apart,
)
from prism_challenge.sandbox.heldout_round import LOCAL_ROUND, HeldOutRound
from prism_challenge.sandbox.progress import (
    HELDOUT,
    REPLAY,
    REPLAY_EVAL,
    TRAINING,
    ProgressCallback,
    RunProgress,
    ignore,
)
from prism_challenge.sandbox.record import (
    Budget,
    Consumed,
    EarlyStop,
    EvalResult,
    MeasuredAxes,
    Placement,
    ProbeResult,
    RunRecord,
    TelemetryPoint,
    competition_key,
    output_tail,
)
from prism_challenge.sandbox.sampling import keep_rate
from prism_challenge.sandbox.stack import HARDWARE, combine, hardware, not_comparable
from prism_challenge.sandbox.steps import StepColumns
from prism_challenge.sandbox.stream_order import LaneOrder
from prism_challenge.sandbox.torch_support import check_torch
from prism_challenge.verification.replay import (
    DrawnPlan,
    PositionTally,
    ReplayRecord,
    choose_checks,
    compare_batches,
    compare_probes,
    compare_snapshots,
    draw_plan,
    probe_seconds,
    snapshot_tasks,
)

CAUSE_TO_EXIT = {"timeout": "deadline", "memory": "memory", "pids": "pids", "disk": "disk",
                 "output": "output", "cancelled": "infra", "host_memory": "infra"}
PROBE_POSITIONS = 3
MAX_PROBE_ROWS = 8
HELDOUT_BATCH = 32
LN2 = math.log(2.0)
REPLAY_SLACK = 1.25  # a replay may take this much longer than the deadline to reach its checks


class Cancelled(RuntimeError):
    """The run was stopped by the validator (shutdown); it says nothing about the miner."""


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def sock(self) -> Path:
        return self.root / "sock"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    @property
    def snapshots(self) -> Path:
        """Where the feeder writes a replay's snapshots as they arrive: on the host, in no
        sandbox's mounts, so nothing the training run does after a snapshot can rewrite it."""
        return self.root / "snapshots"

    @property
    def eval_submission(self) -> Path:
        return self.root / "eval_submission"

    @property
    def eval_inputs(self) -> Path:
        return self.root / "eval_inputs"

    @property
    def eval_scratch(self) -> Path:
        return self.root / "eval_scratch"

    def create(self, files: Mapping[str, bytes]) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        for d in (self.submission, self.sock, self.scratch, self.snapshots,
                  self.eval_submission, self.eval_inputs, self.eval_scratch):
            d.mkdir(parents=True)
        for fname in ("architecture.py", "training.py"):
            (self.submission / fname).write_bytes(files[fname])
        (self.eval_submission / "architecture.py").write_bytes(files["architecture.py"])

    def move_to_eval(self, path: Path) -> bool:
        """Hand a file the run wrote in its scratch (the final weights) to the eval sandbox,
        if it is a plain file and not a link the miner planted."""
        inside = path.resolve().is_relative_to(self.scratch.resolve())
        if inside and path.is_file() and not path.is_symlink():
            os.replace(path, self.eval_inputs / path.name)
            return True
        return False


def _python() -> str:
    return sys.executable


LAUNCH = "prism_challenge.sandbox.harness.launch"
WORKER = "prism_challenge.sandbox.harness.train_main"


def launcher_args(nproc: int) -> tuple[str, ...]:
    """How training's ranks are started: by the harness's launcher, which gives each rank
    the environment torchrun would (`harness/launch.py`): one becomes the worker, several
    are forked from it with torch already imported."""
    if nproc == 1:
        return (LAUNCH, "--single")
    return (LAUNCH, "--ranks", str(nproc))


def launch_argv(nproc: int, worker: Sequence[str]) -> tuple[str, ...]:
    """The train sandbox's command line for `worker` (an argv) on `nproc` ranks."""
    return (_python(), "-m", *launcher_args(nproc), *worker)


def train_argv(nproc: int) -> tuple[str, ...]:
    return launch_argv(nproc, (_python(), "-m", WORKER))


def budget_of(stream, seq_len: int, order: LaneOrder, separator_id: int) -> Budget:
    """Scored tokens and bytes of the whole budget (lane ends are not scored)."""
    rows = order.budget_rows
    scored = nbytes = 0
    chunk = max(1, (1 << 22) // (seq_len + 1))
    for start in range(0, rows, chunk):
        targets = stream.rows(seq_len, start, min(chunk, rows - start))[:, 1:]
        scored += int(np.count_nonzero(targets != separator_id))
        nbytes += int(stream.byte_lengths[targets].sum())
    for row in order.unscored:
        last = int(stream.rows(seq_len, row, 1)[0, -1])
        if last != separator_id:
            scored -= 1
            nbytes -= int(stream.byte_lengths[last])
    return Budget(rows=rows, tokens=rows * seq_len, scored_tokens=scored, bytes=nbytes)


class Runner:
    """Runs submissions under one settings object, backend and prepared data."""

    # A sandbox given GPUs must see CUDA (else the run is the host's fault). Only a fake GPU
    # host, whose device nodes stand in for GPUs that cannot run, turns this off.
    cuda_required = True
    # A run's eval sandbox starts with its train sandbox and waits at its hello until the
    # final weights are there (`early_eval.py`); off, it starts once training has ended.
    early_eval = True

    def __init__(self, settings: Settings, backend: IsolationBackend, train, val,
                 *, on_event: Callable[[str], None] | None = None,
                 on_progress: ProgressCallback | None = None) -> None:
        check_torch()  # the sandbox runs this interpreter's torch
        self.settings = settings
        self.backend = backend
        self.train = train
        self.val = val
        self.on_event = on_event or (lambda _msg: None)
        # where the running phase stands, polled while each sandbox runs
        self.on_progress = on_progress or ignore
        c = settings.challenge
        self.seq_len = c.seq_len
        self.budget_rows = self.train.budget_rows(c.seq_len, c.token_budget)
        self.separator_id = self.train.manifest.separator_id
        self.vocab_size = self.train.manifest.vocab_size
        self.order = LaneOrder(self.budget_rows, c.stream_lanes)
        self.budget = budget_of(self.train, c.seq_len, self.order, self.separator_id)
        v = settings.verification
        self.keep_rate = keep_rate(v.kept_positions, self.budget_rows * c.seq_len,
                                   v.keep_rate_max)
        if self.val.n_rows(c.seq_len) < 2:
            raise ValueError(f"the val split holds fewer than two rows of seq_len {c.seq_len}"
                             " + 1 tokens")
        self.slot: Slot | None = None
        self._devices: tuple[GpuDevice, ...] | None = None  # sandbox.gpus, discovered once

    @classmethod
    def from_data(cls, settings: Settings, backend: IsolationBackend, data_root: Path,
                  **kwargs) -> Runner:
        """Open (and hash-verify) the train and val splits of the prepared data."""
        from prism_challenge.data import TokenStream

        return cls(settings, backend, TokenStream.open(data_root, "train"),
                   TokenStream.open(data_root, "val"), **kwargs)

    # ---- placement ------------------------------------------------------------------------
    def on_slot(self, slot: Slot) -> Runner:
        """This runner with every sandbox placed on `slot`'s GPUs and cores (data shared)."""
        placed = copy.copy(self)
        placed.slot = slot
        return placed

    def devices(self) -> tuple[GpuDevice, ...]:
        """The GPUs a sandbox of this runner gets: its slot's, else `sandbox.gpus` (empty:
        every GPU the host has, as on the validator), discovered once per runner."""
        if self.slot is not None:
            return self.slot.devices
        if self._devices is None:
            found = discover_gpus(self.settings.sandbox.gpus)
            self._devices = tuple(g.device for g in found)
        return self._devices

    def placement(self) -> Placement:
        return Placement(slot=None if self.slot is None else self.slot.index,
                         gpus=[d.id for d in self.devices()],
                         cpus=[] if self.slot is None else list(self.slot.cpus),
                         launcher=" ".join(launcher_args(self.settings.sandbox.nproc_per_node)))

    # ---- sandboxes ------------------------------------------------------------------------
    def _limits(self, wall_s: float) -> Limits:
        s = self.settings.sandbox
        return Limits(wall_s=wall_s, memory_bytes=s.memory_bytes, pids_max=s.pids_max,
                      disk_bytes=s.disk_bytes, output_bytes=s.output_bytes)

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        """The sandbox's whole environment. A compiled model's kernels are built with the
        run's own CPU threads: inductor would otherwise start a pool of compile workers, one
        per visible core, each importing torch."""
        threads = str(self.settings.sandbox.cpu_threads)
        return minimal_env({"PRISM_SEED": str(self.settings.challenge.seed),
                            "PRISM_THREADS": threads, "OMP_NUM_THREADS": threads,
                            "PRISM_DETERMINISTIC": "1" if self.settings.sandbox
                            .deterministic_algorithms else "0",
                            "TORCHINDUCTOR_COMPILE_THREADS": threads,
                            "PRISM_SCRATCH": "/scratch",
                            "PRISM_SOCKET": "/run/prism/feeder.sock", **extra})

    def _train_spec(self, paths: RunPaths, name: str, deadline_s: float,
                    prewarm: bool = True) -> SandboxSpec:
        s = self.settings.sandbox
        return SandboxSpec(
            argv=train_argv(s.nproc_per_node),
            mounts=(Mount(paths.submission, "/submission"),
                    Mount(paths.sock / "feeder.sock", "/run/prism/feeder.sock", writable=True),
                    Mount(paths.scratch, "/scratch", writable=True)),
            env=self._env({"PRISM_SUBMISSION": "/submission"}),
            limits=self._limits(s.startup_grace_s + deadline_s + s.save_grace_s),
            scratch=paths.scratch, gpus=self.devices(),
            cpus=() if self.slot is None else self.slot.cpus, name=f"{name}-train",
            prewarm=prewarm,
        )

    def _eval_spec(self, paths: RunPaths, name: str) -> SandboxSpec:
        s = self.settings.sandbox
        return SandboxSpec(
            argv=(_python(), "-m", "prism_challenge.sandbox.harness.eval_main"),
            mounts=(Mount(paths.eval_submission, "/submission"),
                    Mount(paths.eval_inputs, "/inputs"),
                    Mount(paths.sock / "eval.sock", "/run/prism/feeder.sock", writable=True),
                    Mount(paths.eval_scratch, "/scratch", writable=True)),
            env=self._env({"PRISM_SUBMISSION": "/submission", "PRISM_INPUTS": "/inputs"}),
            limits=self._limits(s.eval_time_s), scratch=paths.eval_scratch,
            gpus=self.devices(), cpus=() if self.slot is None else self.slot.cpus,
            name=f"{name}-eval", tmp_writable=False,
        )

    @property
    def competition(self) -> str:
        """The competition this runner's runs are scored in (`RunRecord.competition` of each
        record it makes): its data version and budget terms."""
        m, c = self.train.manifest, self.settings.challenge
        return competition_key(m.corpus, m.sha256, self.budget.tokens, c.seq_len,
                               c.param_cap, c.stream_lanes)

    def early_stop_plan(self, leader_bpb: float, leader_id: int, leader: RunRecord
                        ) -> EarlyStopPlan | None:
        """The bar a run here must be able to clear (`plan_early_stop` on this stream)."""
        return plan_early_stop(self.settings.scoring, leader_bpb, leader_id, leader,
                               manifest_sha256=self.train.manifest.sha256,
                               lanes=self.order.lanes, budget=self.budget)

    def _feeder_plan(self, secret: bytes, early_stop: EarlyStopPlan | None = None
                     ) -> FeederPlan:
        c = self.settings.challenge
        return FeederPlan(
            seq_len=c.seq_len, vocab_size=self.vocab_size, separator_id=self.separator_id,
            param_cap=c.param_cap, token_budget=self.budget_rows * c.seq_len,
            budget_rows=self.budget_rows, deadline_s=c.deadline_s,
            world_size=self.settings.sandbox.nproc_per_node, sample_secret=secret,
            keep_rate=self.keep_rate, lanes=c.stream_lanes, early_stop=early_stop,
            gpus=len(self.devices()) if self.cuda_required else 0,
            snapshot_bytes=self.settings.sandbox.disk_bytes,
        )

    def _early_eval(self, paths: RunPaths, name: str, plan: FeederPlan,
                    cancel: threading.Event) -> EarlyEval | None:
        """This run's eval sandbox, started now to wait for its work (`early_eval.py`); it
        may wait as long as the train sandbox may run."""
        if not self.early_eval:
            return None
        server = EvalServer(paths.sock / "eval.sock", None, None, self.vocab_size,
                            scratch=paths.eval_scratch)
        train_wall = self._train_spec(paths, name, plan.deadline_s).limits.wall_s
        return EarlyEval(self.backend, self._eval_spec(paths, name), server,
                         wait_limit_s=train_wall, cancel=cancel)

    def _train(self, paths: RunPaths, name: str, plan: FeederPlan, cancel: threading.Event,
               replay: ReplayPlan | None = None) -> tuple[Feeder, SandboxResult]:
        feeder = Feeder(self.train, plan, paths.sock / "feeder.sock", replay=replay,
                        snapshot_dir=paths.snapshots if replay is not None else None)
        phase = TRAINING if replay is None else REPLAY

        def stop_at() -> float | None:
            done, last = feeder.state.next_position, feeder.state.last_loss
            self.on_progress(RunProgress(phase, done, self.budget_rows, "rows",
                                         done * self.seq_len, *(last[::-1] if last else ())))
            if cancel.is_set():
                return 0.0
            return feeder.kill_at(self.settings.sandbox.save_grace_s)

        # a replay starts as its original did: a program can tell a cold start from a
        # prewarmed one, and a replay it could recognise would check nothing
        cold = replay is not None and replay.stack is not None and replay.stack.start == "cold"
        try:
            result = self.backend.run(self._train_spec(
                paths, name, plan.deadline_s + plan.probe_allowance_s, prewarm=not cold),
                stop_at=stop_at)
        finally:
            feeder.close()
        if cancel.is_set():
            raise Cancelled("the validator is shutting down")
        return feeder, result

    def _eval(self, paths: RunPaths, name: str, tasks: Iterator[Task], precision: str,
              cancel: threading.Event, *, phase: str = HELDOUT, positions: int | None = None,
              early: EarlyEval | None = None) -> tuple[EvalServer, SandboxResult]:
        c = self.settings.challenge
        sb = self.settings.sandbox
        hello = {"seed": c.seed, "threads": sb.cpu_threads, "gpu_spares": sb.eval_gpu_spares,
                 "gpu_warmup": sb.eval_gpu_warmup,
                 "separator_id": self.separator_id, "vocab_size": self.vocab_size,
                 "seq_len": c.seq_len, "param_cap": c.param_cap, "precision": precision,
                 # the held-out build is made once, before any task (a replay's eval has none)
                 "held_out": phase == HELDOUT}
        if early is not None:  # started with training; its work is handed over now
            early.open(hello, tasks, lambda: self.on_progress(
                _eval_progress(phase, list(early.server.answers), positions)))
            result = early.wait()
            if cancel.is_set():
                raise Cancelled("the validator is shutting down")
            return early.server, result
        server = EvalServer(paths.sock / "eval.sock", hello, tasks, self.vocab_size,
                            scratch=paths.eval_scratch)

        def stop_at() -> float | None:
            self.on_progress(_eval_progress(phase, list(server.answers), positions))
            return 0.0 if cancel.is_set() else None

        try:
            result = self.backend.run(self._eval_spec(paths, name), stop_at=stop_at)
        finally:
            server.close()
        if cancel.is_set():
            raise Cancelled("the validator is shutting down")
        return server, result

    # ---- one run --------------------------------------------------------------------------
    def run(self, files: Mapping[str, bytes], digest: str, run_dir: Path,
            *, cancel: threading.Event | None = None,
            early_stop: EarlyStopPlan | None = None,
            heldout_round: HeldOutRound = LOCAL_ROUND) -> RunRecord:
        """Re-execute one bundle; raises `Cancelled` when `cancel` is set meanwhile.

        With `early_stop` (fixed by the validator before the run), the feeder stops serving
        at a checkpoint where the run can no longer take the lead; the record says so. A plan
        made for another budget is refused (ValueError) before anything runs. The held-out
        positions are `heldout_round`'s plan: the same for every run of the round."""
        if early_stop is not None and not early_stop.fits(self.budget_rows, self.budget.bytes):
            raise ValueError(f"an early-stop plan for {int(early_stop.leader.edges[-1])} rows "
                             f"and {early_stop.budget_bytes} bytes does not fit this runner's "
                             f"budget ({self.budget_rows} rows, {self.budget.bytes} bytes)")
        cancel = cancel or threading.Event()
        paths = RunPaths(Path(run_dir))
        paths.create(files)
        name = f"prism-{digest[:12]}"
        secret = secrets.token_bytes(32)
        self.on_event("training in the sandbox")
        plan = self._feeder_plan(secret, early_stop)
        early = self._early_eval(paths, name, plan, cancel)
        try:
            return self._run(paths, name, digest, secret, plan, early_stop, heldout_round,
                             cancel, early)
        finally:
            if early is not None:
                early.abandon()

    def _run(self, paths: RunPaths, name: str, digest: str, secret: bytes, plan: FeederPlan,
             early_stop: EarlyStopPlan | None, heldout_round: HeldOutRound,
             cancel: threading.Event, early: EarlyEval | None) -> RunRecord:
        feeder, train_result = self._train(paths, name, plan, cancel)
        batches = feeder.reported()
        finish = feeder.state.finishes.get(0)
        exit_reason, exit_detail = _exit_of(train_result, feeder)
        stopped = _stopped_early(feeder, early_stop, self.budget_rows)
        if stopped is not None and exit_reason == "ok":
            exit_detail = (f"stopped early at {stopped.checkpoint:.0%} of the budget: "
                           f"{feeder.state.stopped.reason}")
        axes = _axes(finish.axes if finish else None)
        if axes is not None:  # rows per step as the feeder served them, not as asked
            axes.batch_size = step_rows([len(b.rows) for b in batches])
        self.on_event("evaluating the final weights and the random-init twin (held out)")
        evals, eval_s = self._evaluate(paths, name, axes, secret, [heldout_round], cancel,
                                       early=early)
        eval_result = evals[0]
        c = self.settings.challenge
        consumed = Consumed(rows=sum(len(b.rows) for b in batches),
                            scored_tokens=sum(b.tokens for b in batches),
                            bytes=sum(b.bytes for b in batches),
                            nats=math.fsum(b.nats for b in batches))
        ready = feeder.state.ready_at
        startup = (ready - feeder.t0) if ready else train_result.wall_s
        limits_hit = list(train_result.limits_hit) + list(feeder.state.problems[:5])
        if exit_reason == "deadline" and "deadline_s" not in limits_hit:
            limits_hit.insert(0, "deadline_s")
        return RunRecord(
            digest=digest, corpus=self.train.manifest.corpus,
            manifest_sha256=self.train.manifest.sha256, vocab_size=self.vocab_size,
            seq_len=c.seq_len, param_cap=c.param_cap, budget=self.budget, consumed=consumed,
            steps=step_columns(batches),
            axes=axes, eval=eval_result, exit_reason=exit_reason,
            exit_detail=exit_detail, limits_hit=limits_hit, startup_s=round(startup, 3),
            train_s=round(max(0.0, train_result.wall_s - startup), 3), eval_s=round(eval_s, 3),
            lanes=c.stream_lanes, keep_rate=self.keep_rate,
            sample_secret=secret.hex(), telemetry=_telemetry(finish.telemetry if finish else []),
            train_output=output_tail(train_result.output),
            placement=self.placement(), stopped_early=stopped,
            stack=combine(feeder.state.stack, hardware(self.devices())),
        )

    def _evaluate(self, paths: RunPaths, name: str, axes: MeasuredAxes | None,
                  secret: bytes, rounds: Sequence[HeldOutRound], cancel: threading.Event,
                  twin: bool = True, twin_rounds: int | None = None,
                  early: EarlyEval | None = None
                  ) -> tuple[list[EvalResult], float]:
        """Held-out bpb of the trained model and its twin, target-absent; causality screen.

        Each held-out plan is a round's (a function of its secret and the data version); the
        trained model and its twin answer the same positions, so their delta is a paired
        difference. Several rounds share one eval sandbox (one result each, in order); the
        twin answers the first `twin_rounds` of them (None: all); the causality probe is the
        run's own draw."""
        sc, T = self.settings.scoring, self.seq_len
        plans = [heldout_plan(self.val, T, sc.heldout_positions, sc.heldout_cuts_per_row,
                              r.rng(self.val.manifest.sha256, T)) for r in rounds]
        rng = np.random.default_rng(int.from_bytes(secret[8:16], "big"))
        probe_rows = self.val.rows_at(T, np.arange(1, self.val.n_rows(T), 2)[:MAX_PROBE_ROWS])
        positions = sorted(int(p) for p in rng.choice(T - 1, size=min(PROBE_POSITIONS, T - 1),
                                                      replace=False))
        causality = {"positions": positions, "seed": int(rng.integers(1, 2**31))}
        trained = paths.move_to_eval(paths.scratch / "out" / "final.pt")
        models = (("trained",) if trained else ()) + (("twin",) if twin else ())

        twins = len(plans) if twin_rounds is None else twin_rounds

        def answering(k: int) -> tuple[str, ...]:
            return models if k < twins else tuple(m for m in models if m != "twin")

        rechecks = {m: recheck_task(plans[0], m, HELDOUT_BATCH, self.separator_id, rng, 0)
                    for m in answering(0)}

        def tasks() -> Iterator[Task]:
            for k, plan in enumerate(plans):
                for model in answering(k):
                    yield from plan.tasks(model, HELDOUT_BATCH, self.separator_id, k)
                    if k == 0:
                        yield rechecks[model]
            for model in models:
                yield Task("causality", model, probe_rows[:, :-1], causality=causality,
                           tag=model)

        precision = axes.precision if axes else "fp32"
        server, result = self._eval(paths, name, tasks(), precision, cancel,
                                    positions=sum(p.count * len(answering(k))
                                                  for k, p in enumerate(plans))
                                    + sum(len(t.select_rows) for t in rechecks.values()),
                                    early=early)
        out = []
        withhold = server.shown and any(r != LOCAL_ROUND for r in rounds)
        for k, (plan, r) in enumerate(zip(plans, rounds, strict=True)):
            ev = self._eval_result(plan, k, server.answers, trained, result, server.problems,
                                   positions, withhold=withhold)
            out.append(ev.model_copy(update={"heldout_round": r.label,
                                             "heldout_commit": r.commit}))
        return out, result.wall_s

    def evaluate_weights(self, files: Mapping[str, bytes], weights: Path, run_dir: Path,
                         rounds: Sequence[HeldOutRound], precision: str = "fp32",
                         twin: bool = True, twin_rounds: int | None = None
                         ) -> list[EvalResult]:
        """The held-out evaluation alone, of saved final weights, under each of `rounds` in
        one eval sandbox: what other rounds' plans would have measured. One result per
        round, in order; with `twin` false the twin is not evaluated (the gap needs only the
        trained model), with `twin_rounds` it answers only the first that many rounds."""
        paths = RunPaths(Path(run_dir))
        paths.create(files)
        (paths.scratch / "out").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(weights, paths.scratch / "out" / "final.pt")
        axes = MeasuredAxes.model_construct(precision=precision)
        evs, _ = self._evaluate(paths, "prism-reeval", axes, secrets.token_bytes(32),
                                list(rounds), threading.Event(), twin=twin,
                                twin_rounds=twin_rounds)
        return evs

    def _eval_result(self, plan: HeldOutPlan, label: int, answers: list[Answer],
                     trained: bool, result: SandboxResult, problems: list[str],
                     positions: list[int], withhold: bool = False) -> EvalResult:
        """The evaluation's figures and how it ended. `withhold`: the eval sandbox was shown
        held-out inputs of a secret round, so nothing it wrote (its error text, its output)
        goes into the record: the plan is the same for every run of the round and each cut
        shows the previous cut's target, so published text would hand the round's targets
        to the next bundle. Its cause still does."""
        sc = self.settings.scoring
        log2v = math.log2(self.vocab_size)
        row_bytes = self.val.byte_lengths[plan.targets()].sum(axis=1)
        nbytes = int(row_bytes.sum())

        def held(model: str) -> tuple[float | None, float | None, np.ndarray | None]:
            """(bpb, nats per token, bits per plan row) of one model on the plan."""
            got = plan_answers(model)
            if sum(len(a.nats) for a in got) != plan.count or nbytes == 0:
                return None, None, None
            nats = math.fsum(float(x) for a in got for x in a.nats)
            return nats / LN2 / nbytes, nats / plan.count, row_nats(plan, got) / LN2

        def plan_answers(model: str) -> list[Answer]:
            return [a for a in answers if a.task.kind == "logits" and a.task.model == model
                    and a.task.tag[2] == label and a.task.tag[1] != RECHECK]

        def apart(model: str) -> float | None:
            """How far the model's answers moved when the rows beside them changed (the
            recheck of the first plan; None where there is none or the plan is short)."""
            got = plan_answers(model)
            if sum(len(a.nats) for a in got) != plan.count:
                return None
            for a in answers:
                if (a.task.kind == "logits" and a.task.model == model
                        and a.task.tag[1] == RECHECK and a.task.tag[2] == label):
                    return rows_apart(plan, got, a)
            return None

        def probe(model: str) -> ProbeResult | None:
            for a in answers:
                if a.task.kind == "causality" and a.task.model == model and a.result:
                    diff = a.result.get("max_abs_diff")
                    diff = float(diff) if isinstance(diff, int | float) else math.inf
                    moved = apart(model)
                    return ProbeResult(ok=diff <= sc.probe_abs_tol
                                       and (moved is None or moved <= sc.probe_abs_tol),
                                       max_abs_diff=diff, positions=positions,
                                       rows_apart=moved)
            return None

        val_bpb, _, val_bits = held("trained") if trained else (None, None, None)
        twin_bpb, twin_nats, twin_bits = held("twin")
        if twin_bpb is not None:  # a twin worse than knowing nothing cannot widen the delta
            twin_bpb = min(twin_bpb, log2v * plan.count / nbytes)
        delta_se = (ratio_se(twin_bits - val_bits, row_bytes)
                    if val_bits is not None and twin_bits is not None else None)
        exit_reason = "ok" if result.cause == "ok" else CAUSE_TO_EXIT.get(result.cause, "crash")
        detail = "; ".join(problems)
        if result.cause != "ok" or (problems and exit_reason == "ok"):
            exit_reason = exit_reason if exit_reason != "ok" else "crash"
            detail = (f"{result.detail} (after it was given held-out inputs of a secret round, "
                      "what the model wrote is not published: run `prism eval` to see it)"
                      if withhold else f"{detail} {result.detail}: {result.output[-1500:]}"
                      ).strip()
        if not trained:
            detail = (detail + " no final weights were saved by the training run").strip()
        return EvalResult(
            val_bpb_trained=val_bpb, val_bpb_twin=twin_bpb,
            val_tokens=plan.count if val_bits is not None else 0,
            val_bytes=nbytes if val_bits is not None else 0,
            val_bpb_trained_se=None if val_bits is None else ratio_se(val_bits, row_bytes),
            val_bpb_twin_se=None if twin_bits is None else ratio_se(twin_bits, row_bytes),
            heldout_delta_se=delta_se,
            val_row_bits=[] if val_bits is None else [round(float(b), 6) for b in val_bits],
            val_row_bytes=[] if val_bits is None else [int(b) for b in row_bytes],
            twin_step0_nats_per_token=twin_nats,
            uniform_nats_per_token=math.log(self.vocab_size),
            probe_trained=probe("trained"), probe_twin=probe("twin"),
            exit_reason=exit_reason, detail=detail[:4000],
        )

    # ---- contender replay ------------------------------------------------------------------
    def replay(self, files: Mapping[str, bytes], record: RunRecord, run_dir: Path,
               *, cancel: threading.Event | None = None, plan: DrawnPlan | None = None
               ) -> ReplayRecord:
        """Re-run a scored run with the checks of `plan` (the verification's stored draw;
        drawn now when None); raises `Cancelled` on shutdown."""
        cancel = cancel or threading.Event()
        if (not record.sample_secret or not record.keep_rate
                or record.lanes != self.settings.challenge.stream_lanes):
            raise ValueError("this record predates contender replay or was made with another "
                             "stream order; re-evaluate the submission")
        if record.competition != self.competition:  # the operator changed data or terms
            return _incomparable(record, f"scored under {record.competition}; this validator "
                                 f"now runs {self.competition} (another data version or "
                                 "challenge terms): replay it where those are kept", 0.0)
        here = hardware(self.devices())
        why = not_comparable(record.stack, here, HARDWARE)
        if why is not None:  # another GPU model or driver: nothing to learn by running
            return _incomparable(record, why, 0.0)
        v = self.settings.verification
        paths = RunPaths(Path(run_dir))
        paths.create(files)
        name = f"prism-{record.digest[:12]}-replay"
        secret = bytes.fromhex(record.sample_secret)
        checks = choose_checks(record, plan or draw_plan(record, snapshots=v.snapshot_steps))
        checks = dataclasses.replace(checks, stack=record.stack)
        plan = self._feeder_plan(secret)
        # the probes' own time moves the deadline out (up to the original deadline again), so
        # an honest run that used most of its deadline still reaches its checks
        plan = dataclasses.replace(plan, deadline_s=plan.deadline_s * REPLAY_SLACK,
                                   keep_rate=record.keep_rate,
                                   probe_allowance_s=plan.deadline_s)
        self.on_event("replaying the run with checks drawn now")
        t0 = time.monotonic()
        feeder, train_result = self._train(paths, name, plan, cancel, replay=checks)
        train_s = time.monotonic() - t0
        if feeder.state.incomparable is not None:  # another torch, CUDA or cuDNN build
            return _incomparable(record, feeder.state.incomparable, train_s)
        served = sorted(feeder.state.served.values(), key=lambda s: (s.step, s.rank))
        missing: list[str] = []
        probes = PositionTally(v.position_abs_tol, v.position_rel_tol)
        compare_probes(record, served, probes, missing)
        names = {}
        for s in served:  # each snapshot as the feeder received it, whole, before the forward
            if s.snapshot_asked:
                if s.snapshot is not None:
                    os.replace(s.snapshot, paths.eval_inputs / s.snapshot.name)
                    names[(s.step, s.rank)] = s.snapshot.name
                else:
                    missing.append(f"no snapshot for step {s.step} rank {s.rank}")
        snapshots = PositionTally(v.position_abs_tol, v.position_rel_tol)
        eval_s = 0.0
        if names:
            self.on_event("re-predicting the snapshots' kept positions (architecture only)")
            precision = record.axes.precision if record.axes else "fp32"
            server, result = self._eval(paths, name, snapshot_tasks(
                record, served, self.train, names, self.separator_id), precision, cancel,
                phase=REPLAY_EVAL)
            eval_s = result.wall_s
            compare_snapshots(record, server.answers, snapshots)
            answered = {a.task.tag[:2] for a in server.answers}
            # a rank may hold no kept position at a snapshotted step: nothing to answer
            cols, held = record.columns, record.columns.held()
            missing += [f"the eval sandbox did not re-predict step {k[0]} rank {k[1]}: "
                        f"{result.cause} {'; '.join(server.problems)[:300]}"
                        for k in names if k not in answered
                        and (i := cols.find(*k)) is not None and held[i]]
        exit_reason, exit_detail = _exit_of(train_result, feeder)
        reached = max((s.step for s in served if s.nats is not None), default=-1)
        if reached < checks.last_step and feeder.state.diverged is None:
            missing.append(f"the replay stopped at step {reached}, before step "
                           f"{checks.last_step} ({exit_reason}: {exit_detail[:300]})")
        return ReplayRecord(
            digest=record.digest, exit_reason=exit_reason, exit_detail=exit_detail[:4000],
            diverged=feeder.state.diverged, probe_steps=sorted(checks.probe_steps),
            snapshot_steps=sorted(checks.snapshot_steps), last_step=checks.last_step,
            probes=probes.result(), snapshots=snapshots.result(), missing=missing[:20],
            state_outside=list(record.axes.state_outside) if record.axes else [],
            train_s=round(train_s, 3), eval_s=round(eval_s, 3),
            probe_s=round(probe_seconds(served), 3),
            **compare_batches(record, served, v.batch_rel_tol),
        )


def step_columns(batches) -> StepColumns:
    """The feeder's reported batches as the record's packed per-step columns."""
    starts, samples = [0], []
    for b in batches:
        samples.extend(b.sample or [])
        starts.append(len(samples))
    return StepColumns(
        step=[b.step for b in batches], rank=[b.rank for b in batches],
        offset_row=[b.position for b in batches], rows=[len(b.rows) for b in batches],
        tokens=[b.tokens for b in batches], bytes=[b.bytes for b in batches],
        nats=[b.nats for b in batches], t=[b.t or 0.0 for b in batches],
        sample_start=starts, sample=samples)


def _eval_progress(phase: str, answers: list[Answer], positions: int | None
                   ) -> RunProgress:
    """An evaluation's progress: held-out positions answered and their running loss, or
    (no position count given: the replay's snapshots) tasks answered."""
    if positions is None:
        return RunProgress(phase, len(answers), None, "tasks", 0)
    got = [a.nats for a in answers if a.task.kind == "logits" and a.nats is not None]
    n = sum(len(x) for x in got)
    loss = math.fsum(float(x.sum()) for x in got) / n if n else None
    return RunProgress(phase, n, positions, "positions", n, loss)


def _incomparable(record: RunRecord, why: str, train_s: float) -> ReplayRecord:
    """A replay on another stack than the run's: nothing compared, nothing judged."""
    return ReplayRecord(digest=record.digest, exit_reason="infra", exit_detail=why,
                        probe_steps=[], snapshot_steps=[], last_step=-1,
                        train_s=round(train_s, 3), incomparable=why)


def _axes(raw: dict | None) -> MeasuredAxes | None:
    if not isinstance(raw, dict):
        return None
    try:
        return MeasuredAxes.model_validate(raw)
    except ValueError:
        return None


def _stopped_early(feeder: Feeder, plan: EarlyStopPlan | None, budget_rows: int
                   ) -> EarlyStop | None:
    decision = feeder.state.stopped
    if decision is None or plan is None:
        return None
    return EarlyStop(checkpoint=plan.checkpoints[decision.checkpoint] / budget_rows,
                     position=decision.position, bound_bpb=decision.bound_bpb,
                     target_bpb=plan.target_bpb, leader_submission=plan.leader_id,
                     max_gain=plan.max_gain)


def _telemetry(raw) -> list[TelemetryPoint]:
    """The harness's bounded telemetry, validated; anything malformed is dropped."""
    points = []
    for item in raw if isinstance(raw, list) else []:
        try:
            points.append(TelemetryPoint.model_validate(item))
        except ValueError:
            continue
        if len(points) >= 1000:
            break
    return points


def _exit_of(result: SandboxResult, feeder: Feeder) -> tuple[str, str]:
    """Why the training run ended, from the sandbox's cause and the harness's own report.

    A sandbox that ends before any rank's hello ran none of the miner's code: infra. After
    that, a crash is the miner's whatever its text says (a driver error can be printed by
    anyone): only the host's own evidence, the kernel's Xids for the slot's GPUs or a failing
    health probe after the run (`validator/rotation.py`), turns it into infrastructure.
    """
    if feeder.state.infra_error is not None:
        return "infra", feeder.state.infra_error
    if not feeder.state.claimed:
        # no rank said hello: the sandbox or the harness failed before any of the miner's
        # code was imported (the environment, the framework, the host), never the miner
        return "infra", (f"the sandbox ended before its harness started ({result.cause}: "
                         f"{result.detail}); none of the miner's code had run: "
                         f"{result.output[-1200:]}")
    if result.cause in CAUSE_TO_EXIT:
        return CAUSE_TO_EXIT[result.cause], result.detail
    finishes = feeder.state.finishes
    statuses = {f.status for f in finishes.values()}
    details = "; ".join(f.detail for f in finishes.values() if f.detail)
    if "contract" in statuses:
        return "contract", details
    if "crash" in statuses or result.cause == "crash" or not finishes:
        return "crash", result.output[-1500:] if not details else details
    if feeder.state.next_position >= feeder.plan.budget_rows:
        return "ok", ""
    cut = feeder.state.deadline_cut_row
    if cut is not None:
        return "deadline", (f"deadline_s {feeder.plan.deadline_s:g} s ran out at budget row "
                            f"{cut:,} of {feeder.plan.budget_rows:,}; the rest is charged")
    return "ok", "train() returned before the token budget was consumed"
