"""`ctx`, the object `train(ctx)` receives (docs/miners.md), and the feeder channel behind it.

`ctx.batches()` is where predict-then-train holds by construction: it asks the feeder for
the next rows, runs the scored forward of `ctx.model` (train mode, grad enabled, the
miner's autocast/compile choice), queues the loss of every scored position for the feeder,
and only then hands the batch over. The scored loss IS the training loss: no second forward.

In an original run nothing else happens: there is no check for the model to notice. In a
replay the feeder may ask, at a step, for a snapshot of the model and for predictions of a
few positions with their targets cut away, both made before that step's scored forward from
the same state and RNG; they are judged against what the original run already reported.
The snapshot goes to the feeder over the socket as it is written, never into a file here:
what the run does afterwards cannot reach it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.harness.axes import ForwardTally
from prism_challenge.sandbox.harness.buffers import buffers_kept
from prism_challenge.sandbox.harness.lm_loss import check_logits, token_nats
from prism_challenge.sandbox.harness.loading import ContractError
from prism_challenge.sandbox.harness.offload import Offload
from prism_challenge.sandbox.harness.seeding import inductor_deterministic
from prism_challenge.sandbox.harness.step_clock import StepClock
from prism_challenge.sandbox.harness.telemetry import Telemetry


@dataclass(frozen=True)
class Batch:
    inputs: object  # LongTensor[B, T]
    targets: object  # LongTensor[B, T]
    loss: object  # scalar tensor with grad: mean scored cross-entropy, already recorded


class FeederChannel:
    """The harness side of the feeder socket, one per rank."""

    def __init__(self, path: str, rank: int) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.rank = rank
        self.step = 0
        self._offload = Offload()  # each step's losses and input-edit flag, off the device
        self.broken: str | None = None  # a contract break found by ctx; sticks for the run

    def request(self, op: str, info: dict) -> dict:
        protocol.send(self.sock, {"op": op, "rank": self.rank, **info})
        reply, _ = protocol.recv(self.sock)
        if "error" in reply:
            raise ContractError(reply["error"])
        return reply

    def flush(self, everything: bool = False) -> None:
        """Send the losses whose copies off the device are done (offload.py: no device sync
        per step), and turn an input edited in place into the run's contract break."""
        for step, nats, edited in self._offload.due(everything):
            if edited and self.broken is None:
                self.broken = (
                    f"the model changed its input_ids in place during the forward of step "
                    f"{step}; the harness scores its own copy of the targets, so edit a "
                    f"copy instead (input_ids = input_ids.clone())")
            data = nats.numpy().astype("<f4", copy=False).tobytes()
            protocol.send(self.sock, {"op": "loss", "rank": self.rank, "step": step}, data)

    def next_rows(self, rows: int) -> tuple[dict, bytes]:
        """The next step's rows, after the finished steps' losses: the feeder's early stop
        and its accounting of what was consumed read the losses that arrived first."""
        self.flush()
        protocol.send(self.sock, {"op": "next", "rank": self.rank, "step": self.step,
                                  "rows": rows})
        reply, payload = protocol.recv(self.sock, MAX_ROWS_BYTES)
        if "error" in reply:
            raise ContractError(reply["error"])
        return reply, payload

    def record(self, step: int, per_token, edited) -> None:
        self._offload.push(step, per_token, edited)

    def snapshot(self, step: int, state: dict) -> None:
        """`state` saved (`torch.save`) straight into the socket, in frames of at most
        `protocol.SNAPSHOT_CHUNK` bytes, the last marked `end`: the feeder writes it outside
        the sandbox, so no copy of it is left here for the rest of the run to rewrite. One-way,
        like the losses: a frame the feeder refuses is answered at the next request."""
        import torch

        sink = _SnapshotSink(self, step)
        torch.save(state, sink)
        sink.end()

    def snapshot_frame(self, step: int, data, end: bool) -> None:
        protocol.send(self.sock, {"op": "snapshot", "rank": self.rank, "step": step,
                                  "end": end}, data)

    def probed(self, step: int, nats: list[float]) -> None:
        """The probe's losses as a binary payload (8 bytes each): a step with thousands of
        kept positions would not fit in a header."""
        protocol.send(self.sock, {"op": "probe", "rank": self.rank, "step": step},
                      struct.pack(f"<{len(nats)}d", *nats))

    def finish(self, status: str, detail: str, body: dict) -> None:
        self.flush(everything=True)
        protocol.send(
            self.sock,
            {"op": "finish", "rank": self.rank, "status": status, "detail": detail[-4000:]},
            json.dumps(body).encode(),
        )
        protocol.recv(self.sock)
        self.sock.close()


