"""How training starts inside the train sandbox: every rank started directly by this launcher,
each with the environment torchrun gives its workers.

One rank (`launch --single WORKER...`): this process becomes the worker (`exec`, or in place
when it already holds torch) with the environment `torchrun --standalone --nproc_per_node=1`
gives its only worker (`rank_env`). Several ranks (`launch --ranks N WORKER...`): this process
imports torch once (the prewarmed interpreter already has), then forks one child per rank;
each child takes its rank's environment and runs the worker module in place, so no rank pays
`import torch` (seconds of CPU per rank, what torchrun's freshly exec'd workers paid, on top of
torchrun's own import). The launcher waits for every rank; the first rank that fails makes it
stop the others (SIGTERM, then SIGKILL after `STOP_GRACE_S`), name the rank and its exit
status on stderr and exit non-zero, as torchrun's agent does. A rank dies with the launcher
(parent-death signal).

The workers see torchrun's variables with torchrun's values; the one difference is that no
agent hosts a store (`TORCHELASTIC_USE_AGENT_STORE=False`), so a process group the miner's
code starts is hosted by rank 0 on `MASTER_PORT`, as `init_process_group` does without
torchrun. `tests/sandbox/test_rank_start.py` compares both starts with real torchrun.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import socket
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Mapping

from prism_challenge.sandbox.harness.quick_exit import exit_now

SINGLE = "--single"
RANKS = "--ranks"
STOP_GRACE_S = 5.0  # how long the other ranks get to end after one failed
_PR_SET_PDEATHSIG = 1
# torchrun's defaults for what it sets in its own environment and its workers' (torch 2.x:
# torch/distributed/run.py and elastic/agent/server/local_elastic_agent.py).
SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
MASTER_ADDR = "localhost"  # --standalone rendezvous on the loopback (the sandbox has no other)


def rank_env(environ: Mapping[str, str], *, rank: int, world: int, port: int, run_id: str,
             error_file: str) -> dict[str, str]:
    """The variables `torchrun --standalone --nproc_per_node=WORLD` adds to worker `rank`'s
    environment. `port`, `run_id` and `error_file` are drawn per start (torchrun draws them
    too: a free port, a uuid4, a fresh temp folder)."""
    return {
        "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0",
        "ROLE_RANK": str(rank), "ROLE_NAME": "default", "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world), "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": MASTER_ADDR, "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCHELASTIC_ERROR_FILE": error_file,
        "TORCHELASTIC_SIGNALS_TO_HANDLE": environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE",
                                                      SIGNALS),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                                       "1"),
    }


def single_rank_env(environ: Mapping[str, str], *, port: int, run_id: str,
                    error_file: str) -> dict[str, str]:
    """`rank_env` of the only worker of a one-rank run."""
    return rank_env(environ, rank=0, world=1, port=port, run_id=run_id, error_file=error_file)


def free_port() -> int:
    """A port free on the loopback now, picked as torchrun picks its master port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((MASTER_ADDR, 0))
        return s.getsockname()[1]


def _error_files(world: int) -> tuple[str, list[str]]:
    """A run id and each rank's error file, in torchrun's layout:
    <tmp>/torchelastic_*/<run_id>_*/attempt_0/<local_rank>/error.json"""
    run_id = str(uuid.uuid4())
    root = tempfile.mkdtemp(prefix=f"{run_id}_", dir=tempfile.mkdtemp(prefix="torchelastic_"))
    files = []
    for rank in range(world):
        rank_dir = os.path.join(root, "attempt_0", str(rank))
        os.makedirs(rank_dir)
        files.append(os.path.join(rank_dir, "error.json"))
    return run_id, files


def _run_in_place(worker: list[str]) -> int:
    """Run `python -m MODULE ARGS` in this process as `__main__`; its exit status."""
    sys.argv = [worker[2], *worker[3:]]
    try:
        runpy.run_module(worker[2], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _is_module(worker: list[str]) -> bool:
    return worker[0] == sys.executable and worker[1:2] == ["-m"] and len(worker) >= 3


def start_single(worker: list[str]) -> None:
    """Become the only worker, with torchrun's environment (never returns)."""
    if not worker:
        raise SystemExit("harness launch: --single needs the worker's command line")
    run_id, (error_file,) = _error_files(1)
    os.environ.update(single_rank_env(os.environ, port=free_port(), run_id=run_id,
                                      error_file=error_file))
    sys.stdout.flush()
    sys.stderr.flush()
    if "torch" in sys.modules and _is_module(worker):
        # the prewarmed interpreter (isolation/prewarm.py) already holds torch: exec would
        # throw that import away, so the worker runs in this process
        exit_now(_run_in_place(worker))
    os.execv(worker[0], worker)


def _start_rank(worker: list[str], env: dict[str, str]) -> int:
    """Fork the process of one rank and return its pid; the child runs `worker` with `env`
    added and ends with its exit status."""
    sys.stdout.flush()
    sys.stderr.flush()
    launcher = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != launcher:  # the launcher ended before the signal was armed
            exit_now(1)
        os.environ.update(env)
        if _is_module(worker):
            code = _run_in_place(worker)
        else:
            os.execv(worker[0], worker)
    except BaseException:
        traceback.print_exc()
    exit_now(code)


def _stop(ranks: dict[int, int]) -> None:
    """SIGTERM every rank still running, SIGKILL what is left after STOP_GRACE_S."""
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    end = time.monotonic() + STOP_GRACE_S
    while ranks and time.monotonic() < end:
        for pid in list(ranks):
            if os.waitpid(pid, os.WNOHANG)[0]:
                ranks.pop(pid)
        time.sleep(0.05)
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def start_ranks(world: int, worker: list[str]) -> None:
    """Fork `world` ranks of `worker`, each with torchrun's environment, and wait for them;
    exit 0 when every rank did, else stop the rest and exit 1 (never returns)."""
    if world < 1 or not worker:
        raise SystemExit("harness launch: --ranks needs a count of at least 1 and the "
                         "worker's command line")
    if "OMP_NUM_THREADS" not in os.environ:  # torchrun's default for several workers
        os.environ["OMP_NUM_THREADS"] = "1"
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    import torch  # noqa: F401 - imported once here, so no rank imports it again

    run_id, error_files = _error_files(world)
    port = free_port()
    ranks = {}
    for rank in range(world):
        env = rank_env(os.environ, rank=rank, world=world, port=port, run_id=run_id,
                       error_file=error_files[rank])
        ranks[_start_rank(worker, env)] = rank
    while ranks:
        pid, status = os.wait()
        rank = ranks.pop(pid, None)
        if rank is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            print(f"harness launch: rank {rank} (pid {pid}) exited with status {code}; "
                  f"stopping the other {len(ranks)} rank(s)", file=sys.stderr)
            _stop(ranks)
            exit_now(1)
    exit_now(0)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == [SINGLE]:
        start_single(args[1:])
    if args[:1] == [RANKS] and len(args) >= 2 and args[1].isdigit():
        start_ranks(int(args[1]), args[2:])
    raise SystemExit("harness launch: usage: launch --single WORKER... | "
                     "launch --ranks N WORKER...")


if __name__ == "__main__":
    main()
