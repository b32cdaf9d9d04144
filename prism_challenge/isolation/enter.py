"""Joining a running bubblewrap sandbox from outside it.

A sandbox's program used to start a fresh interpreter that imported torch (about 2 s of CPU
on a small host, most of a short run's start-up). The prewarmed interpreter (prewarm.py)
has imported torch, and never anything of a miner's; it forks one child per sandbox and
moves that child into a sandbox bubblewrap has just built: the same mounts, the same fresh
namespaces per run, so nothing a run leaves behind (SysV shared memory, message queues,
keyrings, files in /tmp) reaches the next one, which a long-lived shared sandbox could not
promise.

`enter_sandbox(pid)` is that move, for a forked, single-threaded child. The order is forced
by who owns what: bubblewrap creates the mount, pid, net, ipc, uts and cgroup namespaces in
one user namespace, then a nested one for the sandbox's uid, so the child first joins the
outer user namespace (where it holds the capabilities to join the rest), then the others,
then the program's own user namespace, and takes the program's root as its root. It must
then fork once more to be inside the pid namespace, and that grandchild calls
`shed_privileges()` before it runs anything: a new session, an empty capability set and
bounding set, and no_new_privs. `benchmarks/warm_start.py` measures the cold start against
this one and checks what the entered process can see; docs/sandbox.md has the design.
"""

from __future__ import annotations

import ctypes
import fcntl
import os

_CLONE = {"user": 0x10000000, "mnt": 0x00020000, "ipc": 0x08000000, "uts": 0x04000000,
          "net": 0x40000000, "cgroup": 0x02000000, "pid": 0x20000000}
_NS_GET_PARENT = 0xB702
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_CAP_VERSION_3 = 0x20080522
_CAP_LAST = 63  # above any capability the kernel defines; dropping an unknown one is a no-op

_libc = ctypes.CDLL(None, use_errno=True)


class EnterError(OSError):
    """The sandbox could not be joined (gone, or not ours to join)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise EnterError(err, f"{what}: {os.strerror(err)}")


def program_pid(init_pid: int) -> int:
    """The host pid of the sandbox's program: the only child of bubblewrap's pid-1 process
    (`--info-fd` reports that one as `child-pid`)."""
    with open(f"/proc/{init_pid}/task/{init_pid}/children") as fh:
        children = fh.read().split()
    if len(children) != 1:
        raise EnterError(0, f"sandbox init {init_pid} has {len(children)} children, not 1")
    return int(children[0])


def _same(fd: int, path: str) -> bool:
    return os.readlink(f"/proc/self/fd/{fd}") == os.readlink(path)


def enter_sandbox(pid: int) -> None:
    """Join every namespace of process `pid` (a sandbox's running program) and its root.

    Call in a freshly forked child with no other threads; afterwards fork again: only the
    grandchild is inside the sandbox's pid namespace. Raises EnterError, having joined
    possibly some namespaces, so the caller must exit on failure."""
    fds: dict[str, int] = {}
    try:
        for kind in _CLONE:
            fds[kind] = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        fds["root"] = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for kind in ("user", "mnt", "net", "pid"):  # a sandbox shares none of these with us
            if _same(fds[kind], f"/proc/self/ns/{kind}"):
                raise EnterError(0, f"process {pid} shares our {kind} namespace: no sandbox")
        try:
            fds["owner"] = fcntl.ioctl(fds["user"], _NS_GET_PARENT)
        except OSError as exc:
            raise EnterError(exc.errno or 0, f"the sandbox's user namespace: {exc}") from exc
        if not _same(fds["owner"], "/proc/self/ns/user"):
            _check(_libc.setns(fds["owner"], _CLONE["user"]), "join the sandbox's outer userns")
        for kind in ("mnt", "ipc", "uts", "net", "cgroup", "pid"):
            _check(_libc.setns(fds[kind], _CLONE[kind]), f"join the sandbox's {kind} namespace")
        _check(_libc.setns(fds["user"], _CLONE["user"]), "join the program's user namespace")
        os.fchdir(fds["root"])
        os.chroot(".")
        os.chdir("/")
    finally:
        for fd in fds.values():
            os.close(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def shed_privileges() -> None:
    """What bubblewrap does to its program before exec: a new session (no terminal to push
    input into), every capability gone for good, and no way to gain one through exec."""
    os.setsid()
    for cap in range(_CAP_LAST + 1):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the kernel's last: ignored
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "drop capabilities")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
