"""How training starts inside the train sandbox: torchrun for several ranks, a direct start
for one.

Several ranks (`launch --standalone --nproc_per_node=N --no-python WORKER...`): torch's own
launcher (`torch.distributed.run`) with the arguments it was given, ended without the
interpreter's teardown once every worker has exited. A failed worker makes torchrun raise:
that path is left to torchrun, which prints its own report and exits non-zero.

One rank (`launch --single WORKER...`): this process becomes the worker (`exec`) with the
environment torchrun gives its only worker (`single_rank_env`). torchrun would import torch
(seconds) and run a loopback rendezvous only to start that one process; here the launcher
imports nothing of torch and the worker is the sandbox's only interpreter. The worker sees
the same variables with the same values; the one difference is that no agent hosts a store
(`TORCHELASTIC_USE_AGENT_STORE=False`), so a process group the miner's code starts (world
size 1) hosts its own on `MASTER_PORT`, as `init_process_group` does without torchrun.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Mapping

from prism_challenge.sandbox.harness.quick_exit import exit_now

SINGLE = "--single"
# torchrun's defaults for what it sets in its own environment and its workers' (torch 2.x:
# torch/distributed/run.py and elastic/agent/server/local_elastic_agent.py).
SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
MASTER_ADDR = "localhost"  # --standalone rendezvous on the loopback (the sandbox has no other)


def single_rank_env(environ: Mapping[str, str], *, port: int, run_id: str,
                    error_file: str) -> dict[str, str]:
    """The variables `torchrun --standalone --nproc_per_node=1` adds to its worker's
    environment, for a worker started without it. `port`, `run_id` and `error_file` are drawn
    per start (torchrun draws them too: a free port, a uuid4, a fresh temp folder)."""
    return {
        "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "ROLE_RANK": "0",
        "ROLE_NAME": "default", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
        "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "1",
        "MASTER_ADDR": MASTER_ADDR, "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCHELASTIC_ERROR_FILE": error_file,
        "TORCHELASTIC_SIGNALS_TO_HANDLE": environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE",
                                                      SIGNALS),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                                       "1"),
    }


def free_port() -> int:
    """A port free on the loopback now, picked as torchrun picks its master port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((MASTER_ADDR, 0))
        return s.getsockname()[1]


def start_single(worker: list[str]) -> None:
    """Become the only worker, with torchrun's environment (never returns)."""
    if not worker:
        raise SystemExit("harness launch: --single needs the worker's command line")
    run_id = str(uuid.uuid4())
    # torchrun's layout: <tmp>/torchelastic_*/<run_id>_*/attempt_0/<local_rank>/error.json
    root = tempfile.mkdtemp(prefix=f"{run_id}_", dir=tempfile.mkdtemp(prefix="torchelastic_"))
    rank_dir = os.path.join(root, "attempt_0", "0")
    os.makedirs(rank_dir)
    os.environ.update(single_rank_env(os.environ, port=free_port(), run_id=run_id,
                                      error_file=os.path.join(rank_dir, "error.json")))
    sys.stdout.flush()
    sys.stderr.flush()
    if "torch" in sys.modules and worker[0] == sys.executable and worker[1:2] == ["-m"]:
        # the prewarmed interpreter (isolation/prewarm.py) already holds torch: exec would
        # throw that import away, so the worker runs in this process
        import runpy

        sys.argv = [worker[2], *worker[3:]]
        runpy.run_module(worker[2], run_name="__main__", alter_sys=True)
        exit_now(0)
    os.execv(worker[0], worker)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == [SINGLE]:
        start_single(args[1:])
    from torch.distributed.run import main as torchrun

    torchrun()
    exit_now(0)


if __name__ == "__main__":
    main()
