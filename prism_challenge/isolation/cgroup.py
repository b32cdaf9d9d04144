"""Kernel-enforced memory and process limits for one sandbox, via cgroups (v2 or v1).

A fork bomb or a memory bomb must hit a wall the kernel holds, not a poll loop we hope is
fast enough. When no writable cgroup hierarchy exists (an unprivileged host), `create`
returns None and the supervisor falls back to polling the process tree. A slot's CPU cores
become a cpuset where the cpuset controller is writable too (the kernel then refuses any
affinity outside it); otherwise the supervisor only sets the launcher's affinity.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read_kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().lstrip("-").isdigit():
                out[key] = int(value)
    except OSError:
        pass
    return out


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


@dataclass
class Cgroup:
    """One sandbox's cgroup: `dirs` are the directories a process joins (one per hierarchy)."""

    version: int
    memory_dir: Path
    pids_dir: Path
    cpuset_dir: Path | None = None  # set when the run's CPU cores are held by the kernel

    @property
    def dirs(self) -> tuple[Path, ...]:
        found = (self.memory_dir, self.pids_dir, self.cpuset_dir)
        return tuple(dict.fromkeys(d for d in found if d is not None))

    @classmethod
    def create(cls, name: str, memory_bytes: int, pids_max: int,
               cpus: tuple[int, ...] = ()) -> Cgroup | None:
        try:
            if (ROOT / "cgroup.controllers").exists():
                group = cls._create_v2(name, memory_bytes, pids_max)
            elif (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
                group = cls._create_v1(name, memory_bytes, pids_max)
            else:
                return None
        except OSError:
            return None
        if cpus:
            group.cpuset_dir = group._cpuset(name, cpus)
        return group

    def _cpuset(self, name: str, cpus: tuple[int, ...]) -> Path | None:
        """Hold the run to `cpus`; None when the cpuset controller cannot be written."""
        listed = ",".join(str(c) for c in cpus)
        try:
            if self.version == 2:
                _write(self.memory_dir.parent / "cgroup.subtree_control", "+cpuset")
                _write(self.memory_dir / "cpuset.cpus", listed)
                return self.memory_dir
            root = ROOT / "cpuset"
            parent = root / "prism"
            parent.mkdir(exist_ok=True)
            for key in ("cpuset.cpus", "cpuset.mems"):  # v1 children start empty
                if not (parent / key).read_text().strip():
                    _write(parent / key, (root / key).read_text().strip())
            d = parent / name
            d.mkdir(exist_ok=False)
        except OSError:
            return None
        try:
            _write(d / "cpuset.cpus", listed)
            _write(d / "cpuset.mems", (parent / "cpuset.mems").read_text().strip())
        except OSError:
            d.rmdir()
            return None
        return d

    @classmethod
    def _create_v1(cls, name: str, memory_bytes: int, pids_max: int) -> Cgroup:
        mem = ROOT / "memory" / "prism" / name
        pids = ROOT / "pids" / "prism" / name
        made: list[Path] = []
        try:
            for d in (mem, pids):
                d.mkdir(parents=True, exist_ok=False)
                made.append(d)
            _write(mem / "memory.limit_in_bytes", str(memory_bytes))
            swap = mem / "memory.memsw.limit_in_bytes"
            if swap.exists():
                _write(swap, str(memory_bytes))
            _write(pids / "pids.max", str(pids_max))
        except OSError:
            for d in made:
                d.rmdir()
            raise
        return cls(1, mem, pids)

    @classmethod
    def _create_v2(cls, name: str, memory_bytes: int, pids_max: int) -> Cgroup:
        parent = ROOT / "prism"
        parent.mkdir(exist_ok=True)
        _write(parent / "cgroup.subtree_control", "+memory +pids")
        d = parent / name
        d.mkdir(exist_ok=False)
        try:
            _write(d / "memory.max", str(memory_bytes))
            _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(pids_max))
        except OSError:
            d.rmdir()
            raise
        return cls(2, d, d)

    @staticmethod
    def sweep_stale(min_age_s: float = 300.0) -> int:
        """Remove empty per-run cgroups left by a validator that was killed (SIGKILL).

        Only old ones: a cgroup made a moment ago may be empty because its process has not
        joined it yet.
        """
        removed = 0
        cutoff = time.time() - min_age_s
        for parent in (ROOT / "memory" / "prism", ROOT / "pids" / "prism",
                       ROOT / "cpuset" / "prism", ROOT / "prism"):
            if not parent.is_dir():
                continue
            for d in parent.iterdir():
                if d.is_dir() and d.stat().st_mtime < cutoff:
                    try:
                        d.rmdir()
                        removed += 1
                    except OSError:
                        pass  # still has processes (another validator's live run)
        return removed

    def join(self) -> None:
        """Move the calling process into the cgroup (called in the child before exec)."""
        pid = str(os.getpid())
        for d in self.dirs:
            _write(d / "cgroup.procs", pid)

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _read_kv(self.memory_dir / name).get("oom_kill", 0)

    def memory_limit_hits(self) -> int:
        """Times the run's usage met its own limit (v1: memory or memory+swap, whichever the
        kernel charged first)."""
        if self.version == 2:
            events = _read_kv(self.memory_dir / "memory.events")
            return events.get("max", 0) + events.get("oom", 0)
        return sum(_read_int(self.memory_dir / name) or 0
                   for name in ("memory.failcnt", "memory.memsw.failcnt"))

    def fork_refusals(self) -> int:
        return _read_kv(self.pids_dir / "pids.events").get("max", 0)

    def peak_memory(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return _read_int(self.memory_dir / name)

    def pids(self) -> list[int]:
        try:
            text = (self.pids_dir / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroup until it is empty."""
        kill_file = self.pids_dir / "cgroup.kill"
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return
            if self.version == 2 and kill_file.exists():
                _write(kill_file, "1")
            else:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
