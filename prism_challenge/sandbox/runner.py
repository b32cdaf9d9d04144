"""One re-execution of a submission, end to end: feeder + train sandbox + eval sandbox.

This is the only place that knows the sandbox layout (what is mounted where). It returns a
`RunRecord` assembled from what the challenge itself observed; it never unpickles anything
the miner's process wrote (snapshots and weights are only loaded inside the eval sandbox).
"""

from __future__ import annotations

import copy
import json
import math
import os
import secrets
import shutil
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism_challenge.config.settings import Settings
from prism_challenge.sandbox.backends import (
    GpuDevice,
    IsolationBackend,
    Limits,
    Mount,
    SandboxResult,
    SandboxSpec,
    minimal_env,
)
from prism_challenge.sandbox.devices import discover_gpus
from prism_challenge.sandbox.faults import host_fault
from prism_challenge.sandbox.feeder import Feeder, FeederPlan, Served
from prism_challenge.sandbox.record import (
    AuditEntry,
    BatchEntry,
    Budget,
    Consumed,
    EvalResult,
    MeasuredAxes,
    Placement,
    ProbeResult,
    RunRecord,
)
from prism_challenge.sandbox.slots import Slot

CAUSE_TO_EXIT = {"timeout": "deadline", "memory": "memory", "pids": "pids", "disk": "disk",
                 "output": "output", "cancelled": "infra", "host_memory": "infra"}