MAX_ROWS_BYTES = 1 << 28


class _SnapshotSink:
    """The file `torch.save` writes a snapshot to: full frames go to the feeder as they
    fill, so at most one frame of it is held here beside the state being saved."""

    def __init__(self, channel: FeederChannel, step: int) -> None:
        self._channel = channel
        self._step = step
        self._buf = bytearray()

    def write(self, data) -> int:
        chunk = protocol.SNAPSHOT_CHUNK
        view = memoryview(data).cast("B")
        size = len(view)
        while len(view):
            if not self._buf and len(view) >= chunk:  # a large storage: sent without a copy
                self._channel.snapshot_frame(self._step, view[:chunk], False)
                view = view[chunk:]
                continue
            take = chunk - len(self._buf)
            self._buf += view[:take]
            view = view[take:]
            if len(self._buf) == chunk:
                self._channel.snapshot_frame(self._step, self._buf, False)
                self._buf = bytearray()
        return size

    def flush(self) -> None:
        pass

    def end(self) -> None:
        self._channel.snapshot_frame(self._step, self._buf, True)
        self._buf = bytearray()


class TrainContext:
    """What the miner's `train(ctx)` sees. Everything else stays with the harness."""

    def __init__(self, *, model, ddp_model, device, vocab_size: int, seq_len: int,
                 separator_id: int, rank: int, world_size: int, token_budget: int,
                 max_step_rows: int, deadline: float, channel: FeederChannel,
                 observed: dict, state_watch=None):
        self.model = ddp_model if ddp_model is not None else model
        self.device = device
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.rank = rank
        self.world_size = world_size
        self.token_budget = token_budget
        self.__core = model
        self.__ddp = ddp_model
        self.__sep = separator_id
        self.__max_rows = max_step_rows
        self.__deadline = deadline
        self.__channel = channel
        self.__observed = observed
        self.__compiled = None
        self.__state_watch = state_watch  # the state contract (harness/state_contract.py)
        self.__forwards = ForwardTally()  # the measured precision/compile axes
        self.__telemetry = Telemetry()
        self.__clock = StepClock()  # host time per step segment, for the benchmarks

    def __setattr__(self, name: str, value) -> None:
        """Read-only to the miner: only the harness's own (name-mangled) fields change
        after set-up, so ctx passed where a FunctionCtx is expected cannot be rewritten."""
        if "_TrainContext__telemetry" in self.__dict__ and not name.startswith("_TrainContext__"):
            raise ContractError(f"ctx is read-only: ctx.{name} cannot be assigned; keep your "
                                "own values in your own objects")
        object.__setattr__(self, name, value)

    def time_left(self) -> float:
        return max(0.0, self.__deadline - time.monotonic())

    def log(self, **scalars) -> None:
        """Miner telemetry: shown on the dashboard, never scored (bounded, see telemetry)."""
        self.__telemetry.log(self.__channel.step, scalars)

    @property
    def telemetry(self) -> list[dict]:
        return list(self.__telemetry.points)

    def batches(self, batch_size: int, *, autocast_dtype=None, compile: bool = False):
        import torch

        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ContractError(f"batch_size must be a positive int, got {batch_size!r}")
        if batch_size > self.__max_rows:
            raise ContractError(f"batch_size {batch_size} is over the {self.__max_rows} rows "
                                "a step may take per rank")
        precision = _precision(autocast_dtype)
        forward = self.model
        if compile:
            if self.__compiled is None:
                inductor_deterministic()
                self.__compiled = torch.compile(self.model)
            forward = self.__compiled
        return self.__iterate(batch_size, precision, forward, bool(compile))

    def __iterate(self, batch_size: int, precision: str, forward, compiled: bool):
        import numpy as np
        import torch

        T = self.seq_len
        device = self.device
        amp_dtype = getattr(torch, precision) if precision != "fp32" else None
        channel = self.__channel
        clock = self.__clock
        clock.restart()
        while True:
            if clock.steps or channel.step:
                clock.mark("miner")
            reply, payload = channel.next_rows(batch_size)
            clock.mark("rows")
            if reply.get("done"):
                self.__check_inputs()
                return
            n = reply["rows"]
            step = channel.step
            # Every host copy of the rows (targets included) stays referenced until the next
            # step's rows replace it, after this step is scored: a copy freed now could be
            # found by the forward in recycled memory (an uninitialised allocation).
            host = torch.from_numpy(np.frombuffer(payload, dtype="<i4").reshape(n, T + 1)
                                    .astype(np.int64))
            # from pageable memory the driver may wait for the GPU
            staged = host.pin_memory() if device.type == "cuda" else host
            rows = staged.to(device, non_blocking=True)
            self.__check_inputs()
            # the scored targets stay in `rows`, which the model never sees: it gets its
            # own copy of the inputs, so nothing it writes can change what is scored
            inputs, targets = rows[:, :-1].clone(), rows[:, 1:]
            if reply.get("snapshot"):
                self.__snapshot(step, precision, compiled)
            if reply.get("probe"):
                channel.probed(step, self.__probe(forward, inputs, targets, reply["probe"],
                                                  amp_dtype))
            if self.__state_watch is not None:
                self.__state_watch.before_forward(step)
            self.model.train()
            clock.mark("prepare")
            with torch.enable_grad(), torch.autocast(
                device_type=device.type, dtype=amp_dtype, enabled=amp_dtype is not None
            ):
                logits = forward(inputs)
            clock.mark("forward")
            check_logits(logits, n, T, self.vocab_size)
            per_token = token_nats(logits, targets, self.__sep)
            loss = per_token.sum() / max(int(reply["tokens"]), 1)
            # both read a step or more later, without a device sync (offload.py)
            channel.record(step, per_token.detach(), (inputs != rows[:, :-1]).any())
            channel.step += 1
            self.__forwards.add(n, precision, compiled)
            self.__observed.update(self.__forwards.axes())
            batch = Batch(inputs, targets.clone(), loss)
            clock.mark("loss")
            yield batch

    def __check_inputs(self) -> None:
        """A forward that wrote into its input_ids breaks the contract. It gained nothing
        (the targets were a private copy), but the miner should hear it plainly; the error
        sticks to the channel so catching it inside `train` does not hide it. The flag is
        read when the step's results leave the device (FeederChannel.flush)."""
        if self.__channel.broken:
            raise ContractError(self.__channel.broken)

    def close(self, profile: Path | None = None) -> None:
        """Called by the harness after `train` returns: every step's results sent, and the
        last steps' input checks made; the host's time per step segment written to
        `profile` (step_clock.py)."""
        self.__channel.flush(everything=True)
        if profile is not None:
            self.__clock.write(profile)
        self.__check_inputs()

    def __probe(self, forward, inputs, targets, probe: dict, amp_dtype) -> list[float]:
        """Losses at the asked positions, predicted from inputs cut right after each one
        (the target and everything later replaced), with the RNG and buffers this step's
        scored forward will see: an honest causal model gives exactly its scored losses.
        A row may hold several asked positions: one forward per round, each row cut once."""
        from prism_challenge.sandbox.sampling import rounds

        out = [0.0] * len(probe["rows"])
        for group in rounds(probe["rows"], probe["positions"]):
            rows = [probe["rows"][i] for i in group]
            positions = [probe["positions"][i] for i in group]
            for i, v in zip(group, self.__probe_round(forward, inputs, targets, rows,
                                                      positions, amp_dtype), strict=True):
                out[i] = v
        return out

    def __probe_round(self, forward, inputs, targets, rows, positions, amp_dtype):
        import torch

        idx = torch.tensor(rows, dtype=torch.long, device=inputs.device)
        pos = torch.tensor(positions, dtype=torch.long, device=inputs.device)
        # cut in place: no temporary copy of the uncut rows is made and freed, which a
        # forward could find in recycled memory (torch.empty) where the allocator does not
        # fill new blocks (torch's deterministic mode off). Rows without an asked position
        # are filler throughout: a row's answer may depend on nothing beside its own context
        cut = inputs.clone()
        after = torch.ones_like(cut, dtype=torch.bool)
        after[idx] = torch.arange(self.seq_len, device=inputs.device)[None, :] > pos[:, None]
        cut.masked_fill_(after, self.__sep)
        devices = [inputs.device] if inputs.device.type == "cuda" else []
        no_sync = self.__ddp.no_sync() if self.__ddp is not None else contextlib.nullcontext()
        with torch.random.fork_rng(devices=devices), buffers_kept(self.__core), no_sync, \
                torch.enable_grad(), torch.autocast(device_type=inputs.device.type,
                                                    dtype=amp_dtype,
                                                    enabled=amp_dtype is not None):
            self.model.train()
            logits = forward(cut)
            check_logits(logits, cut.shape[0], self.seq_len, self.vocab_size)
            picked = logits[idx, pos].float()
            nats = torch.nn.functional.cross_entropy(picked, targets[idx, pos],
                                                     reduction="none").detach()
        return [float(v) for v in nats.cpu()]

    def __snapshot(self, step: int, precision: str, compiled: bool) -> None:
        """The model as it is before this step's scored forward, with the RNG it will use.

        Taken through nn.Module's own `state_dict` (never an override) and streamed to the
        feeder before the forward runs (`FeederChannel.snapshot`): it leaves the sandbox
        before the model sees this step's targets, and the eval sandbox (architecture only)
        re-computes this step's kept positions from that copy."""
        import torch

        state = {
            "model": {k: v.detach().to("cpu", copy=True)
                      for k, v in torch.nn.Module.state_dict(self.__core).items()},
            "cpu_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device)
            if self.device.type == "cuda" else None,
            "precision": precision,
            "compile": compiled,
        }
        self.__channel.snapshot(step, state)


