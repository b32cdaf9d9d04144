"""The feeder: the challenge-owned process side of a training run (outside the sandbox).

It serves rows of the locked train split over a Unix socket one batch at a time, only when
asked; it counts each batch's scored tokens and bytes itself; it receives each batch's
summed loss as soon as the harness computed it; it decides, from a secret the miner never
sees, which steps are audited; and it enforces the token budget and the deadline. The
record it assembles is the authoritative account of the run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism_challenge.sandbox import protocol

MAX_BATCH_BYTES = 1 << 28  # one reply's rows at most: 256 MiB (65k rows at seq_len 1024)


class FeederFailure(RuntimeError):
    """The feeder's own side failed (reading the locked data): an infra error, never the
    miner's fault."""


@dataclass(frozen=True)
class FeederPlan:
    seq_len: int
    vocab_size: int
    separator_id: int
    param_cap: int
    token_budget: int
    budget_rows: int
    deadline_s: float
    world_size: int
    audit_secret: bytes
    audit_count: int = 3  # audits beyond step 0, spread over the expected number of steps


@dataclass
class Served:
    """One batch handed to one rank."""

    step: int
    rank: int
    offset_row: int
    rows: int
    tokens: int
    bytes: int
    audit: bool
    nats: float | None = None
    t: float | None = None


@dataclass
class _Step:
    requested_rows: int
    per_rank_rows: int
    start_row: int
    audit: bool
    done: bool


@dataclass
class Finish:
    status: str
    detail: str
    axes: dict | None
    logs: list


@dataclass
class FeederState:
    steps: list[_Step] = field(default_factory=list)
    served: dict[tuple[int, int], Served] = field(default_factory=dict)
    finishes: dict[int, Finish] = field(default_factory=dict)
    next_row: int = 0
    ready_at: float | None = None
    deadline_at: float | None = None
    audits: int = 0
    problems: list[str] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)
    infra_error: str | None = None  # the feeder itself failed: not the miner's fault


