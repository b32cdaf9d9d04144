"""What a prewarmed interpreter would save at every sandbox's start, and that it sees what a
cold start sees.

Each repeat runs the same program twice, alternating, in real bubblewrap sandboxes with a
run's mounts and environment:

- cold: the sandbox starts `python -c PROGRAM` (what every train, eval, replay and probe
  sandbox does today: a fresh interpreter that imports torch);
- warm: the sandbox starts only a waiter; this process, which imported torch once before
  the first repeat, forks a child that joins the sandbox (`isolation/enter.py`), forks once
  more into its pid namespace, sheds its privileges and runs PROGRAM in the already-imported
  interpreter.

PROGRAM sums a small tensor and reports what it can see: uid, capabilities, the network,
the clone's own files, a write to /usr, its pid and the pids it can see. The two starts must
report the same (a difference is printed and fails the run), but for the waiter: the warm
sandbox holds three processes (bubblewrap's init, the waiter, the program), the cold one
two. Wall time from the sandbox's start to the program's end, medians side by side:

    .venv/bin/python benchmarks/warm_start.py [--repeats 5]
    .venv/bin/python benchmarks/warm_start.py --smoke     # one repeat
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from prism_challenge.isolation import bubblewrap
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.isolation.enter import enter_sandbox, program_pid, shed_privileges
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = f"""
import json, os, socket
import torch
facts = {{"sum": float(torch.arange(10.0).sum()), "uid": os.getuid(), "pid": os.getpid(),
          "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
          "caps": sorted(line.split()[1] for line in open("/proc/self/status")
                         if line.startswith("Cap") and line.split()[0] != "CapAmb:"),
          "hostname": socket.gethostname(), "cwd": os.getcwd()}}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    facts["network"] = "reached"
except OSError as exc:
    facts["network"] = exc.__class__.__name__
facts["clone_visible"] = os.path.exists({str(ROOT / "README.md")!r})
try:
    open("/usr/prism-warm-start", "w")
    facts["usr_writable"] = True
except OSError:
    facts["usr_writable"] = False
print(json.dumps(facts, sort_keys=True), flush=True)
"""
WAITER = ("/bin/sh", "-c", "echo ready; exec sleep 600")


def _spec(scratch: Path, argv: tuple[str, ...]) -> SandboxSpec:
    return SandboxSpec(argv=argv, mounts=(Mount(scratch, "/scratch", writable=True),),
                       env=minimal_env(), limits=Limits(120, 2**30, 64, 2**26, 65536),
                       scratch=scratch, name="prism-warm-start")


def _etc(folder: Path) -> Path:
    for name, text in (("hosts", bubblewrap.HOSTS), ("nsswitch.conf", bubblewrap.NSSWITCH),
                       ("passwd", bubblewrap.PASSWD), ("group", bubblewrap.GROUP)):
        (folder / name).write_text(text)
    return folder


def cold(backend: BubblewrapBackend, scratch: Path) -> tuple[float, dict]:
    start = time.monotonic()
    result = backend.run(_spec(scratch, (sys.executable, "-c", PROGRAM)))
    wall = time.monotonic() - start
    if result.cause != "ok":
        raise SystemExit(f"cold start failed ({result.cause}): {result.output[-800:]}")
    return wall, json.loads(result.output.strip().splitlines()[-1])


def _run_inside(pid: int, out_fd: int, env: dict[str, str]) -> None:
    """The forked child: join the sandbox, fork into its pid namespace, run PROGRAM there."""
    try:
        enter_sandbox(pid)
        inner = os.fork()
        if inner == 0:
            shed_privileges()
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
            os.closerange(3, 65536)
            os.environ.clear()
            os.environ.update(env)
            os.chdir("/scratch")
            exec(compile(PROGRAM, "<program>", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
            os._exit(0)
        _, status = os.waitpid(inner, 0)
        os._exit(os.waitstatus_to_exitcode(status))
    except BaseException as exc:  # noqa: BLE001 - report anything, never return into the parent's code
        os.write(out_fd, f"warm start failed: {exc!r}\n".encode())
        os._exit(70)


def warm(backend: BubblewrapBackend, scratch: Path, etc: Path) -> tuple[float, dict]:
    spec = _spec(scratch, WAITER)
    argv = backend.command(spec, etc)
    info_r, info_w = os.pipe()
    argv[1:1] = ["--info-fd", str(info_w)]
    start = time.monotonic()
    sandbox = subprocess.Popen(argv, pass_fds=(info_w,), stdout=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    os.close(info_w)
    try:
        with os.fdopen(info_r) as info:
            init = json.loads(info.read().split("}")[0] + "}")["child-pid"]
        if sandbox.stdout.readline() != b"ready\n":
            raise SystemExit("the waiter did not start in the sandbox")
        out_r, out_w = os.pipe()
        sys.stdout.flush()
        child = os.fork()
        if child == 0:
            os.close(out_r)
            _run_inside(program_pid(init), out_w, spec.env)
        os.close(out_w)
        with os.fdopen(out_r, "rb") as out:
            output = out.read().decode()
        _, status = os.waitpid(child, 0)
        wall = time.monotonic() - start
    finally:
        sandbox.kill()
        sandbox.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"warm start failed: {output[-800:]}")
    return wall, json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one repeat")
    args = parser.parse_args()
    repeats = 1 if args.smoke else args.repeats
    assert torch.__version__  # imported once, before any repeat: the prewarmed interpreter
    backend = BubblewrapBackend()
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="prism-warm-") as tmp:
        etc = _etc(Path(tmp))
        for i in range(repeats):
            seen = {}
            for name in ("cold", "warm"):
                scratch = Path(tmp) / f"{name}-{i}"
                scratch.mkdir()
                wall, facts = (cold(backend, scratch) if name == "cold"
                               else warm(backend, scratch, etc))
                times[name].append(wall)
                seen[name] = facts
            # the warm sandbox holds one process more: its waiter, at pid 2
            same = {k: [seen[n][k] for n in seen] for k in seen["cold"] if k not in ("pid", "pids")}
            if any(a != b for a, b in same.values()) or len(seen["warm"]["pids"]) != 3:
                raise SystemExit(f"the two starts see different sandboxes: {seen}")
    facts = seen["warm"]
    caps = "none" if set(facts["caps"]) == {"0" * 16} else facts["caps"]
    clone = "VISIBLE" if facts["clone_visible"] else "hidden"
    usr = "WRITABLE" if facts["usr_writable"] else "read-only"
    if (facts["uid"], caps, facts["network"], clone, usr) != (65534, "none", "OSError", "hidden",
                                                            "read-only"):
        raise SystemExit(f"the sandbox leaks: {facts}")
    print(f"load average {os.getloadavg()[0]:.1f}; the sandboxed program saw: uid "
          f"{facts['uid']}, capabilities {caps}, network {facts['network']}, the clone "
          f"{clone}, /usr {usr}, pids {facts['pids']} (cold: {seen['cold']['pids']})")
    c, w = statistics.median(times["cold"]), statistics.median(times["warm"])
    print(f"median of {repeats}: cold start {c:.3f} s, warm start {w:.3f} s, warm/cold "
          f"{w / c:.3f}; same sandbox seen: yes")


if __name__ == "__main__":
    main()
