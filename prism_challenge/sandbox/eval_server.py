"""The host side of the eval sandbox: hands out forward passes, keeps the answers.

Nothing the validator knows is placed in the eval sandbox as a file: the inputs of every
forward pass come over this socket, one task at a time, and they never hold the tokens
being predicted (the positions scored are cut away before the inputs leave the host). The
harness answers with the model's logits at the asked positions; the losses are computed
here, from those logits, so nothing inside can mis-compute them; the logits are dropped as
soon as their losses are known, so the host's memory stays bounded by one task.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism_challenge.sandbox import protocol


@dataclass
class Task:
    """One job for the eval harness. `inputs` int32[n, T]; for a logits task the answer is
    float32[len(select_rows), V]: the logits at (select_rows[i], select_positions[i])."""

    kind: str  # "logits" | "causality"
    model: str  # "trained" | "twin" | "snapshot"
    inputs: np.ndarray
    targets: np.ndarray | None = None  # host only: the tokens the selected positions predict
    mode: str = "eval"  # "eval": no dropout, no grad; "train": as the scored forward
    snapshot: str | None = None  # file name of the snapshot (model "snapshot")
    select_rows: list[int] = field(default_factory=list)
    select_positions: list[int] = field(default_factory=list)
    causality: dict | None = None  # {"positions": [...], "seed": int}
    tag: object = None  # the host's own label for the answer


@dataclass
class Answer:
    task: Task
    nats: np.ndarray | None = None  # float64 per selected position (logits tasks)
    result: dict | None = None


# Models answered from the final weights (or the forced-seed init) in a process of their own
# for every task.
FRESH_MODELS = ("trained", "twin")


def wipe(scratch: Path) -> None:
    """Empty the eval sandbox's scratch (what the sandbox sees as /scratch) and recreate its
    `tmp`: whatever the model wrote there, even read-only, is gone."""
    def unlock(func, path, _exc) -> None:
        os.chmod(os.path.dirname(path), 0o700)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, 0o700)
        func(path)

    for child in list(scratch.iterdir()) if scratch.is_dir() else []:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, onerror=unlock)
        else:
            child.unlink(missing_ok=True)
    (scratch / "tmp").mkdir(parents=True, exist_ok=True)


class EvalServer:
    """Serves `tasks` in order over a Unix socket; answers land in `answers`.

    With `scratch`, a task of a fresh model (the trained model, the twin) or of another
    snapshot than the last task's is handed out only after the sandbox's /scratch was
    emptied: each held-out task is answered from the final weights and nothing an earlier
    task left on disk. Consecutive tasks of one snapshot keep it (a snapshot is re-trained
    step by step, and a compiled one keeps its kernels there).