class Feeder:
    def __init__(self, stream, plan: FeederPlan, socket_path: Path) -> None:
        self.stream = stream
        self.plan = plan
        self.path = Path(socket_path)
        self.state = FeederState()
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self.path.chmod(0o777)
        self._server.listen(plan.world_size + 4)
        self._closed = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    # ---- serving -------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            if len(self._threads) >= self.plan.world_size * 2:
                conn.close()
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        bound: int | None = None  # the rank this connection claimed with its hello
        with conn:
            while True:
                try:
                    header, payload = protocol.recv(conn)
                except (ConnectionError, OSError):
                    return
                except protocol.ProtocolError as exc:
                    self._problem(f"protocol: {exc}")
                    return
                try:
                    bound = self._bind(bound, header)
                    reply, body = self._handle(header, payload)
                except FeederFailure as exc:
                    with self._lock:
                        self.state.infra_error = str(exc)[:500]
                    return
                except (KeyError, TypeError, ValueError) as exc:
                    self._problem(f"bad request {header.get('op')!r}: {exc}")
                    reply, body = {"error": f"bad request: {exc}"}, b""
                except Exception as exc:  # our side broke (e.g. a shard read): infra, not crash
                    with self._lock:
                        self.state.infra_error = f"feeder: {type(exc).__name__}: {exc}"[:500]
                    return
                try:
                    protocol.send(conn, reply, body)
                except OSError:
                    return
                if header.get("op") == "finish":
                    return

    def _bind(self, bound: int | None, header: dict) -> int:
        """One connection per rank, claimed by its hello; other ranks' messages are refused."""
        rank = int(header["rank"])
        if bound is None:
            if header.get("op") != "hello":
                raise ValueError("the first message must be hello")
            with self._lock:
                if rank in self.state.claimed:
                    raise ValueError(f"rank {rank} is already connected")
                self.state.claimed.add(rank)
            return rank
        if rank != bound:
            raise ValueError(f"this connection is rank {bound}, not {rank}")
        return bound

    def _problem(self, text: str) -> None:
        with self._lock:
            if len(self.state.problems) < 50:
                self.state.problems.append(text)

    def _handle(self, header: dict, payload: bytes) -> tuple[dict, bytes]:
        op = header["op"]
        rank = int(header["rank"])
        if not 0 <= rank < self.plan.world_size:
            raise ValueError(f"rank {rank} outside world size {self.plan.world_size}")
        if op == "hello":
            p = self.plan
            return {"vocab_size": p.vocab_size, "seq_len": p.seq_len,
                    "separator_id": p.separator_id, "param_cap": p.param_cap,
                    "token_budget": p.token_budget}, b""
        if op == "ready":
            with self._lock:
                if self.state.ready_at is None:
                    self.state.ready_at = time.monotonic()
                    self.state.deadline_at = self.state.ready_at + self.plan.deadline_s
                left = self.state.deadline_at - time.monotonic()
            return {"deadline_s": max(0.0, left)}, b""
        if op == "next":
            self._record_loss(rank, header.get("loss"))
            return self._next(rank, int(header["step"]), int(header["rows"]))
        if op == "finish":
            self._record_loss(rank, header.get("loss"))
            body = json.loads(payload) if payload else {}
            with self._lock:
                self.state.finishes[rank] = Finish(
                    str(header.get("status", "crash"))[:32], str(header.get("detail", ""))[:4000],
                    body.get("axes"), body.get("logs") or [])
            return {"ok": True}, b""
        raise ValueError(f"unknown op {op!r}")

    def _record_loss(self, rank: int, loss: dict | None) -> None:
        if loss is None:
            return
        key = (int(loss["step"]), rank)
        nats, tokens = float(loss["nats"]), int(loss["tokens"])
        with self._lock:
            served = self.state.served.get(key)
            if served is None or served.nats is not None:
                self.state.problems.append(f"loss for a batch not served or reported twice: {key}")
                return
            if tokens != served.tokens:
                self.state.problems.append(f"step {key}: harness counted {tokens} tokens, "
                                           f"feeder {served.tokens}")
            served.nats = nats
            served.t = time.monotonic() - self.t0

    def _audit(self, step: int, first_rows: int) -> bool:
        """Step 0 always (the step-0 check needs it); then a keyed coin the miner can't see."""
        if step == 0:
            return True
        if self.state.audits >= self.plan.audit_count:
            return False
        expected_steps = max(1, self.plan.budget_rows // max(1, first_rows * self.plan.world_size))
        p = min(1.0, self.plan.audit_count / expected_steps)
        digest = hmac.new(self.plan.audit_secret, step.to_bytes(8, "big"), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < p

    def _next(self, rank: int, step: int, rows: int) -> tuple[dict, bytes]:
        if rows < 1:
            raise ValueError("rows must be positive")
        if rows * (self.plan.seq_len + 1) * 4 > MAX_BATCH_BYTES:
            raise ValueError(f"a batch of {rows} rows is over the limit of "
                             f"{MAX_BATCH_BYTES // ((self.plan.seq_len + 1) * 4)} rows")
        with self._lock:
            st = self.state
            if step > len(st.steps):
                raise ValueError(f"step {step} requested before step {len(st.steps)}")
            if step == len(st.steps):
                st.steps.append(self._allocate(step, rows))
            alloc = st.steps[step]
            if alloc.requested_rows != rows:
                raise ValueError(f"rank {rank} asked {rows} rows at step {step}, another rank "
                                 f"asked {alloc.requested_rows}")
            if alloc.done:
                return {"done": True}, b""
            offset = alloc.start_row + rank * alloc.per_rank_rows
            n = alloc.per_rank_rows
        try:
            block = self.stream.rows(self.plan.seq_len, offset, n)
            targets = block[:, 1:]
            tokens = int(np.count_nonzero(targets != self.plan.separator_id))
            nbytes = int(self.stream.byte_lengths[targets].sum())
        except Exception as exc:
            raise FeederFailure(f"feeder: reading rows {offset}..{offset + n}: "
                                f"{type(exc).__name__}: {exc}") from exc
        audit = alloc.audit and rank == 0
        with self._lock:
            self.state.served[(step, rank)] = Served(step, rank, offset, n, tokens, nbytes, audit)
        reply = {"rows": n, "tokens": tokens, "audit": audit, "offset_row": offset}
        return reply, np.ascontiguousarray(block, dtype="<i4").tobytes()

    def _allocate(self, step: int, rows: int) -> _Step:
        st, W = self.state, self.plan.world_size
        remaining = self.plan.budget_rows - st.next_row
        late = st.deadline_at is not None and time.monotonic() > st.deadline_at
        per_rank = min(rows, remaining // W)
        if late or per_rank < 1:
            return _Step(rows, 0, st.next_row, False, True)
        first_rows = st.steps[0].requested_rows if st.steps else rows
        audit = self._audit(step, first_rows)
        st.audits += audit and step > 0
        alloc = _Step(rows, per_rank, st.next_row, audit, False)
        st.next_row += per_rank * W
        return alloc

    def kill_at(self, grace_s: float) -> float | None:
        """When the run must be over: the deadline plus `grace_s` to return and save."""
        deadline = self.state.deadline_at
        return None if deadline is None else deadline + grace_s

    # ---- after the run -------------------------------------------------------------------
    def close(self) -> None:
        self._closed.set()
        try:
            self._server.close()
        finally:
            self.path.unlink(missing_ok=True)
        for thread in self._threads:
            thread.join(timeout=2)

    def reported(self) -> list[Served]:
        """Batches whose loss reached the feeder, in stream order."""
        with self._lock:
            done = [s for s in self.state.served.values() if s.nats is not None]
        return sorted(done, key=lambda s: (s.offset_row, s.rank))

    def unreported(self) -> list[Served]:
        with self._lock:
            return [s for s in self.state.served.values() if s.nats is None]

    def nonfinite(self) -> bool:
        return any(not math.isfinite(s.nats) for s in self.reported())
