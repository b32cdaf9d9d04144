"""The feeder: the challenge-owned process side of a training run (outside the sandbox).

It serves rows of the locked train split over a Unix socket one batch at a time, only when
asked, in the challenge's stream order; it counts each batch's scored tokens and bytes
itself; it receives the loss of every position the harness scored, sums them itself, and
keeps those a secret the sandbox never sees draws (the same chance for every position), so
that any of those predictions can be checked later; and it enforces the token budget and
the deadline. The record it assembles is the authoritative account of the run.

In a replay (contender verification) the same feeder serves the same stream and, at steps
decided only now, asks the harness for target-absent predictions and snapshots; what the
replay reports is compared with what the original run committed to (see `replay.py`). A
snapshot arrives over the socket as the harness writes it and is written by the feeder into
a host folder no sandbox mounts: no file of it is ever in the training sandbox's reach, so
nothing the run does after the snapshot (training on later targets) can rewrite it.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.early_stop import Decision, EarlyStopPlan, Watch
from prism_challenge.sandbox.sampling import kept_positions
from prism_challenge.sandbox.stack import SOFTWARE, Stack, not_comparable, software_from_hello
from prism_challenge.sandbox.stream_order import LaneOrder

MAX_BATCH_BYTES = 1 << 28  # one reply's rows at most: 256 MiB (65k rows at seq_len 1024)
MAX_FINISH_BYTES = 2 << 20  # axes + bounded telemetry
MAX_CONTROL_BYTES = 1 << 12


def _int(header: dict, key: str) -> int:
    """A header's integer field: a JSON integer, nothing coerced into one (`1.5`, `"1"`,
    `Infinity`, `true` are refused as the harness's error)."""
    value = header[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, got {type(value).__name__}")
    return value


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
    sample_secret: bytes  # decides which positions the record keeps; never sent inside
    keep_rate: float = 0.02  # each scored position's chance of being kept (sampling.py)
    lanes: int = 256
    early_stop: EarlyStopPlan | None = None  # the validator's bar, fixed before the run
    gpus: int = 0  # GPUs assigned to the sandbox: each rank's first hello must see CUDA
    # replay: the most the deadline moves out by the time rank 0 spends on probe forwards
    # (from serving a probed step's rows to its probe answer), the checks' own cost
    probe_allowance_s: float = 0.0
    # replay: the most bytes all of a run's snapshots may take together (the bound the
    # training scratch set when they were written there: the sandbox's disk limit)
    snapshot_bytes: int = 2 << 30


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay checks, decided after the original run ended."""

    original: dict[tuple[int, int], tuple[int, float]]  # (step, rank) -> (rows, nats)
    probe_steps: frozenset[int]
    snapshot_steps: frozenset[int]
    stack: Stack | None = None  # the original's: a replay on another one is not comparable

    @property
    def last_step(self) -> int:
        return max(self.probe_steps | self.snapshot_steps, default=-1)


@dataclass
class Served:
    """One batch handed to one rank."""

    step: int
    rank: int
    position: int  # stream position of the batch's first row
    rows: np.ndarray  # the row indices served, in order
    tokens: int
    bytes: int
    scored: np.ndarray  # bool[n, T]: targets that count (not separators, not lane ends)
    nats: float | None = None
    t: float | None = None
    sample: list[float] | None = None
    probed: list[float] | None = None  # replay: target-absent losses at the kept positions
    probe_asked: bool = False
    snapshot_asked: bool = False
    snapshot_received: int = 0  # bytes of the snapshot written to the host folder so far
    snapshot: Path | None = None  # the whole snapshot, in the host folder, once it ended
    kept: tuple[np.ndarray, np.ndarray] | None = None  # (rows, positions) the record keeps
    pending: bytes | None = None  # its losses, arrived and not yet summed (Feeder._settle)
    served_at: float = 0.0  # monotonic time its rows were handed out


@dataclass
class _Step:
    requested_rows: int
    per_rank_rows: int
    start: int  # stream position
    done: bool


@dataclass
class Finish:
    status: str
    detail: str
    axes: dict | None
    telemetry: list


@dataclass
class FeederState:
    steps: list[_Step] = field(default_factory=list)
    served: dict[tuple[int, int], Served] = field(default_factory=dict)
    finishes: dict[int, Finish] = field(default_factory=dict)
    next_position: int = 0
    ready_at: float | None = None
    deadline_at: float | None = None
    deadline_cut_row: int | None = None  # the budget row the deadline stopped serving at
    problems: list[str] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)
    infra_error: str | None = None  # the feeder itself failed: not the miner's fault
    cuda_seen: dict[int, int] = field(default_factory=dict)  # rank -> CUDA devices at hello
    diverged: str | None = None  # replay: the run asked for something the original did not
    stopped: Decision | None = None  # early stop: the run could no longer take the lead
    stack: Stack | None = None  # the software rank 0 reported at its first hello
    probe_extension_s: float = 0.0  # replay: how far the probes' own time moved the deadline
    incomparable: str | None = None  # replay: this stack cannot judge the original run
    last_loss: tuple[int, float] | None = None  # (step, nats per scored token): progress only
    snapshot_bytes: int = 0  # replay: bytes of snapshots received, all ranks together


class Feeder:
    def __init__(self, stream, plan: FeederPlan, socket_path: Path,
                 replay: ReplayPlan | None = None, snapshot_dir: Path | None = None) -> None:
        """`snapshot_dir`: the host folder a replay's snapshots are written to, one that is
        not mounted in the training sandbox (without it, any snapshot is refused)."""
        self.stream = stream
        self.plan = plan
        self.replay = replay
        self.snapshot_dir = snapshot_dir
        self.order = LaneOrder(plan.budget_rows, plan.lanes)
        # a replay reproduces a scored run to its checks: it is never stopped early
        self.watch = Watch(plan.early_stop) if plan.early_stop and replay is None else None
        self.path = Path(socket_path)
        self.state = FeederState()
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        # ranks are served in step: a rank's rows of step s leave only once every rank still
        # in the run has asked for step s (so has trained on step s - 1 and scored it)
        self._turn = threading.Condition(self._lock)
        self._asked: dict[int, int] = {}  # rank -> the latest step it asked for
        self._left: set[int] = set()  # ranks that finished or hung up
        self._ahead: dict[int, tuple] = {}  # rank -> ((position, rows), its _block), read ahead
        self._unsettled: list[Served] = []  # losses taken, summed after the reply (_settle)
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

    def _payload_limit(self, header: dict) -> int:
        """The largest payload each message kind may carry, known before it is read."""
        op = header.get("op")
        if op == "finish":
            return MAX_FINISH_BYTES
        if op in ("loss", "probe"):
            try:
                served = self.state.served.get((_int(header, "step"), _int(header, "rank")))
            except (KeyError, ValueError):
                return 0
            if served is None:
                return 0
            if op == "loss":  # one float32 per scored position
                return served.scored.size * 4
            # one float64 per kept position asked, at most one per scored one
            return served.scored.size * 8 if served.probe_asked else 0
        if op == "snapshot":  # a frame of an asked snapshot, within the run's bound
            try:
                served = self.state.served.get((_int(header, "step"), _int(header, "rank")))
            except (KeyError, ValueError):
                return 0
            if (served is None or not served.snapshot_asked or served.snapshot is not None
                    or self.snapshot_dir is None):
                return 0
            return max(0, min(protocol.SNAPSHOT_CHUNK,
                              self.plan.snapshot_bytes - self.state.snapshot_bytes))
        return MAX_CONTROL_BYTES

    def _serve(self, conn: socket.socket) -> None:
        bound: int | None = None  # the rank this connection claimed with its hello
        with conn, self._leaving(lambda: bound):
            while True:
                try:
                    header, payload = protocol.recv(conn, self._payload_limit)
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
                except (LookupError, TypeError, ValueError, ArithmeticError,
                        protocol.ProtocolError) as exc:  # what the harness sent is wrong
                    self._problem(f"bad request {repr(header.get('op'))[:40]}: {exc}")
                    reply, body = {"error": f"bad request: {exc}"}, b""
                except Exception as exc:  # our side broke (e.g. a shard read): infra, not crash
                    with self._lock:
                        self.state.infra_error = f"feeder: {type(exc).__name__}: {exc}"[:500]
                    return
                if reply is None:  # one-way messages (losses) get no answer
                    continue
                try:
                    protocol.send(conn, reply, body)
                except OSError:
                    return
                if header.get("op") == "finish":
                    return
                if header.get("op") == "next" and bound is not None:
                    self._after_next(header.get("step"), bound)

    @contextlib.contextmanager
    def _leaving(self, rank_of):
        """On leaving: the rank this connection claimed, if any, finished or hung up, and
        holds no other rank back (ranks are served in step: `_next`)."""
        try:
            yield
        finally:
            rank = rank_of()
            if rank is not None:
                with self._turn:
                    self._left.add(rank)
                    self._turn.notify_all()

    def _bind(self, bound: int | None, header: dict) -> int:
        """One connection per rank, claimed by its hello; other ranks' messages are refused."""
        rank = _int(header, "rank")
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
            self._problem_locked(text)

    def _problem_locked(self, text: str) -> None:
        if len(self.state.problems) < 50:
            self.state.problems.append(text)

    def _handle(self, header: dict, payload: bytes) -> tuple[dict | None, bytes]:
        op = header["op"]
        rank = _int(header, "rank")
        if not 0 <= rank < self.plan.world_size:
            raise ValueError(f"rank {rank} outside world size {self.plan.world_size}")
        if op == "hello":
            p = self.plan
            self._check_devices(rank, header)
            self._check_stack(rank, header)
            return {"vocab_size": p.vocab_size, "seq_len": p.seq_len,
                    "separator_id": p.separator_id, "param_cap": p.param_cap,
                    "token_budget": p.token_budget,
                    "max_step_rows": self.order.max_step_rows // p.world_size}, b""
        if op == "ready":
            self._check_cudnn(rank, header)
            with self._lock:
                if self.state.ready_at is None:
                    self.state.ready_at = time.monotonic()
                    self.state.deadline_at = self.state.ready_at + self.plan.deadline_s
                left = self.state.deadline_at - time.monotonic()
            return {"deadline_s": max(0.0, left)}, b""
        if op == "loss":
            self._record_loss(rank, _int(header, "step"), payload)
            return None, b""
        if op == "snapshot":  # one-way: its bytes left the sandbox as they were sent
            self._record_snapshot(rank, _int(header, "step"), payload,
                                  header.get("end") is True)
            return None, b""
        if op == "probe":
            if len(payload) % 8:
                raise ValueError(f"a probe payload of {len(payload)} bytes is not float64s")
            self._record_probe(rank, _int(header, "step"), np.frombuffer(payload, "<f8"))
            return None, b""
        if op == "next":
            return self._next(rank, _int(header, "step"), _int(header, "rows"))
        if op == "finish":
            body = protocol.parse_json(payload, "the finish body") if payload else {}
            if not isinstance(body, dict):
                raise ValueError("the finish body is not an object")
            with self._lock:
                self.state.finishes[rank] = Finish(
                    str(header.get("status", "crash"))[:32], str(header.get("detail", ""))[:4000],
                    body.get("axes"), body.get("telemetry") or [])
            return {"ok": True}, b""
        raise ValueError(f"unknown op {op!r}")

    def _check_devices(self, rank: int, header: dict) -> None:
        """GPUs were assigned but CUDA is not usable inside: the host's fault, found before any
        token is scored. Only a rank's first hello counts: the harness sends it before any of
        the miner's code is imported, so a bundle cannot fake the fault to re-roll its run."""
        with self._lock:
            if rank in self.state.cuda_seen:
                return
            seen = header.get("cuda_devices", 0)
            self.state.cuda_seen[rank] = seen if isinstance(seen, int) else 0
        early = header.get("cuda_started")
        if early:
            raise FeederFailure(f"CUDA was started in rank {rank} before any of the miner's "
                                f"code ran ({str(early)[:300]}): the framework's or the "
                                "environment's doing, not the miner's")
        if self.plan.gpus and not self.state.cuda_seen[rank]:
            raise FeederFailure(f"the sandbox was given {self.plan.gpus} GPU(s) but CUDA is not "
                                f"usable inside it (rank {rank} sees no device): a host or "
                                "driver fault, not the miner's")

    def _check_stack(self, rank: int, header: dict) -> None:
        """Rank 0's first hello says what software the run computes with (before any miner
        code runs); a replay on other software stops here."""
        with self._lock:
            if rank != 0 or self.state.stack is not None:
                return
            self.state.stack = software_from_hello(header.get("stack")) or Stack()
        self._compare_with_original()

    def _check_cudnn(self, rank: int, header: dict) -> None:
        """cuDNN's version arrives with rank 0's ready, read once the harness has started
        CUDA (reading it starts CUDA, which the build must find unstarted): the stack is
        completed, and a replay on another cuDNN is not comparable from here."""
        version = header.get("cudnn")
        if rank != 0 or not isinstance(version, int) or isinstance(version, bool):
            return
        with self._lock:
            if self.state.stack is None or self.state.stack.cudnn is not None:
                return
            self.state.stack = self.state.stack.model_copy(update={"cudnn": version})
        self._compare_with_original()

    def _compare_with_original(self) -> None:
        """A replay whose software differs from the original's stops: its losses could not
        judge the original, and it is reported as not comparable."""
        if self.replay is None:
            return
        why = not_comparable(self.replay.stack, self.state.stack, SOFTWARE)
        if why is not None:
            with self._lock:
                self.state.incomparable = why
            raise FeederFailure(why)

    # ---- losses ----------------------------------------------------------------------------
    def _record_loss(self, rank: int, step: int, payload: bytes) -> None:
        """The per-position losses of one served batch, taken as they arrive (checked for
        their batch and size, timed); summed and sampled by `_settle`, which runs after this
        rank's next reply is sent, or at once wherever they are read (the early stop's
        checkpoints, the run's end): off the path between a request and its reply."""
        with self._lock:
            served = self.state.served.get((step, rank))
            if served is None or served.nats is not None or served.pending is not None:
                self.state.problems.append(f"loss for a batch not served or reported twice: "
                                           f"step {step} rank {rank}")
                return
            if len(payload) != served.scored.size * 4:
                raise ValueError(f"step {step}: {len(payload)} bytes of losses for "
                                 f"{served.scored.size} positions")
            served.pending = payload
            served.t = time.monotonic() - self.t0
            self._unsettled.append(served)

    def _settle(self) -> None:
        """Sum and sample every loss taken but not yet settled. Called under the lock."""
        for served in self._unsettled:
            per_token = np.frombuffer(served.pending, dtype="<f4").reshape(served.scored.shape)
            scored = per_token[served.scored].astype(np.float64)
            nats = float(scored.sum())
            if math.isfinite(nats) and scored.size and scored.min() < -1e-3:
                self._problem_locked(f"step {served.step} rank {served.rank}: a negative "
                                     "loss was reported")
                nats = math.nan
            row_idx, pos = served.kept or self._kept(served)
            served.nats = nats
            served.sample = [float(v) for v in per_token[row_idx, pos]]
            served.pending = None
            if scored.size:
                self.state.last_loss = (served.step, nats / scored.size)
        self._unsettled.clear()

    def _kept(self, served: Served) -> tuple[np.ndarray, np.ndarray]:
        return kept_positions(self.plan.sample_secret, served.position, len(served.rows),
                              self.plan.seq_len, self.plan.keep_rate)

    def _record_probe(self, rank: int, step: int, nats) -> None:
        with self._lock:
            served = self.state.served.get((step, rank))
            if served is None or not served.probe_asked or served.probed is not None:
                self.state.problems.append(f"probe result for step {step} rank {rank} that "
                                           "was not asked for")
                return
            values = [float(v) for v in nats][: served.scored.size]
            served.probed = values
            st = self.state
            if rank == 0 and st.deadline_at is not None:  # the ranks probe side by side
                spent = max(0.0, time.monotonic() - served.served_at)
                more = min(spent, self.plan.probe_allowance_s - st.probe_extension_s)
                if more > 0:
                    st.deadline_at += more
                    st.probe_extension_s += more

    def _record_snapshot(self, rank: int, step: int, payload: bytes, end: bool) -> None:
        """A frame of the snapshot asked at this step, appended to its file in the host
        folder as it arrives (`end`: the last frame; the snapshot counts only then). The
        harness streams it while `torch.save` writes, before the step's scored forward, so
        no copy of it ever lies in the training sandbox. Frames of a snapshot not asked, or
        past the run's bound on snapshot bytes, are refused as the run's fault."""
        with self._lock:
            served = self.state.served.get((step, rank))
            if served is None or not served.snapshot_asked or served.snapshot is not None \
                    or self.snapshot_dir is None:
                raise ValueError(f"a snapshot for step {step} rank {rank} that was not asked "
                                 "for, or after it ended")
            if self.state.snapshot_bytes + len(payload) > self.plan.snapshot_bytes:
                raise ValueError(f"snapshots over {self.plan.snapshot_bytes} bytes in all")
            self.state.snapshot_bytes += len(payload)
            first = served.snapshot_received == 0
            served.snapshot_received += len(payload)
        path = self.snapshot_dir / f"step_{step:08d}_rank{rank}.pt"
        # only this rank's connection writes this file: no other thread touches it
        with open(path, "wb" if first else "ab") as f:
            f.write(payload)
        if end:
            with self._lock:
                served.snapshot = path

    # ---- batches ---------------------------------------------------------------------------
    def _next(self, rank: int, step: int, rows: int) -> tuple[dict, bytes]:
        if rows < 1:
            raise ValueError("rows must be positive")
        if rows * (self.plan.seq_len + 1) * 4 > MAX_BATCH_BYTES:
            raise ValueError(f"a batch of {rows} rows is over the limit of "
                             f"{MAX_BATCH_BYTES // ((self.plan.seq_len + 1) * 4)} rows")
        with self._lock:
            st = self.state
            if not 0 <= step <= len(st.steps):
                raise ValueError(f"step {step} requested, the next step is {len(st.steps)}")
            if (step, rank) in st.served:  # the same rows twice: trained on, then scored
                raise ValueError(f"step {step} was already served to rank {rank}")
            if step == len(st.steps):
                st.steps.append(self._allocate(step, rows))
            alloc = st.steps[step]
            if alloc.requested_rows != rows:
                raise ValueError(f"rank {rank} asked {rows} rows at step {step}, another rank "
                                 f"asked {alloc.requested_rows}")
            self._asked[rank] = step
            self._turn.notify_all()
            if alloc.done:
                return {"done": True}, b""
            position = alloc.start + rank * alloc.per_rank_rows
            n = alloc.per_rank_rows
            # in step: no rank gets later rows (another rank's continuation of its text, to
            # hand over before its own scored forward) while another is still behind
            while not self._closed.is_set() and any(
                    r not in self._left and self._asked.get(r, -1) < step
                    for r in range(self.plan.world_size) if r != rank):
                self._turn.wait(0.5)
        ahead = self._ahead.pop(rank, None)
        if ahead is None or ahead[0] != (position, n):
            ahead = ((position, n), self._block(position, n))
        indices, block, scored, tokens, nbytes = ahead[1]
        served = Served(step, rank, position, indices, tokens, nbytes, scored)
        reply: dict = {"rows": n, "tokens": tokens}
        if self.replay is not None:
            self._replay_instructions(served, reply)
        with self._lock:
            served.served_at = time.monotonic()
            self.state.served[(step, rank)] = served
        return reply, np.ascontiguousarray(block, dtype="<i4").tobytes()

    def _block(self, position: int, n: int) -> tuple:
        """(row indices, int32 rows, scored targets, scored tokens, their bytes) of the `n`
        rows served from stream `position`."""
        indices = self.order.rows_at(position, n)
        try:
            block = self.stream.rows_at(self.plan.seq_len, indices)
        except Exception as exc:
            raise FeederFailure(f"feeder: reading rows at stream position {position}: "
                                f"{type(exc).__name__}: {exc}") from exc
        scored = block[:, 1:] != self.plan.separator_id
        for i, row in enumerate(indices.tolist()):
            if row in self.order.unscored:
                scored[i, -1] = False
        tokens = int(scored.sum())
        nbytes = int(self.stream.byte_lengths[block[:, 1:]][scored].sum())
        return indices, block, scored, tokens, nbytes

    def _after_next(self, step, rank: int) -> None:
        """While the harness trains on the batch just served (the feeder's idle time), draw
        its kept positions and read the rows this rank most likely asks for next (as many
        rows, from where the stream stands now). Both would otherwise sit between the
        harness's request and the reply, in every step. A guess that proves wrong (another
        batch size, the budget's end, a deadline) is dropped: `_next` reads what it serves."""
        with self._lock:
            self._settle()
            served = self.state.served.get((step, rank)) if isinstance(step, int) else None
            st = self.state
            if served is None or len(st.steps) != step + 1:
                return
            W = self.plan.world_size
            n = min(len(served.rows), (self.plan.budget_rows - st.next_position) // W)
            position = st.next_position + rank * n
        if served.kept is None:
            served.kept = self._kept(served)
        if n >= 1:
            try:
                self._ahead[rank] = ((position, n), self._block(position, n))
            except FeederFailure:  # the request itself reads again and reports it
                self._ahead.pop(rank, None)

    def _replay_instructions(self, served: Served, reply: dict) -> None:
        """At the checked steps, the harness snapshots and/or predicts the kept positions
        without their targets before the scored forward."""
        replay = self.replay
        if served.step in replay.snapshot_steps:
            served.snapshot_asked = True
            reply["snapshot"] = True
        if served.step in replay.probe_steps:
            served.kept = self._kept(served)
            row_idx, pos = served.kept
            if not len(row_idx):  # another rank holds this step's kept positions
                return
            served.probe_asked = True
            reply["probe"] = {"rows": row_idx.tolist(), "positions": pos.tolist()}

    def _allocate(self, step: int, rows: int) -> _Step:
        st, W = self.state, self.plan.world_size
        if rows * W > self.order.max_step_rows:
            raise ValueError(f"a step may take at most {self.order.max_step_rows // W} rows "
                             f"per rank (asked {rows})")
        remaining = self.plan.budget_rows - st.next_position
        late = st.deadline_at is not None and time.monotonic() > st.deadline_at
        per_rank = min(rows, remaining // W)
        if self.replay is not None:
            if step > self.replay.last_step:
                return _Step(rows, 0, st.next_position, True)
            original = self.replay.original.get((step, 0))
            if original is None or original[0] != per_rank:
                st.diverged = (f"step {step}: the replay took {per_rank} rows per rank, the "
                               f"original run {'none' if original is None else original[0]}")
                return _Step(rows, 0, st.next_position, True)
        if late and per_rank >= 1 and st.deadline_cut_row is None:
            st.deadline_cut_row = st.next_position
        if late or per_rank < 1 or self._hopeless():
            return _Step(rows, 0, st.next_position, True)
        alloc = _Step(rows, per_rank, st.next_position, False)
        st.next_position += per_rank * W
        return alloc

    def _hopeless(self) -> bool:
        """Past a checkpoint, judged on the longest stretch of the stream from its start
        whose losses have all arrived (ranks report at their own pace): may this run still
        take the lead? Called under the lock."""
        st = self.state
        if st.stopped is not None:
            return True
        if self.watch is None or not self.watch.due(st.next_position):
            return False  # the cheap test: nothing to judge before the stream passes one
        self._settle()
        reported = []
        for served in sorted(st.served.values(), key=lambda s: s.position):
            if served.nats is None:
                break
            reported.append((served.position, len(served.rows), served.nats))
        end = reported[-1][0] + reported[-1][1] if reported else 0
        if not self.watch.due(end):
            return False
        decision = self.watch.check(end, reported)
        if decision.stop:
            st.stopped = decision
        return decision.stop

    def kill_at(self, grace_s: float) -> float | None:
        """When the run must be over: the deadline plus `grace_s` to return and save."""
        deadline = self.state.deadline_at
        return None if deadline is None else deadline + grace_s

    # ---- after the run -------------------------------------------------------------------
    def close(self) -> None:
        """Stop serving; every loss that arrived is settled (the run's record reads them)."""
        self._closed.set()
        try:
            self._server.close()
        finally:
            self.path.unlink(missing_ok=True)
        for thread in self._threads:
            thread.join(timeout=2)
        with self._lock:
            self._settle()
            partial = [s for s in self.state.served.values()
                       if s.snapshot_received and s.snapshot is None]
        for s in partial:  # a rank that stopped mid-snapshot: never handed to the eval
            (self.snapshot_dir / f"step_{s.step:08d}_rank{s.rank}.pt").unlink(missing_ok=True)

    def reported(self) -> list[Served]:
        """Batches whose losses reached the feeder, in stream order."""
        with self._lock:
            self._settle()
            done = [s for s in self.state.served.values() if s.nats is not None]
        return sorted(done, key=lambda s: (s.position, s.rank))

    def unreported(self) -> list[Served]:
        with self._lock:
            self._settle()
            return [s for s in self.state.served.values() if s.nats is None]
