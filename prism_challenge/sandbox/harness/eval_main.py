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
import time
import traceback
from pathlib import Path

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.harness.buffers import buffers_kept
from prism_challenge.sandbox.harness.quick_exit import exit_now
from prism_challenge.sandbox.harness.seeding import held_out_mode, inductor_deterministic
from prism_challenge.sandbox.harness.shared_state import SharedState, task_modes
from prism_challenge.sandbox.harness.state_contract import fingerprint
from prism_challenge.sandbox.harness.step_clock import WorkClock

MAX_INPUT_BYTES = 1 << 28


def main() -> int:
    # torch first: the sandbox may start while its run still trains, and its hello is answered
    # only when the final weights are there (sandbox/early_eval.py), so this import overlaps
    # training. Nothing touches CUDA before the hello (a context would hold memory on the
    # GPU the run trains on), and nothing of the miner's is imported before it either.
    import numpy  # noqa: F401
    import torch  # noqa: F401

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["PRISM_SOCKET"])
    protocol.send(sock, {"op": "hello"})
    cfg, _ = protocol.recv(sock)
    try:
        _serve(sock, cfg, Path(os.environ["PRISM_SUBMISSION"]), Path(os.environ["PRISM_INPUTS"]))
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)[-6:])[-3000:]
        try:
            protocol.send(sock, {"op": "failed", "detail": detail})
        except OSError:
            pass
        return 1
    finally:
        sock.close()
    return 0


class _Models:
    """The one model instance in use.

    The trained model and the twin are rebuilt for every task they answer: architecture.py
    is executed afresh (new module globals), `build_model` runs under the forced seed and the
    final weights are loaded again. So each held-out task is answered from the final weights
    and nothing that persisted from an earlier task: a model that updates itself while it
    is evaluated (test-time training on the held-out text it was shown) gains nothing. What
    the process shares beyond the model (warning filters, numerics flags, attributes of the
    library's classes and functions) is put back before every build (shared_state.py).
    A replay's snapshot is kept between its tasks (it is re-trained step by step).

    The rebuild's cost is the CPU's forced-seed initialisation and the trip to the device,
    for every task (about a second for a 90M model, so most of a GPT's evaluation on a GPU).
    The twin and the trained model are the same build until the trained one loads the final
    weights, so after the first full build of either, that build's every tensor (parameters
    and buffers, persistent or not, before any weights are loaded), the RNG state it left
    and the plain values its modules and architecture.py's globals hold are kept on the
    device (with the final weights, two copies: the parameter cap bounds them). Every later
    task of either model still executes architecture.py afresh and builds a new instance, but
    on the meta device (no value computed, no initialiser run: loading.build_model), fills
    its tensors and the RNG state from that copy, and the trained model then loads the final
    weights as a full build does. Anything that differs from the full build (names, shapes,
    dtypes, grad flags, plain values) or a build that needs a value (`.item()` in
    `__init__`) falls back to full builds.
    """

    FRESH = ("trained", "twin")
    # a full build quicker than this is kept as it is: for a small model the copy's checks
    # cost more than the build they save
    COPY_ABOVE_S = 0.02

    def __init__(self, load_architecture, cfg: dict, inputs: Path, device) -> None:
        # what outlives a model in this process, before any code of the miner's ran; put
        # back for every model built (shared_state.py)
        self.shared = SharedState()
        self.load_architecture = load_architecture
        self.architecture = load_architecture()
        self.cfg = cfg
        self.inputs = inputs
        self.device = device
        self.key: tuple | None = None
        self.model = None
        self.forward = None
        self.snapshot: dict | None = None
        self.final: dict | None = None  # final.pt, on the device: loaded into each instance
        self.pristine: dict | None = None  # the forced-seed build: see the docstring
        self.copy_off = False  # a copy that did not match the build: full builds from now on
        self.built = ""  # how the last `get` made its model: "full", "copy" or "kept"

    def get(self, name: str, snapshot: str | None):
        import torch

        from prism_challenge.sandbox.harness.loading import build_model

        key = (name, snapshot)
        if key == self.key and name not in self.FRESH:
            self.built = "kept"
            return self.model
        if name not in (*self.FRESH, "snapshot"):
            raise ValueError(f"unknown model {name!r}")
        self.model = self.forward = self.snapshot = None
        self.shared.restore()
        if name in self.FRESH:
            self.architecture = self.load_architecture()
            model = self._from_pristine()
            if model is not None:
                self._load_final(model, name)
                self.model, self.key, self.forward, self.built = model, key, model, "copy"
                return model
        started = time.perf_counter()
        model = build_model(self.architecture, vocab_size=self.cfg["vocab_size"],
                            seq_len=self.cfg["seq_len"], max_params=self.cfg["param_cap"],
                            seed=self.cfg["seed"])
        built_rng = _rng_state(self.device)
        build_s = time.perf_counter() - started
        if name == "snapshot":
            if snapshot is None or "/" in snapshot or snapshot.startswith("."):
                raise ValueError(f"bad snapshot name {snapshot!r}")
            self.snapshot = torch.load(self.inputs / snapshot, weights_only=True,
                                       map_location="cpu")
            torch.nn.Module.load_state_dict(model, self.snapshot["model"])
        model.to(self.device)
        if (name in self.FRESH and self.pristine is None and not self.copy_off
                and build_s >= self.COPY_ABOVE_S):
            try:
                self.pristine = {"tensors": {n: t.detach().clone()
                                             for n, t in _all_tensors(model)},
                                 "flags": _flags(model), "rng": built_rng,
                                 "plain": fingerprint(model, self.architecture)}
            except Exception:  # a tensor that cannot be copied: full builds, as before
                self.copy_off = True
        if name in self.FRESH:
            self._load_final(model, name)
        self.model, self.key, self.built = model, key, "full"
        compiled = bool(self.snapshot and self.snapshot.get("compile"))
        if compiled:
            inductor_deterministic()
        self.forward = torch.compile(model) if compiled else model
        return model

    def _load_final(self, model, name: str) -> None:
        """The final weights into a fresh trained instance (the twin keeps its build's),
        through nn.Module's own loader; each instance gets its own copy of them."""
        if name != "trained":
            return
        import torch

        if self.final is None:
            self.final = {k: v.to(self.device)
                          for k, v in torch.load(self.inputs / "final.pt", weights_only=True,
                                                 map_location="cpu").items()}
        torch.nn.Module.load_state_dict(model, {k: v.clone() for k, v in self.final.items()})

    def _from_pristine(self):
        """A new instance built on the meta device and filled from the copy of the first full
        build; None (and full builds from now on) when it does not match."""
        if self.pristine is None:
            return None
        # the process was frozen by `restore()` just before (shared_state.py): the check in
        # `_fill` walks only what was made since, not the whole process (0.3 s per task)
        model = self._fill(self.pristine)
        if model is None:
            self.pristine, self.copy_off = None, True
            self.architecture = self.load_architecture()  # the failed build's globals go
        return model

    def _fill(self, kept: dict):
        import torch

        from prism_challenge.sandbox.harness.loading import build_model

        try:
            model = build_model(self.architecture, vocab_size=self.cfg["vocab_size"],
                                seq_len=self.cfg["seq_len"], max_params=self.cfg["param_cap"],
                                seed=self.cfg["seed"], device="meta")
            # nn.Module.to_empty, without torch's Python empty_like for meta tensors (its
            # first call imports sympy: 0.6 s)
            torch.nn.Module._apply(model, lambda t: torch.empty_strided(
                t.size(), t.stride(), dtype=t.dtype, device=self.device))
            tensors = dict(_all_tensors(model))
            same = (tensors.keys() == kept["tensors"].keys()
                    and all(t.shape == kept["tensors"][n].shape
                            and t.dtype == kept["tensors"][n].dtype
                            for n, t in tensors.items())
                    and _flags(model) == kept["flags"]
                    and fingerprint(model, self.architecture) == kept["plain"])
            if same:
                with torch.no_grad():
                    for n, t in tensors.items():
                        t.copy_(kept["tensors"][n])
        except Exception:  # a build that needs values, or anything else: build in full
            return None
        # a tensor kept outside parameters and buffers has no value here: build in full
        if not same or _meta_tensors_left():
            return None
        _set_rng_state(kept["rng"], self.device)
        return model

    def precision(self) -> str:
        if self.snapshot is not None:
            return self.snapshot.get("precision", "fp32")
        return self.cfg.get("precision", "fp32")