The sandbox answers each task of a held-out model in a process of its own, and each run of
consecutive tasks of one snapshot in one process (harness/task_process.py): a process
that answered a snapshot and asks again is told `respawn` when the next task is another
model's, and the task goes to the process that asks next.

    With `hello` None the server is held: a sandbox started before its run's training ended
    (`Runner`'s early eval sandbox) waits at its hello, having run nothing but the harness's
    own start, until `open` hands it its configuration and tasks; `close` before `open`
    sends it nothing, and it exits."""

    def __init__(self, socket_path: Path, hello: dict | None, tasks: Iterator[Task] | None,
                 vocab_size: int, scratch: Path | None = None) -> None:
        self.path = Path(socket_path)
        self.scratch = scratch
        self._last: tuple | None = None  # the model of the last task handed out
        self._pending: Task | None = None  # drawn, and held for the next process
        self._group: tuple | None = None  # the snapshot the asking process answers
        self.hello: dict | None = None
        self.tasks: Iterator[Task] = iter(())
        self._opened = threading.Event()
        if hello is not None:
            self.open(hello, tasks if tasks is not None else iter(()))
        self.vocab_size = vocab_size
        self.answers: list[Answer] = []
        self.problems: list[str] = []
        self._current: dict[int, Task] = {}
        self._served = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self.path.chmod(0o777)
        self._server.listen(1)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def open(self, hello: dict, tasks: Iterator[Task]) -> None:
        """Answer the sandbox's hello with `hello`, then serve `tasks`."""
        self.hello, self.tasks = hello, tasks
        self._opened.set()

    def _accept(self) -> None:
        try:
            conn, _ = self._server.accept()
        except OSError:
            return
        with conn:
            try:
                self._serve(conn)
            except (ConnectionError, OSError):
                return
            except (protocol.ProtocolError, KeyError, TypeError, ValueError) as exc:
                self.problems.append(f"eval protocol: {exc}"[:500])

    def _limit(self, header: dict) -> int:
        task = self._current.get(header.get("task")) if header.get("op") == "result" else None
        if task is None or task.kind != "logits":
            return 1 << 12
        return len(task.select_rows) * self.vocab_size * 4

    def _serve(self, conn: socket.socket) -> None:
        while True:
            header, payload = protocol.recv(conn, self._limit)
            op = header.get("op")
            if op == "hello":
                self._opened.wait()
                if self.hello is None:  # closed before it was opened
                    return
                protocol.send(conn, self.hello)
            elif op == "result":
                self._answer(header, payload)
            elif op == "task":
                task, self._pending = self._pending or next(self.tasks, None), None
                if task is None:
                    protocol.send(conn, {"kind": "done"})
                    return
                key = (task.model, task.snapshot)
                if self._group is not None and key != self._group:
                    # the process answering the last snapshot makes way for a new one
                    self._pending, self._group = task, None
                    protocol.send(conn, {"kind": "respawn"})
                    continue
                # a held-out model's process answers one task: the next asker is a new one
                self._group = None if task.model in FRESH_MODELS else key
                self._served += 1
                self._current = {self._served: task}
                key = (task.model, task.snapshot)
                if self.scratch is not None and (task.model in FRESH_MODELS
                                                 or key != self._last):
                    wipe(self.scratch)
                self._last = key
                protocol.send(conn, self._header(task), np.ascontiguousarray(
                    task.inputs, dtype="<i4").tobytes())
            elif op == "failed":
                self.problems.append(str(header.get("detail", ""))[:3000])
                return
            else:
                raise ValueError(f"unknown op {op!r}")

    @property
    def shown(self) -> bool:
        """Whether any task's inputs were handed to the sandbox."""
        return self._served > 0

    def _header(self, task: Task) -> dict:
        header = {"kind": task.kind, "task": self._served, "model": task.model,
                  "mode": task.mode, "rows": int(task.inputs.shape[0])}
        if task.snapshot is not None:
            header["snapshot"] = task.snapshot
        if task.kind == "logits":
            header["select_rows"] = [int(r) for r in task.select_rows]
            header["select_positions"] = [int(p) for p in task.select_positions]
        if task.causality is not None:
            header["causality"] = task.causality
        return header

    def _answer(self, header: dict, payload: bytes) -> None:
        task = self._current.pop(header.get("task"), None)
        if task is None:
            raise ValueError("an answer to a task that was not handed out")
        if task.kind == "logits":
            k = len(task.select_rows)
            if len(payload) != k * self.vocab_size * 4:
                raise ValueError(f"{len(payload)} bytes of logits for {k} positions")
            logits = np.frombuffer(payload, dtype="<f4").reshape(k, self.vocab_size)
            self.answers.append(Answer(task, nats=nats_at(logits, task.targets)))
        else:
            result = header.get("result")
            self.answers.append(Answer(task, result=result if isinstance(result, dict) else {}))

    def close(self) -> None:
        self._opened.set()  # a held hello is released with nothing: the sandbox exits
        try:
            self._server.close()
        finally:
            self.path.unlink(missing_ok=True)
        self._thread.join(timeout=2)


def nats_at(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """-ln softmax(logits)[target] per row, in float64 (non-finite logits give inf/nan)."""
    x = logits.astype(np.float64)
    top = np.max(x, axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        lse = np.log(np.sum(np.exp(x - top), axis=1)) + top[:, 0]
    return lse - x[np.arange(len(targets)), targets]
