"""Run one sandboxed process tree to completion or to the first limit it breaks.

Shared by every backend that runs a local process (bubblewrap, none): start the program in
its own session and cgroup, keep only the tail of its output, watch wall time, memory,
processes and scratch disk, and kill the whole tree with a recorded cause.
"""

from __future__ import annotations

import collections
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prism_challenge.isolation.cgroup import Cgroup
from prism_challenge.isolation.spec import (
    ExitCause,
    Limits,
    SandboxResult,
    StopAt,
    human_bytes,
)

# Starts a sandbox's program inside the sandbox the launcher built: (launcher, its cgroup) ->
# the process to follow (pid, stdout, poll(), returncode, kill(): prewarm.EnteredProgram).
Enter = Callable[[subprocess.Popen, Cgroup | None], Any]

POLL_S = 0.05
DISK_POLL_S = 0.5
OUTPUT_KILL_FACTOR = 64  # output beyond 64x the kept tail is a flood: kill
# The environment of the launcher itself (bwrap, env). Never the validator's own: bwrap
# stays alive as pid 1 inside the sandbox, where /proc/1/environ would show it.
LAUNCHER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def dir_size(path: Path) -> int:
    """Bytes allocated below `path` (sparse files count what they really use)."""
    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return total


def _tree(root: int) -> list[int]:
    """Pids of `root` and all its descendants (fallback when there is no cgroup)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        children[ppid].append(int(name))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def _rss(pids: list[int]) -> int:
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


class _Tail:
    """Keeps the last `keep` bytes of a stream and counts all of it."""

    def __init__(self, stream, keep: int) -> None:
        self.keep = keep
        self.total = 0
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        while chunk := stream.read1(65536):
            self.total += len(chunk)
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size - len(self._chunks[0]) >= self.keep:
                self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        self._thread.join(timeout=5)
        data = b"".join(self._chunks)[-self.keep :]
        return data.decode("utf-8", errors="replace")


def supervise(argv: list[str], limits: Limits, scratch: Path, *, name: str,
              stop_at: StopAt = None, cpus: tuple[int, ...] = (),
              enter: Enter | None = None) -> SandboxResult:
    """`cpus`: the cores the whole tree runs on (a cpuset where cgroups allow, and always the
    launcher's affinity, which every process it starts inherits). `enter`: `argv` only
    builds the sandbox around a waiter, and `enter(launcher, cgroup)` starts the program in
    it (the prewarmed interpreter, isolation/prewarm.py); the program is what is followed."""
    cgroup = Cgroup.create(f"{name}-{os.getpid()}-{time.monotonic_ns()}", limits.memory_bytes,
                           limits.pids_max, cpus)

    def _in_child() -> None:
        if cgroup is not None:
            cgroup.join()
        if cpus:
            os.sched_setaffinity(0, cpus)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.disk_bytes, limits.disk_bytes))

    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_in_child,
            env=LAUNCHER_ENV,
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    watched = proc
    try:
        if enter is not None:
            watched = enter(proc, cgroup)
    except BaseException:
        _kill_tree(proc, cgroup)
        if cgroup is not None:
            cgroup.remove()
        raise
    tail = _Tail(watched.stdout, limits.output_bytes)
    cause: ExitCause | None = None
    detail = ""
    peak = 0
    next_disk = start
    try:
        while watched.poll() is None:
            now = time.monotonic()
            late = stop_at() if stop_at is not None else None
            if now - start > limits.wall_s:
                cause, detail = "timeout", f"wall-clock limit of {limits.wall_s:.0f}s reached"
            elif late is not None and now > late:
                cause, detail = "timeout", "still running past the deadline and its grace period"
            elif cgroup is not None and cgroup.fork_refusals() > 0:
                cause, detail = "pids", f"process limit of {limits.pids_max} reached"
            elif cgroup is not None and cgroup.oom_kills() > 0:
                cause, detail = _oom_cause(cgroup, limits)
            elif tail.total > OUTPUT_KILL_FACTOR * limits.output_bytes:
                cause, detail = "output", f"wrote over {human_bytes(tail.total)} of output"
            elif cgroup is None:
                pids = _tree(watched.pid)
                rss = _rss(pids)
                peak = max(peak, rss)
                if len(pids) > limits.pids_max:
                    cause, detail = "pids", f"process limit of {limits.pids_max} reached"
                elif rss > limits.memory_bytes:
                    cause, detail = "memory", memory_limit_reached(limits)
            if cause is None and now >= next_disk:
                next_disk = now + DISK_POLL_S
                used = dir_size(scratch)
                if used > limits.disk_bytes:
                    cause, detail = "disk", f"scratch space over {human_bytes(limits.disk_bytes)}"
            if cause is not None:
                break
            time.sleep(POLL_S)
    finally:
        if watched is not proc:
            watched.kill()
        _kill_tree(proc, cgroup)  # bubblewrap's init dies: the kernel ends its pid namespace,
        if watched is not proc:  # the entered program with it
            _wait(watched)
        wall = time.monotonic() - start
        output = tail.text()
        if cgroup is not None:
            peak = cgroup.peak_memory() or peak
            if cause is None and cgroup.oom_kills() > 0:
                cause, detail = _oom_cause(cgroup, limits)
            if cause is None and cgroup.fork_refusals() > 0 and proc.returncode != 0:
                cause, detail = "pids", f"process limit of {limits.pids_max} reached"
            cgroup.remove()
    code = watched.returncode
    if cause is None and code != 0 and dir_size(scratch) >= limits.disk_bytes:
        cause, detail = "disk", f"scratch space reached {human_bytes(limits.disk_bytes)}"
    if cause is None:
        if code == 0:
            cause = "ok"
        elif code in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
            cause, detail = "disk", "a file grew past the scratch-space limit"
        else:
            cause, detail = "crash", f"exit status {code}"
    limits_hit = () if cause in ("ok", "crash") else (cause,)
    return SandboxResult(cause, code, wall, output, tail.total, peak or None, detail, limits_hit)


# A peak this close to the run's own limit is the run's doing, even where the kernel's limit
# counters stay at 0 (some cgroup v1 hosts never count a hit that ended in an OOM kill).
OWN_LIMIT_FRACTION = 0.9


def _oom_cause(cgroup: Cgroup, limits: Limits) -> tuple[ExitCause, str]:
    """An OOM kill in a cgroup that never came near its own limit came from the host's OOM
    killer: the host ran out of memory, not the run."""
    peak = cgroup.peak_memory() or 0
    if cgroup.memory_limit_hits() == 0 and peak < OWN_LIMIT_FRACTION * limits.memory_bytes:
        return "host_memory", (f"killed by the host's OOM killer while under its own limit "
                               f"of {human_bytes(limits.memory_bytes)}")
    return "memory", memory_limit_reached(limits)


def memory_limit_reached(limits: Limits) -> str:
    """The detail of a run its own memory limit ended (every backend words it so)."""
    return f"memory limit of {human_bytes(limits.memory_bytes)} reached"


def _wait(program, timeout_s: float = 10.0) -> None:
    """Until the entered program's status is known (its fork reports it, or ended)."""
    deadline = time.monotonic() + timeout_s
    while program.poll() is None and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _kill_tree(proc: subprocess.Popen, cgroup: Cgroup | None) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if cgroup is not None:
        cgroup.kill_all()
    else:
        for pid in _tree(proc.pid)[1:]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