def miner_view(ctx: TrainContext):
    """The object `train(ctx)` is handed: the context's public face, and nothing behind it.

    Its class has no instance dictionary and holds the real context only in its functions'
    closures, which no name a bundle may use reaches. A library function that reads or
    updates an object's `__dict__` (`LRScheduler.state_dict(obj)` returns it,
    `load_state_dict(obj, d)` updates it), or a method of the bundle's own called with this
    object as `self`, finds no feeder channel or state watch here: the
    harness's private fields live on `ctx`, which the bundle never holds."""

    def read_only(_self, name, _value=None):
        raise ContractError(f"ctx is read-only: ctx.{name} cannot be assigned; keep your own "
                            "values in your own objects")

    def field(name: str):
        return property(lambda _self: getattr(ctx, name))

    namespace = {
        "__slots__": (),
        "__doc__": TrainContext.__doc__,
        "__setattr__": read_only,
        "__delattr__": read_only,
        "__repr__": lambda _self: f"<TrainContext rank {ctx.rank} of {ctx.world_size}>",
        **{n: field(n) for n in ("model", "device", "vocab_size", "seq_len", "rank",
                                 "world_size", "token_budget", "telemetry")},
        "time_left": lambda _self: ctx.time_left(),
        "log": lambda _self, **scalars: ctx.log(**scalars),
        "batches": lambda _self, batch_size, *, autocast_dtype=None, compile=False:
            ctx.batches(batch_size, autocast_dtype=autocast_dtype, compile=compile),
    }
    return type("TrainContext", (), namespace)()


def _precision(autocast_dtype) -> str:
    import torch

    if autocast_dtype is None:
        return "fp32"
    if autocast_dtype in (torch.bfloat16, "bfloat16", "bf16"):
        return "bfloat16"
    if autocast_dtype in (torch.float16, "float16", "fp16"):
        return "float16"
    raise ContractError(f"autocast_dtype must be None, torch.bfloat16 or torch.float16, "
                        f"got {autocast_dtype!r}")
