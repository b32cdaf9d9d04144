"""Entry point of the EVAL sandbox: architecture.py and weights only, no training code.

The host hands out forward passes over a socket (see `eval_server.py`): held-out positions
for the trained model and its forced-seed random-init twin, the kept positions of a replay's
snapshots, and the causality probe. Every input arrives with the tokens it is scored on cut
away; this process answers with logits and never sees a target, and nothing the validator
knows is readable here as a file. The host turns logits into losses and bpb itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import traceback
from pathlib import Path

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.harness import cuda_start
from prism_challenge.sandbox.harness.buffers import buffers_kept
from prism_challenge.sandbox.harness.loading import CUDA_IN_BUILD, ContractError
from prism_challenge.sandbox.harness.quick_exit import exit_now
from prism_challenge.sandbox.harness.seeding import (
    held_out_mode,
    inductor_deterministic,
    task_modes,
)
from prism_challenge.sandbox.harness.step_clock import WorkClock
from prism_challenge.sandbox.harness.task_process import (
    DONE,
    FAILED,
    NEXT,
    fork_refusal,
    fork_task,
    read_report,
    run_task_processes,
)

MAX_INPUT_BYTES = 1 << 28
GPU_SPARES = 3  # task processes preparing ahead on a GPU host (task_process.py)


def main() -> int:
    # torch first: the sandbox may start while its run still trains, and its hello is answered
    # only when the final weights are there (sandbox/early_eval.py), so this import overlaps
    # training. Nothing of the miner's is imported before the hello, and this process never
    # touches CUDA at all: its task processes do (task_process.py).
    import numpy  # noqa: F401
    import torch  # noqa: F401

    # `torch.cuda.is_available()` in the miner's build asks NVML, not the CUDA driver: a
    # driver started in this process could not be used by the task processes it forks
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["PRISM_SOCKET"])
    protocol.send(sock, {"op": "hello"})
    cfg, _ = protocol.recv(sock)
    try:
        _serve(sock, cfg, Path(os.environ["PRISM_SUBMISSION"]), Path(os.environ["PRISM_INPUTS"]))
    except _Reported:
        return 1
    except Exception as exc:
        _report(sock, exc)
        return 1
    finally:
        sock.close()
    return 0


class _Models:
    """The models one evaluation answers with.

    The trained model and its twin are one forced-seed build (the trained one then loads
    the final weights). It is made once, in the eval process before it is shown any task,
    and every held-out task is answered in a process of its own forked from that untouched
    process (task_process.py): the task's model is the build as the fork copied it, so each
    held-out task is answered from the final weights and nothing any other task did - a
    model that updates itself while it is evaluated (test-time training on the held-out
    text it was shown) gains nothing, wherever in its process it keeps what it learnt.

    A replay snapshot is built in the process that answers its tasks (a run of consecutive
    tasks of that snapshot, re-trained step by step), from architecture.py as the eval
    process imported it and the snapshot's weights."""

    FRESH = ("trained", "twin")

    def __init__(self, architecture, cfg: dict, inputs: Path) -> None:
        import torch

        self.architecture = architecture
        self.cfg = cfg
        self.inputs = inputs
        self.device = torch.device("cpu")
        self.pristine = None  # the forced-seed build, made before any task
        self.final: dict | None = None  # final.pt, on the CPU: loaded into the trained model
        self.key: tuple | None = None
        self.model = None
        self.forward = None
        self.snapshot: dict | None = None
        self.built = ""  # how the last `get` made its model: "pristine", "full" or "kept"

    def build_pristine(self) -> None:
        """The forced-seed build, in the eval process (on the CPU, before any task). What it
        leaves must let the process fork (task_process.fork_refusal, checked before each)."""
        import torch

        self.pristine = self._build()
        final = self.inputs / "final.pt"
        if final.exists():
            self.final = torch.load(final, weights_only=True, map_location="cpu")

    def prepare(self) -> None:
        """In a task process before its task: the run's threads, the device's context, the
        build and the final weights onto the device, and on a GPU the kernels most forwards
        launch (warm_kernels.py). The harness's own code only (the AST policy keeps the
        miner's classes from overriding nn.Module's moving methods)."""
        import torch

        torch.set_num_threads(self.cfg["threads"])
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.empty(0, device=self.device)  # the device's context, if it has one, is made here
        if self.pristine is not None:
            self.pristine.to(self.device)
        if self.final is not None and self.device.type != "cpu":  # the copy off the task's path
            self.final = {k: v.to(self.device) for k, v in self.final.items()}
        if self.device.type == "cuda" and self.cfg.get("gpu_warmup", True):
            from prism_challenge.sandbox.harness.warm_kernels import warm_kernels

            precision = self.cfg.get("precision", "fp32")
            warm_kernels(self.device, getattr(torch, precision) if precision != "fp32" else None,
                         self.cfg["seq_len"], self.cfg["vocab_size"])

    def _build(self):
        from prism_challenge.sandbox.harness.loading import build_model

        return build_model(self.architecture, vocab_size=self.cfg["vocab_size"],
                           seq_len=self.cfg["seq_len"], max_params=self.cfg["param_cap"],
                           seed=self.cfg["seed"])

    def get(self, name: str, snapshot: str | None):
        import torch

        key = (name, snapshot)
        if key == self.key and name not in self.FRESH:
            self.built = "kept"
            return self.model
        if self.key is not None:
            raise ValueError("a task process answers one model; the host hands the next "
                             "model's tasks to the next process")
        self.key = key
        if name in self.FRESH:
            if self.pristine is None:
                raise ValueError("this evaluation was opened without held-out models")
            if name == "trained":
                if self.final is None:
                    raise ValueError("no final weights to evaluate")
                torch.nn.Module.load_state_dict(self.pristine, self.final)
            self.model = self.forward = self.pristine
            self.built = "pristine"
            return self.model
        if name != "snapshot":
            raise ValueError(f"unknown model {name!r}")
        if snapshot is None or "/" in snapshot or snapshot.startswith("."):
            raise ValueError(f"bad snapshot name {snapshot!r}")
        model = self._build()
        self.snapshot = torch.load(self.inputs / snapshot, weights_only=True,
                                   map_location="cpu")
        torch.nn.Module.load_state_dict(model, self.snapshot["model"])
        model.to(self.device)
        self.model, self.built = model, "full"
        compiled = bool(self.snapshot.get("compile"))
        if compiled:
            inductor_deterministic()
        self.forward = torch.compile(model) if compiled else model
        return model

    def precision(self) -> str:
        if self.snapshot is not None:
            return self.snapshot.get("precision", "fp32")
        return self.cfg.get("precision", "fp32")


