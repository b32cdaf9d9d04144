"""`ctx`, the object `train(ctx)` receives (DESIGN §4), and the feeder channel behind it.

`ctx.batches()` is where predict-then-train holds by construction: it asks the feeder for
the next rows, runs the scored forward of `ctx.model` (train mode, grad enabled, the
miner's autocast/compile choice), reports the summed loss to the feeder, and only then
hands the batch over. The scored loss IS the training loss: no second forward.
"""

from __future__ import annotations

import json
import math
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.harness.lm_loss import check_logits, summed_nats
from prism_challenge.sandbox.harness.loading import ContractError

AUTOCAST = {None: None, "bfloat16": "bfloat16", "float16": "float16"}


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
        self._pending: tuple[int, object, int] | None = None  # (step, nats tensor, tokens)
        self.t0 = time.monotonic()

    def request(self, op: str, info: dict) -> dict:
        protocol.send(self.sock, {"op": op, "rank": self.rank, **info})
        reply, _ = protocol.recv(self.sock)
        if "error" in reply:
            raise ContractError(reply["error"])
        return reply

    def _flush(self) -> dict | None:
        if self._pending is None:
            return None
        step, nats, tokens = self._pending
        self._pending = None
        return {"step": step, "nats": float(nats.item()), "tokens": tokens}

    def next_rows(self, rows: int) -> tuple[dict, bytes]:
        protocol.send(self.sock, {"op": "next", "rank": self.rank, "step": self.step,
                                  "rows": rows, "loss": self._flush()})
        reply, payload = protocol.recv(self.sock)
        if "error" in reply:
            raise ContractError(reply["error"])
        return reply, payload

    def record(self, step: int, nats, tokens: int) -> None:
        self._pending = (step, nats, tokens)

    def finish(self, status: str, detail: str, body: dict) -> None:
        protocol.send(
            self.sock,
            {"op": "finish", "rank": self.rank, "loss": self._flush(), "status": status,
             "detail": detail[-4000:]},
            json.dumps(body).encode(),
        )
        protocol.recv(self.sock)
        self.sock.close()


class TrainContext:
    """What the miner's `train(ctx)` sees. Everything else stays with the harness."""

    def __init__(self, *, model, ddp_model, device, vocab_size: int, seq_len: int,
                 separator_id: int, rank: int, world_size: int, token_budget: int,
                 deadline: float, channel: FeederChannel, audit_dir: Path, observed: dict):
        self.model = ddp_model if ddp_model is not None else model
        self.device = device
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.rank = rank
        self.world_size = world_size
        self.token_budget = token_budget
        self.__core = model
        self.__sep = separator_id
        self.__deadline = deadline
        self.__channel = channel
        self.__audit_dir = audit_dir
        self.__observed = observed
        self.__compiled = None
        self.__logs: list[dict] = []

    def time_left(self) -> float:
        return max(0.0, self.__deadline - time.monotonic())

    def log(self, **scalars) -> None:
        """Miner telemetry: shown on the dashboard, never scored."""
        clean = {k: float(v) for k, v in scalars.items()
                 if isinstance(v, int | float) and math.isfinite(float(v))}
        if clean and len(self.__logs) < 10_000:
            self.__logs.append({"step": self.__channel.step, **clean})

    @property
    def logs(self) -> list[dict]:
        return list(self.__logs)

    def batches(self, batch_size: int, *, autocast_dtype=None, compile: bool = False):
        import torch

        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ContractError(f"batch_size must be a positive int, got {batch_size!r}")
        precision = _precision(autocast_dtype)
        self.__observed.setdefault("batch_size", batch_size)
        self.__observed["precision"] = precision
        self.__observed["compile"] = bool(compile) or self.__observed.get("compile", False)
        forward = self.model
        if compile:
            if self.__compiled is None:
                self.__compiled = torch.compile(self.model)
            forward = self.__compiled
        return self.__iterate(batch_size, precision, forward)

    def __iterate(self, batch_size: int, precision: str, forward):
        import numpy as np
        import torch

        T = self.seq_len
        device = self.device
        amp_dtype = getattr(torch, precision) if precision != "fp32" else None
        channel = self.__channel
        while True:
            reply, payload = channel.next_rows(batch_size)
            if reply.get("done"):
                return
            n = reply["rows"]
            step = channel.step
            rows = torch.from_numpy(np.frombuffer(payload, dtype="<i4").reshape(n, T + 1)
                                    .astype(np.int64))
            rows = rows.to(device, non_blocking=True)
            inputs, targets = rows[:, :-1], rows[:, 1:]
            if reply.get("audit"):
                self.__snapshot(step, precision)
            self.model.train()
            with torch.enable_grad(), torch.autocast(
                device_type=device.type, dtype=amp_dtype, enabled=amp_dtype is not None
            ):
                logits = forward(inputs)
            check_logits(logits, n, T, self.vocab_size)
            nats = summed_nats(logits, targets, self.__sep)
            tokens = int(reply["tokens"])
            loss = nats / max(tokens, 1)
            channel.record(step, nats.detach().clone(), tokens)
            channel.step += 1
            yield Batch(inputs, targets, loss)

    def __snapshot(self, step: int, precision: str) -> None:
        import torch

        state = {
            "model": {k: v.detach().to("cpu", copy=True)
                      for k, v in self.__core.state_dict().items()},
            "cpu_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
            "precision": precision,
        }
        torch.save(state, self.__audit_dir / f"step_{step:08d}.pt")


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
