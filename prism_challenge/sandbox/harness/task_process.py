"""A process of its own for every held-out task the eval sandbox answers.

A model answers many held-out tasks one after another. Whatever one task's forward leaves
in its process and the next task's forward can read back would let the model learn from
the held-out text while it is scored: not only globals and caches, which a rebuild could
reset, but the order in which the memory allocators (pymalloc's pools, the C library's
caches) hand out blocks, which a task sets by what it frees and the next reads from
addresses (`id`, `hash`, a set's order) - no static rule can refuse that, and a red team
carried 22 bits a task through it. So no task's forward runs in a process another task's
forward ran in: the eval process builds the model once, before it sees any task, and forks
a process for each task (for a replay snapshot, for each run of consecutive tasks of that
snapshot, which is re-trained step by step); the process answers and exits, and the next
is forked from the same untouched parent. Nothing crosses but what a fork copies, which is
the same for every task.

The parent keeps processes forked ahead (spares: one on a CPU, a few where a GPU context
takes longer to make than a task) while the current one works, and lets each start only
once the one before it has exited: their preparation (thread count, the device's context,
the model onto the device) is the harness's own code, so a spare has nothing to read
before its task, and no two tasks' forwards ever run at the same time.

The parent runs single-threaded: GNU OpenMP's thread pool does not survive a fork (a
child's first parallel region waits forever on threads it does not have), so every
parallel region runs in the task processes, which set the run's thread count themselves.
It never touches CUDA either (a CUDA context does not survive a fork): each task process
makes its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

# How a task process ends (its exit status); anything else is a crash of the process.
NEXT = 0  # answered its task(s): the next process takes over
DONE = 3  # the host has no task left
FAILED = 4  # it reported its failure to the host itself
CRASHED = 5  # it ended on an error it could not report


class TaskProcessError(RuntimeError):
    """A task process ended in a way it does not end by itself (a signal, the memory
    limit); the parent reports it to the host."""


# the parent's ends of the pipes of the task processes it holds
_PARENT_ENDS: set[int] = set()


@dataclass
class _Child:
    pid: int
    go: int  # write end: one byte starts its work, closing it unstarted ends it
    report: int  # read end: the child's work profile (JSON), written as it exits


def fork_task(prepare: Callable[[], None], work: Callable[[BaseException | None], int],
              profile: Callable[[], dict]) -> _Child:
    """Fork a task process: it runs `prepare` at once, waits for its start, runs `work`
    with what `prepare` raised, if anything (`work` reports it to the host), whose return
    is its exit status, and writes `profile()` back as it exits."""
    go_r, go_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task process
        code = CRASHED
        try:
            # its own ends, and the parent's ends of the spares forked before it: a copy of
            # another spare's start pipe held here would keep that spare from ever seeing
            # it closed
            for fd in (go_w, rep_r, *_PARENT_ENDS):
                os.close(fd)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            prepared: BaseException | None = None
            try:
                prepare()
            except BaseException as exc:  # noqa: BLE001 - reported once it may talk
                prepared = exc
            code = work(prepared) if os.read(go_r, 1) == b"g" else DONE
            with contextlib.suppress(Exception):
                os.write(rep_w, json.dumps(profile()).encode())
        finally:
            os._exit(code)
    os.close(go_r)
    os.close(rep_w)
    _PARENT_ENDS.update((go_w, rep_r))
    return _Child(pid, go_w, rep_r)


def _close(fd: int) -> None:
    _PARENT_ENDS.discard(fd)
    with contextlib.suppress(OSError):
        os.close(fd)


def _wait(child: _Child) -> tuple[int, dict]:
    """The child's exit status (negative: the signal that ended it) and its profile."""
    _, status = os.waitpid(child.pid, 0)
    data = b""
    while chunk := os.read(child.report, 1 << 16):
        data += chunk
    _close(child.report)
    try:
        profile = json.loads(data) if data else {}
    except ValueError:
        profile = {}
    return os.waitstatus_to_exitcode(status), profile


def _discard(child: _Child) -> None:
    """End a spare that was never started (it ran none of the miner's code: nothing of it
    is lost), without waiting for its preparation."""
    _close(child.go)
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)
    _wait(child)


def run_task_processes(fork: Callable[[], _Child], on_profile: Callable[[dict], None],
                       spares: int = 1) -> int:
    """Task processes one after another until one finds no task left (DONE) or one fails;
    returns DONE or FAILED, raises TaskProcessError for a crashed one. `spares` processes are
    kept forked and preparing ahead of the one at work (where preparing is slow, a GPU's
    context, several overlap it), each started only after the one before it exited."""
    ahead = deque(fork() for _ in range(max(1, spares)))
    try:
        while True:
            current = ahead.popleft()
            os.write(current.go, b"g")
            _close(current.go)
            ahead.append(fork())
            code, profile = _wait(current)
            on_profile(profile)
            if code == NEXT:
                continue
            if code in (DONE, FAILED):
                return code
            how = (f"was killed by signal {signal.Signals(-code).name}" if code < 0
                   and -code in signal.valid_signals() else f"exited with status {code}")
            raise TaskProcessError(f"an eval task's process {how} (the memory limit, if it "
                                   "was SIGKILL)")
    finally:
        for child in ahead:
            _discard(child)