def _serve(sock, cfg: dict, submission: Path, inputs: Path) -> None:
    """Answer the host's tasks until it says done; where the time went is written to the
    scratch folder for the benchmarks (step_clock.WorkClock; never scored)."""
    clock = WorkClock()
    try:
        _answer(sock, cfg, submission, inputs, clock)
    finally:
        with contextlib.suppress(OSError, KeyError):
            clock.write(Path(os.environ["PRISM_SCRATCH"]) / "eval_profile.json")


def _answer(sock, cfg: dict, submission: Path, inputs: Path, clock: WorkClock) -> None:
    """The eval process: seeds, architecture.py, the held-out build, then a task process
    after another until the host has no task left (task_process.py)."""
    import gc

    from prism_challenge.sandbox.harness.seeding import make_deterministic

    cuda_start.watch()  # a build that starts CUDA is told the line that did it
    make_deterministic(cfg["seed"], 1)  # one thread here: see task_process.py
    import torch

    from prism_challenge.sandbox.harness.loading import load_module

    strict = torch.are_deterministic_algorithms_enabled()  # the run's own setting
    models = _Models(load_module(submission / "architecture.py", "architecture"), cfg, inputs)
    if cfg.get("held_out", True):
        held_out_mode(True, strict)
        with task_modes(torch.device("cpu")):
            models.build_pristine()
    clock.mark("setup")
    # what lives now is the same for every task process: a collection there walks only its
    # own objects, and leaves these pages shared with the parent
    gc.collect()
    gc.freeze()
    # a GPU's context takes longer to make than a task's forward: several are made ahead
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1")
    spares = int(cfg.get("gpu_spares", GPU_SPARES)) if gpu else 1
    done, reports = run_task_processes(lambda: _fork(sock, models, strict), spares)
    for report in reports:  # parsed only now: see task_process._wait
        clock.add(read_report(report))
    if done == FAILED:
        raise _Reported()