def _all_tensors(model):
    """(name, tensor) of every parameter and buffer, shared ones under each of their names."""
    import itertools

    import torch

    return itertools.chain(torch.nn.Module.named_parameters(model, remove_duplicate=False),
                           torch.nn.Module.named_buffers(model, remove_duplicate=False))


def _meta_tensors_left() -> bool:
    """Whether any tensor the collector lists is still on the meta device (a plain tensor
    attribute, a tensor in a list or a global: the meta build gave it no value). Called
    after `SharedState.restore()` froze the process (`gc.freeze`), it sees what was made since."""
    import gc
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return any(isinstance(o, torch.Tensor) and o.is_meta for o in gc.get_objects())


def _flags(model) -> list[tuple[str, bool]]:
    import torch

    return [(n, p.requires_grad)
            for n, p in torch.nn.Module.named_parameters(model, remove_duplicate=False)]


def _rng_state(device):
    import torch

    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state, device) -> None:
    import torch

    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda, device)


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
    from prism_challenge.sandbox.harness.seeding import make_deterministic

    make_deterministic(cfg["seed"], cfg["threads"])
    import numpy as np
    import torch

    from prism_challenge.sandbox.harness.lm_loss import check_logits
    from prism_challenge.sandbox.harness.loading import load_module
    from prism_challenge.sandbox.harness.probe import probe

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.empty(0, device=device)  # the device's context, if it has one, is made here
    T, V = cfg["seq_len"], cfg["vocab_size"]
    strict = torch.are_deterministic_algorithms_enabled()  # the run's own setting
    models = _Models(lambda: load_module(submission / "architecture.py", "architecture"), cfg,
                     inputs, device)
    clock.mark("setup")
    while True:
        protocol.send(sock, {"op": "task"})
        task, payload = protocol.recv(sock, MAX_INPUT_BYTES)
        clock.mark("wait")
        if task.get("kind") == "done":
            return
        n = int(task["rows"])
        x = torch.from_numpy(np.frombuffer(payload, dtype="<i4").reshape(n, T)
                             .astype(np.int64)).to(device)
        held_out_mode(task["model"] in models.FRESH, strict)
        with task_modes(device):  # nothing a previous task left switched on
            model = models.get(task["model"], task.get("snapshot"))
            clock.mark(f"build_{models.built}")
            if task["kind"] == "causality":
                c = task["causality"]
                result = probe(model, x, c["positions"], V, c["seed"])
                clock.mark("probe")
                protocol.send(sock, {"op": "result", "task": task["task"], "result": result})
                clock.mark("send")
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


if __name__ == "__main__":
    exit_now(main())
