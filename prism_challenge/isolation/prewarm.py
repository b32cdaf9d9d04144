"""The prewarmed interpreter: one process per validator that has imported torch and forks a
child into each sandbox bubblewrap builds, so no sandbox pays `import torch` again.

The prewarmed process is started with the sandbox's own environment less the run's values
(`start_env`: a process's `/proc/self/environ` keeps what it was started with, and
`PYTHONHASHSEED` and `PYTHONUNBUFFERED` are read only then), runs nothing but the program
below (stdlib, torch, and `torch._dynamo`, which every optimizer's
first construction imports, and `enter.py`'s source: no module of PRISM's is imported, so
none shadows the harness's files in the sandbox) and never runs a sandbox's program itself. On
each request it forks; the fork, not the prewarmed process, receives the run's request, so no
run's values stay in the memory later forks inherit. The fork joins the run's cgroup, CPU
cores and rlimits, joins the sandbox (`enter_sandbox`), forks into its pid namespace, and the
grandchild sheds every privilege, closes every inherited descriptor, takes the sandbox's
environment, `sys.path` and working folder, and runs the program's module as `__main__`.
The fork reports the grandchild's exit status on its own socket.

Only programs started as `python -m MODULE ...` are prewarmed (`entry_of`); the supervisor
follows the grandchild through `EnteredProgram` and kills the sandbox's waiter with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from prism_challenge.isolation.spec import minimal_env

# What the prewarmed interpreter runs, after `enter.py`'s own source.
_LOOP = r'''
import contextlib, json, os, resource, runpy, signal, socket, sys, tempfile, traceback
import numpy, torch  # noqa: F401 - the point of this process
# what the first optimizer's constructor imports (torch._disable_dynamo): seconds of a run's
# start-up otherwise. On CUDA builds it imports triton too and leaves CUDA unstarted, so the
# forks still use the GPU (tests/gpu/test_prewarm_dynamo_cuda.py; passed on an H100).
import torch._dynamo  # noqa: F401

def _run(request, out_fd):
    os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.closerange(3, 1 << 16)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    tempfile.tempdir = None
    paths = [p for p in request["env"].get("PYTHONPATH", "").split(":") if p]
    sys.path[:] = [request["cwd"], *paths, *sys.path[1:]]
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)

def _fork_child(sock, out_fd):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            os._exit(0)
        data += chunk
    request = json.loads(data)
    try:
        for procs in request["cgroup_procs"]:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))
        if request["cpus"]:
            os.sched_setaffinity(0, request["cpus"])
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = request["fsize"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        enter_sandbox(request["pid"])
        ready_r, ready_w = os.pipe()
        inner = os.fork()
        if inner == 0:
            try:
                sock.close()
                os.close(ready_r)
                shed_privileges()
                os.write(ready_w, b"ok")
            except BaseException:
                os._exit(70)
            _run(request, out_fd)
        os.close(ready_w)
        os.close(out_fd)
        ok = os.read(ready_r, 2) == b"ok"
        os.close(ready_r)
        if not ok:
            os.waitpid(inner, 0)
            raise EnterError(0, "the entered process could not shed its privileges")
    except BaseException as exc:
        sock.sendall(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        os._exit(0)
    sock.sendall(b'{"entered": true}\n')
    _, st = os.waitpid(inner, 0)
    sock.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(st)}).encode() + b"\n")
    os._exit(0)

def _serve(ctl):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
    # ends when the validator does: its end of the control socket closes (recv returns
    # nothing); a parent-death signal would fire when the *thread* that started it ended
    while True:
        msg, fds, _, _ = socket.recv_fds(ctl, 16, 2)
        if not msg or len(fds) != 2:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            ctl.close()
            _fork_child(socket.socket(fileno=fds[0]), fds[1])
        for fd in fds:
            os.close(fd)
        ctl.sendall(f"{pid}\n".encode())

_serve(socket.socket(fileno=3))
'''


def _source() -> str:
    return (Path(__file__).with_name("enter.py").read_text() + "\n" + _LOOP)


def entry_of(argv: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """(module, args) for `python -m MODULE ARGS...` with this interpreter; else None."""
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m":
        return argv[2], tuple(argv[3:])
    return None


class EnteredProgram:
    """A sandbox's program run by a fork of the prewarmed interpreter, as the supervisor
    sees a process: `pid` (the fork, parent of the program), `stdout`, `poll()`,
    `returncode`, `kill()`."""

    def __init__(self, pid: int, control: socket.socket, stdout) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._control = control
        self._control.setblocking(False)
        self._data = b""

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        chunk = b"-"
        if not self._data.endswith(b"\n"):
            try:
                chunk = self._control.recv(4096)
            except BlockingIOError:
                return None
            self._data += chunk
            if chunk and not self._data.endswith(b"\n"):
                return None
        if not chunk and not self._data:
            self.returncode = -9  # the fork ended without a word: it was killed
        else:
            self.returncode = int(json.loads(self._data)["exit"])
        self._control.close()
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 9)


# What a sandbox's environment holds that is never part of a prewarmed interpreter's start:
# the run's own values (PRISM_*: its seed, paths, socket), its import path (the fork sets
# sys.path from it) and what CUDA reads when it initialises, which happens in the fork.
# Everything else may be read once, when the interpreter starts or a module is imported
# (OpenMP sizes its default team from OMP_NUM_THREADS, inductor's config reads its compiler
# and compile-pool size): the prewarmed interpreter starts with it, and serves only sandboxes
# whose environment has the same values, so a run's threads, its arithmetic and what it
# compiles with match a cold start's.
RUN_OWN_PREFIX = "PRISM_"
READ_IN_THE_FORK = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def start_env(env: dict[str, str]) -> dict[str, str]:
    """The part of a sandbox's environment its prewarmed interpreter starts with."""
    return {k: v for k, v in env.items()
            if not k.startswith(RUN_OWN_PREFIX) and k not in READ_IN_THE_FORK}