def _fork(sock, models: _Models, strict: bool):
    import torch

    refusal = fork_refusal() or (CUDA_IN_BUILD if torch.cuda.is_initialized() else None)
    where = cuda_start.where() if refusal == CUDA_IN_BUILD else ""
    if where:
        refusal = f"{refusal} (CUDA was started at {where})"
    if refusal is not None:  # checked before every fork: nothing after it can slip by
        raise ContractError(refusal)
    clock = WorkClock()

    def prepare() -> None:
        models.prepare()
        clock.mark("spare_prepare")

    def work(prepared: BaseException | None) -> int:
        clock.mark("spare_idle")
        try:
            if prepared is not None:
                raise prepared
            return _answer_tasks(sock, models, strict, clock)
        except Exception as exc:  # noqa: BLE001 - the miner's code raised: reported
            _report(sock, exc)
            return FAILED

    return fork_task(prepare, work, lambda: {"seconds": clock.seconds, "counts": clock.counts},
                     keep=(sock.fileno(),))


def _answer_tasks(sock, models: _Models, strict: bool, clock: WorkClock) -> int:
    """Answer tasks until one of a held-out model is answered or the host hands the next
    task to a new process; DONE once it has no task left."""
    import numpy as np
    import torch

    from prism_challenge.sandbox.harness.lm_loss import check_logits
    from prism_challenge.sandbox.harness.probe import probe

    cfg, device = models.cfg, models.device
    T, V = cfg["seq_len"], cfg["vocab_size"]
    while True:
        protocol.send(sock, {"op": "task"})
        task, payload = protocol.recv(sock, MAX_INPUT_BYTES)
        clock.mark("wait")
        if task.get("kind") == "done":
            return DONE
        if task.get("kind") == "respawn":
            return NEXT
        n = int(task["rows"])
        x = torch.from_numpy(np.frombuffer(payload, dtype="<i4").reshape(n, T)
                             .astype(np.int64)).to(device)
        held_out_mode(task["model"] in models.FRESH, strict)
        with task_modes(device):
            model = models.get(task["model"], task.get("snapshot"))
            clock.mark(f"build_{models.built}")
            if task["kind"] == "causality":
                c = task["causality"]
                result = probe(model, x, c["positions"], V, c["seed"])
                clock.mark("probe")
                protocol.send(sock, {"op": "result", "task": task["task"], "result": result})
                clock.mark("send")
                if task["model"] in models.FRESH:
                    return NEXT
                continue
            train = task["mode"] == "train"
            if train and models.snapshot is not None:
                torch.set_rng_state(models.snapshot["cpu_rng"])
                if models.snapshot.get("cuda_rng") is not None and device.type == "cuda":
                    torch.cuda.set_rng_state(models.snapshot["cuda_rng"], device)
            precision = models.precision()
            dtype = getattr(torch, precision) if precision != "fp32" else None
            model.train(train)
            grad = torch.enable_grad() if train else torch.no_grad()
            # a snapshot answers each of its rounds from the state the scored forward saw
            kept = (buffers_kept(model) if models.snapshot is not None
                    else contextlib.nullcontext())
            with kept, grad, torch.autocast(device_type=device.type, dtype=dtype,
                                            enabled=dtype is not None):
                logits = models.forward(x)
            check_logits(logits, n, T, V)
            rows = torch.tensor(task["select_rows"], dtype=torch.long, device=device)
            pos = torch.tensor(task["select_positions"], dtype=torch.long, device=device)
            picked = logits[rows, pos].detach().float().cpu().numpy().astype("<f4")
        clock.mark("forward")
        protocol.send(sock, {"op": "result", "task": task["task"]}, picked.tobytes())
        clock.mark("send")
        if task["model"] in models.FRESH:
            return NEXT


class _Reported(Exception):
    """A task process reported its failure to the host itself."""


def _report(sock, exc: BaseException) -> None:
    detail = "".join(traceback.format_exception(exc)[-6:])[-3000:]
    with contextlib.suppress(OSError):
        protocol.send(sock, {"op": "failed", "detail": detail})


if __name__ == "__main__":
    exit_now(main())