EVAL_RESULT_MAX_BYTES = 1 << 20
PROBE_POSITIONS = 3
MAX_PROBE_ROWS = 64


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
    def eval_submission(self) -> Path:
        return self.root / "eval_submission"

    @property
    def eval_inputs(self) -> Path:
        return self.root / "eval_inputs"

    @property
    def eval_scratch(self) -> Path:
        return self.root / "eval_scratch"

    def create(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        for d in (self.submission, self.sock, self.scratch, self.eval_submission,
                  self.eval_inputs, self.eval_scratch):
            d.mkdir(parents=True)


def _python() -> str:
    return sys.executable


def launcher_args(nproc: int) -> tuple[str, ...]:
    return ("torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}")


def train_argv(nproc: int) -> tuple[str, ...]:
    """Training always starts under torchrun (one process too): every rank gets the same
    environment contract and the same loopback rendezvous."""
    return (_python(), "-m", *launcher_args(nproc), "--no-python", _python(), "-m",
            "prism_challenge.sandbox.harness.train_main")


def budget_of(stream, seq_len: int, rows: int, separator_id: int) -> Budget:
    scored = nbytes = 0
    chunk = max(1, (1 << 22) // (seq_len + 1))
    for start in range(0, rows, chunk):
        targets = stream.rows(seq_len, start, min(chunk, rows - start))[:, 1:]
        scored += int(np.count_nonzero(targets != separator_id))
        nbytes += int(stream.byte_lengths[targets].sum())
    return Budget(rows=rows, tokens=rows * seq_len, scored_tokens=scored, bytes=nbytes)


class Runner:
    """Runs submissions under one settings object, backend and prepared data."""

    def __init__(self, settings: Settings, backend: IsolationBackend, train, val,
                 *, on_event: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> None:
        self.settings = settings
        self.backend = backend
        self.train = train
        self.val = val
        self.on_event = on_event or (lambda _msg: None)
        # (rows handed out so far, budget rows), polled while the train sandbox runs
        self.on_progress = on_progress or (lambda _done, _total: None)
        c = settings.challenge
        self.seq_len = c.seq_len
        self.budget_rows = self.train.budget_rows(c.seq_len, c.token_budget)
        self.separator_id = self.train.manifest.separator_id
        self.vocab_size = self.train.manifest.vocab_size
        self.budget = budget_of(self.train, c.seq_len, self.budget_rows, self.separator_id)
        if self.val.n_rows(c.seq_len) < 1:
            raise ValueError(f"the val split has no full row of seq_len {c.seq_len} + 1 tokens")
        self.slot: Slot | None = None

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
        if self.slot is not None:
            return self.slot.devices
        gpus = self.settings.sandbox.gpus
        return tuple(g.device for g in discover_gpus(gpus)) if gpus else ()

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
        threads = str(self.settings.sandbox.cpu_threads)
        return minimal_env({"PRISM_SEED": str(self.settings.challenge.seed),
                            "PRISM_THREADS": threads, "OMP_NUM_THREADS": threads,
                            "PRISM_SCRATCH": "/scratch", **extra})

    def _train_spec(self, paths: RunPaths, name: str) -> SandboxSpec:
        s, c = self.settings.sandbox, self.settings.challenge
        return SandboxSpec(
            argv=train_argv(s.nproc_per_node),
            mounts=(Mount(paths.submission, "/submission"),
                    Mount(paths.sock / "feeder.sock", "/run/prism/feeder.sock", writable=True),
                    Mount(paths.scratch, "/scratch", writable=True)),
            env=self._env({"PRISM_SUBMISSION": "/submission",
                           "PRISM_SOCKET": "/run/prism/feeder.sock"}),
            limits=self._limits(s.startup_grace_s + c.deadline_s + s.save_grace_s),
            scratch=paths.scratch, gpus=self.devices(),
            cpus=() if self.slot is None else self.slot.cpus, name=f"{name}-train",
        )

    def _eval_spec(self, paths: RunPaths, name: str) -> SandboxSpec:
        s = self.settings.sandbox
        return SandboxSpec(
            argv=(_python(), "-m", "prism_challenge.sandbox.harness.eval_main"),
            mounts=(Mount(paths.eval_submission, "/submission"),
                    Mount(paths.eval_inputs, "/inputs"),
                    Mount(paths.eval_scratch, "/scratch", writable=True)),
            env=self._env({"PRISM_SUBMISSION": "/submission", "PRISM_INPUTS": "/inputs"}),
            limits=self._limits(s.eval_time_s), scratch=paths.eval_scratch,
            gpus=self.devices(), cpus=() if self.slot is None else self.slot.cpus,
            name=f"{name}-eval",
        )

    # ---- one run --------------------------------------------------------------------------
    def run(self, files: Mapping[str, bytes], digest: str, run_dir: Path,
            *, cancel: threading.Event | None = None) -> RunRecord:
        """Re-execute one bundle; raises `Cancelled` when `cancel` is set meanwhile."""
        cancel = cancel or threading.Event()
        paths = RunPaths(Path(run_dir))
        paths.create()
        for fname in ("architecture.py", "training.py"):
            (paths.submission / fname).write_bytes(files[fname])
        (paths.eval_submission / "architecture.py").write_bytes(files["architecture.py"])
        name = f"prism-{digest[:12]}"
        secret = secrets.token_bytes(32)
        c = self.settings.challenge
        plan = FeederPlan(
            seq_len=c.seq_len, vocab_size=self.vocab_size, separator_id=self.separator_id,
            param_cap=c.param_cap, token_budget=self.budget_rows * c.seq_len,
            budget_rows=self.budget_rows, deadline_s=c.deadline_s,
            world_size=self.settings.sandbox.nproc_per_node, audit_secret=secret,
        )
        feeder = Feeder(self.train, plan, paths.sock / "feeder.sock")
        self.on_event("training in the sandbox")

        def stop_at() -> float | None:
            self.on_progress(feeder.state.next_row, self.budget_rows)
            if cancel.is_set():
                return 0.0
            return feeder.kill_at(self.settings.sandbox.save_grace_s)

        try:
            train_result = self.backend.run(self._train_spec(paths, name), stop_at=stop_at)
        finally:
            feeder.close()
        if cancel.is_set():
            raise Cancelled("the validator is shutting down")
        batches = feeder.reported()
        finish = feeder.state.finishes.get(0)
        exit_reason, exit_detail = _exit_of(train_result, feeder, on_gpus=bool(self.devices()))
        axes = _axes(finish.axes if finish else None)
        self.on_event("evaluating the final weights and the random-init twin")
        eval_result, eval_s, audits = self._evaluate(paths, name, batches, axes, secret, cancel)
        if cancel.is_set():
            raise Cancelled("the validator is shutting down")
        consumed = Consumed(rows=sum(b.rows for b in batches),
                            scored_tokens=sum(b.tokens for b in batches),
                            bytes=sum(b.bytes for b in batches),
                            nats=sum(b.nats for b in batches))
        ready = feeder.state.ready_at
        startup = (ready - feeder.t0) if ready else train_result.wall_s
        limits_hit = list(train_result.limits_hit) + list(feeder.state.problems[:5])
        return RunRecord(
            digest=digest, corpus=self.train.manifest.corpus,
            manifest_sha256=self.train.manifest.sha256, vocab_size=self.vocab_size,
            seq_len=c.seq_len, param_cap=c.param_cap, budget=self.budget, consumed=consumed,
            batches=[BatchEntry(step=b.step, rank=b.rank, offset_row=b.offset_row, rows=b.rows,
                                tokens=b.tokens, bytes=b.bytes, nats=b.nats, t=b.t or 0.0)
                     for b in batches],
            axes=axes, audits=audits, eval=eval_result, exit_reason=exit_reason,
            exit_detail=exit_detail, limits_hit=limits_hit, startup_s=round(startup, 3),
            train_s=round(max(0.0, train_result.wall_s - startup), 3), eval_s=round(eval_s, 3),
            placement=self.placement(),
        )

    def _evaluate(self, paths: RunPaths, name: str, batches: list[Served],
                  axes: MeasuredAxes | None, secret: bytes, cancel: threading.Event):
        c, sc = self.settings.challenge, self.settings.scoring
        rng = np.random.default_rng(int.from_bytes(secret[:8], "big"))
        T, sep = c.seq_len, self.separator_id
        val_rows_n = min(self.val.n_rows(T), math.ceil(c.val_tokens / T))
        val_rows = self.val.rows(T, 0, val_rows_n)
        np.save(paths.eval_inputs / "val_rows.npy", val_rows)
        batch_size = axes.batch_size if axes and axes.batch_size else 4
        probe_n = max(1, min(batch_size, MAX_PROBE_ROWS, val_rows_n))
        np.save(paths.eval_inputs / "probe_rows.npy", val_rows[:probe_n])
        positions = sorted(int(p) for p in rng.choice(T - 1, size=min(PROBE_POSITIONS, T - 1),
                                                      replace=False))
        audited = [b for b in batches if _snapshot(paths, b.step).is_file() and b.rank == 0]
        cfg: dict = {
            "seed": c.seed, "threads": self.settings.sandbox.cpu_threads,
            "separator_id": sep, "vocab_size": self.vocab_size, "seq_len": T,
            "param_cap": c.param_cap, "val_batch": 8, "audits": [], "step0": None,
            "probe": {"positions": positions, "seed": int(rng.integers(1, 2**31))},
        }
        for b in audited:
            snap, rows = f"audit_{b.step}.pt", f"audit_{b.step}_rows.npy"
            os.replace(_snapshot(paths, b.step), paths.eval_inputs / snap)
            np.save(paths.eval_inputs / rows, self.train.rows(T, b.offset_row, b.rows))
            entry = {"step": b.step, "snapshot": snap, "rows": rows}
            cfg["audits"].append(entry)
            if b.step == 0:
                cfg["step0"] = entry
        final = paths.scratch / "out" / "final.pt"
        if final.is_file() and not final.is_symlink():
            os.replace(final, paths.eval_inputs / "final.pt")
        (paths.eval_inputs / "eval.json").write_text(json.dumps(cfg))
        result = self.backend.run(self._eval_spec(paths, name),
                                  stop_at=lambda: 0.0 if cancel.is_set() else None)
        raw = _read_eval(paths.eval_scratch / "eval_result.json")
        val_targets = val_rows[:, 1:]
        val_bytes = int(self.val.byte_lengths[val_targets].sum())
        ln2 = math.log(2)

        def bpb(key: str) -> float | None:
            v = raw.get(key)
            return float(v) / ln2 / val_bytes if isinstance(v, int | float) and val_bytes else None

        def probe(key: str) -> ProbeResult | None:
            v = raw.get(key)
            if not isinstance(v, dict):
                return None
            diff = float(v.get("max_abs_diff", math.inf))
            return ProbeResult(ok=diff <= sc.probe_abs_tol, max_abs_diff=diff,
                               positions=positions)

        recomputed = {a.get("step"): a.get("recomputed_nats") for a in raw.get("audits", [])
                      if isinstance(a, dict)}
        audits = []
        for b in audited:
            r = recomputed.get(b.step)
            r = float(r) if isinstance(r, int | float) else None
            ok = r is not None and abs(r - b.nats) <= sc.audit_rel_tol * max(abs(b.nats), 1e-6)
            audits.append(AuditEntry(step=b.step, rank=b.rank, recorded_nats=b.nats,
                                     recomputed_nats=r, ok=ok))
        tokens0 = raw.get("twin_step0_tokens") or 0
        twin0 = raw.get("twin_step0_nats")
        exit_reason = "ok" if result.cause == "ok" else CAUSE_TO_EXIT.get(result.cause, "crash")
        detail = raw.get("detail") or result.detail
        if result.cause != "ok" and not raw:
            detail = f"{result.detail}: {result.output[-1500:]}"
        ev = EvalResult(
            val_bpb_trained=bpb("trained_val_nats"), val_bpb_twin=bpb("twin_val_nats"),
            val_tokens=int(raw.get("val_tokens") or 0), val_bytes=val_bytes,
            twin_step0_nats_per_token=(float(twin0) / tokens0) if twin0 is not None and tokens0
            else None,
            uniform_nats_per_token=math.log(self.vocab_size),
            probe_trained=probe("probe_trained"), probe_twin=probe("probe_twin"),
            step0_weights_match_twin=raw.get("step0_weights_match_twin"),
            exit_reason=exit_reason, detail=str(detail)[:4000],
        )
        return ev, result.wall_s, audits


def _snapshot(paths: RunPaths, step: int) -> Path:
    return paths.scratch / "audit" / f"step_{step:08d}.pt"


def _read_eval(path: Path) -> dict:
    try:
        if path.is_symlink() or path.stat().st_size > EVAL_RESULT_MAX_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _axes(raw: dict | None) -> MeasuredAxes | None:
    if not isinstance(raw, dict):
        return None
    try:
        return MeasuredAxes.model_validate(raw)
    except ValueError:
        return None


def _exit_of(result: SandboxResult, feeder: Feeder, *, on_gpus: bool = False) -> tuple[str, str]:
    """Why the training run ended, from the sandbox's cause and the harness's own report.

    On GPUs, a crash whose error shows a host fault (driver, ECC, NCCL system error, lost
    device) is infrastructure: requeued elsewhere, never charged to the miner. On a CPU slot
    no such error can be the host's, so none is believed.
    """
    if feeder.state.infra_error is not None:
        return "infra", feeder.state.infra_error
    if result.cause in CAUSE_TO_EXIT:
        return CAUSE_TO_EXIT[result.cause], result.detail
    finishes = feeder.state.finishes
    statuses = {f.status for f in finishes.values()}
    details = "; ".join(f.detail for f in finishes.values() if f.detail)
    if "contract" in statuses:
        return "contract", details
    if "crash" in statuses or result.cause == "crash" or not finishes:
        tail = result.output[-1500:] if not details else details
        fault = host_fault(f"{details}\n{result.output}") if on_gpus else None
        if fault is not None:
            return "infra", f"host fault ({fault.kind}): {fault.evidence}"
        return "crash", tail
    if feeder.state.next_row >= feeder.plan.budget_rows:
        return "ok", ""
    return "ok", "train() returned before the token budget was consumed"