class Prewarmed:
    """A prewarmed interpreter, started on first use and again if it died."""

    def __init__(self, start_env: dict[str, str]) -> None:
        self.start_env = start_env
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", f"import os\nos.dup2({theirs.fileno()}, 3)\n"
             f"exec(compile({_source()!r}, '<prewarm>', 'exec'))"],
            pass_fds=(theirs.fileno(),), env=self.start_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
            start_new_session=True)
        theirs.close()
        self._control = ours

    def spawn(self, request: dict) -> EnteredProgram:
        """Fork a child for `request` (pid, module, args, env, cwd, cgroup_procs, cpus,
        fsize) and hand it the request. Raises PrewarmUnavailable, with nothing of the
        program run, when the child could not enter the sandbox or the prewarmed process is
        gone (it is started again once)."""
        for attempt in (1, 2):
            try:
                return self._spawn(request)
            except _Gone:
                if attempt == 2:
                    raise PrewarmUnavailable("the prewarmed interpreter ended twice") from None
        raise AssertionError("unreachable")

    def _spawn(self, request: dict) -> EnteredProgram:
        out_r, out_w = os.pipe()
        mine, its = socket.socketpair()
        try:
            with self._lock:
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                assert self._control is not None
                try:
                    socket.send_fds(self._control, [b"fork"], [its.fileno(), out_w])
                    pid, _ = _line(self._control, b"")
                except (OSError, ValueError) as exc:
                    self._proc = None
                    raise _Gone() from exc
            mine.sendall(json.dumps(request).encode() + b"\n")
            mine.settimeout(ENTER_TIMEOUT_S)
            try:
                first, rest = _line(mine, b"")
            except (OSError, ValueError) as exc:
                raise PrewarmUnavailable(f"the fork did not enter the sandbox: {exc}") from exc
            status = json.loads(first)
            if not status.get("entered"):
                raise PrewarmUnavailable(f"the fork could not enter the sandbox: "
                                         f"{status.get('error', status)}")
            program = EnteredProgram(int(pid), mine, os.fdopen(out_r, "rb"))
            program._data = rest
            return program
        except BaseException:
            mine.close()
            os.close(out_r)
            raise
        finally:
            its.close()
            os.close(out_w)


class _Gone(Exception):
    """The prewarmed process did not answer: it ended."""


class PrewarmUnavailable(RuntimeError):
    """A sandbox's program could not be started in the prewarmed interpreter; nothing of it
    ran, so the caller starts it cold."""


# How long a fork may take to join a sandbox and shed its privileges (milliseconds, idle).
ENTER_TIMEOUT_S = 60.0


def _line(sock: socket.socket, data: bytes) -> tuple[bytes, bytes]:
    """The next line from `sock` (after `data` already read) and what came after it."""
    while b"\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("the connection closed")
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line, rest


_POOL: dict[tuple[tuple[str, str], ...], Prewarmed] = {}
_POOL_LOCK = threading.Lock()


def prewarmed_for(env: dict[str, str]) -> Prewarmed:
    """The prewarmed interpreter for a sandbox whose environment is `env`."""
    start = start_env(env)
    key = tuple(sorted(start.items()))
    with _POOL_LOCK:
        if key not in _POOL:
            _POOL[key] = Prewarmed(minimal_env(start))
        return _POOL[key]
