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

from prism_challenge.sandbox.harness.loading import CUDA_IN_BUILD

# How a task process ends (its exit status); anything else is a crash of the process.
NEXT = 0  # answered its task(s): the next process takes over
DONE = 3  # the host has no task left
FAILED = 4  # it reported its failure to the host itself
CRASHED = 5  # it ended on an error it could not report
REPORT_BYTES = 4096  # a task process's profile, padded: the same allocation for every task


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
              profile: Callable[[], dict], keep: tuple[int, ...] = ()) -> _Child:
    """Fork a task process: it closes every descriptor it inherited but stdio, `keep` and
    its own pipes, runs `prepare` at once, waits for its start, runs `work` with what
    `prepare` raised, if anything (`work` reports it to the host), whose return is its exit
    status, and writes `profile()` back as it exits."""
    go_r, go_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task process
        code = CRASHED
        try:
            # nothing inherited outlives the task or is shared with another: a descriptor
            # the eval process held (another spare's start pipe would also keep that spare
            # from ever seeing it closed) is closed before anything runs
            _close_all_but(0, 1, 2, go_r, rep_w, *keep)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            prepared: BaseException | None = None
            try:
                prepare()
            except BaseException as exc:  # noqa: BLE001 - reported once it may talk
                prepared = exc
            code = work(prepared) if os.read(go_r, 1) == b"g" else DONE
            with contextlib.suppress(Exception):
                report = json.dumps(profile()).encode()
                if len(report) <= REPORT_BYTES:
                    os.write(rep_w, report.ljust(REPORT_BYTES))
        finally:
            os._exit(code)
    os.close(go_r)
    os.close(rep_w)
    _PARENT_ENDS.update((go_w, rep_r))
    return _Child(pid, go_w, rep_r)


def fork_refusal() -> str | None:
    """Why the eval process, as it is now, must not fork task processes (None: it may), from
    the kernel's own account of it, which no object can hide from: a writable mapping
    shared with other processes (a tensor put in shared memory: every task would read what
    the one before wrote) or a mapping of the GPU's device files (CUDA started here: the
    forks could not use it). Threads are not refused: numpy's BLAS starts its own at import,
    and a thread of the eval process sees nothing a task process writes."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            perms, path = fields[1], fields[5] if len(fields) > 5 else ""
            if path.startswith("/dev/nvidia"):
                return CUDA_IN_BUILD
            if perms[1] == "w" and perms[3] == "s":
                return ("architecture.py left memory shared between processes while its "
                        f"model was built ({path or 'anonymous'}: share_memory or a shared "
                        "tensor): every held-out task would read what the one before it "
                        "wrote; remove it")
    return None


def _close_all_but(*keep: int) -> None:
    fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
    for fd in fds:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _close(fd: int) -> None:
    _PARENT_ENDS.discard(fd)
    with contextlib.suppress(OSError):
        os.close(fd)


def _wait(child: _Child) -> tuple[int, bytes]:
    """The child's exit status (negative: the signal that ended it) and its report, read
    whole and not parsed: every task leaves the eval process the same allocations, whatever
    its report says (its times are the miner's to shape)."""
    _, status = os.waitpid(child.pid, 0)
    report = os.read(child.report, REPORT_BYTES)
    _close(child.report)
    return os.waitstatus_to_exitcode(status), report


def read_report(report: bytes) -> dict:
    """A task process's profile, from its fixed-size report (empty: none written)."""
    try:
        return json.loads(report) if report.strip() else {}
    except ValueError:
        return {}


def _discard(child: _Child) -> None:
    """End a spare that was never started (it ran none of the miner's code: nothing of it
    is lost), without waiting for its preparation."""
    _close(child.go)
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)
    _wait(child)


def run_task_processes(fork: Callable[[], _Child], spares: int = 1
                       ) -> tuple[int, list[bytes]]:
    """Task processes one after another until one finds no task left (DONE) or one fails;
    returns DONE or FAILED with every process's report, in order (`read_report` parses one:
    only after the last task), raises TaskProcessError for a crashed one. `spares` processes
    are kept forked and preparing ahead of the one at work (where preparing is slow, a GPU's
    context, several overlap it), each started only after the one before it exited."""
    ahead: deque[_Child] = deque()
    reports: list[bytes] = []
    try:
        ahead.extend(fork() for _ in range(max(1, spares) - 1))
        while True:
            # forked before the current one starts: a fork refused (`fork` raises) leaves
            # no task running, and every process forked so far is ended below
            ahead.append(fork())
            current = ahead.popleft()
            os.write(current.go, b"g")
            _close(current.go)
            code, report = _wait(current)
            reports.append(report)
            if code == NEXT:
                continue
            if code in (DONE, FAILED):
                return code, reports
            how = (f"was killed by signal {signal.Signals(-code).name}" if code < 0
                   and -code in signal.valid_signals() else f"exited with status {code}")
            raise TaskProcessError(f"an eval task's process {how} (the memory limit, if it "
                                   "was SIGKILL)")
    finally:
        for child in ahead:
            _discard(child)
