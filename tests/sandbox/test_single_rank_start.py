"""A one-rank training run starts without torchrun, and its worker cannot tell.

In a real bubblewrap sandbox, a worker started by torchrun (`--standalone
--nproc_per_node=1`) and one started by `launch --single` write out their environment: the
same variables, with the same values except those torchrun draws per start (port, run id,
error file) and the agent store no agent hosts here. The directly started worker can still
open a one-rank gloo process group, as a miner's code might.
"""

from __future__ import annotations

import json
import sys

import pytest

from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env
from prism_challenge.sandbox.harness.launch import SIGNALS, single_rank_env
from prism_challenge.sandbox.runner import LAUNCH, WORKER, launch_argv, train_argv

DUMP = """
import json, os, sys
seen = {"env": dict(os.environ), "pid": os.getpid(), "argv": sys.argv[1:]}
if "--group" in sys.argv:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    seen["group"] = [dist.get_rank(), dist.get_world_size()]
    dist.destroy_process_group()
with open(sys.argv[1], "w") as fh:
    json.dump(seen, fh)
"""
# drawn by torchrun per start; the agent store exists only under torchrun
DRAWN = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"}


def _inside(tmp_path, name: str, argv: tuple[str, ...]) -> dict:
    probe, scratch = tmp_path / "probe", tmp_path / name
    probe.mkdir(exist_ok=True)
    (probe / "dump.py").write_text(DUMP)
    scratch.mkdir()
    spec = SandboxSpec(
        argv=argv, mounts=(Mount(probe, "/probe"), Mount(scratch, "/scratch", writable=True)),
        env=minimal_env({"OMP_NUM_THREADS": "1"}), scratch=scratch,
        limits=Limits(wall_s=240, memory_bytes=2**31, pids_max=64, disk_bytes=2**24,
                      output_bytes=65536))
    result = BubblewrapBackend().run(spec)
    assert result.cause == "ok", result.output
    return json.loads((scratch / "seen.json").read_text())


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[dict, dict]:
    tmp = tmp_path_factory.mktemp("start")
    worker = (sys.executable, "/probe/dump.py", "/scratch/seen.json")
    torchrun = (sys.executable, "-m", LAUNCH, "--standalone", "--nproc_per_node=1",
                "--no-python", *worker)
    return (_inside(tmp, "torchrun", torchrun),
            _inside(tmp, "single", launch_argv(1, (*worker, "--group"))))


def test_the_direct_worker_sees_what_torchrun_gives_its_only_worker(both):
    torchrun, single = both
    assert set(single["env"]) == set(torchrun["env"])
    same = {k: v for k, v in torchrun["env"].items() if k not in DRAWN}
    assert same.pop("TORCHELASTIC_USE_AGENT_STORE") == "True"
    assert single["env"]["TORCHELASTIC_USE_AGENT_STORE"] == "False"
    assert {k: single["env"][k] for k in same} == same
    assert same["RANK"] == same["LOCAL_RANK"] == "0" and same["WORLD_SIZE"] == "1"
    assert same["TORCHELASTIC_SIGNALS_TO_HANDLE"] == SIGNALS
    for env in (torchrun["env"], single["env"]):
        assert 0 < int(env["MASTER_PORT"]) < 65536
        assert env["TORCHELASTIC_ERROR_FILE"].startswith("/scratch/tmp/torchelastic_")
        assert env["TORCHELASTIC_ERROR_FILE"].endswith("/attempt_0/0/error.json")
    assert single["env"]["TORCHELASTIC_RUN_ID"] != torchrun["env"]["TORCHELASTIC_RUN_ID"]


def test_the_direct_worker_is_the_sandbox_process_and_can_open_a_process_group(both):
    torchrun, single = both
    assert single["group"] == [0, 1]
    assert single["argv"] == ["/scratch/seen.json", "--group"]
    # bwrap is pid 1 and the waiter the prewarmed interpreter enters beside pid 2
    # (isolation/prewarm.py); the launcher became the worker (pid 3); torchrun's worker is
    # its child
    assert single["pid"] == 3 and torchrun["pid"] > 3


def test_the_env_function_keeps_what_the_sandbox_set_and_draws_the_rest():
    env = single_rank_env({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}, port=29500, run_id="r",
                          error_file="/e")
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    assert (env["MASTER_PORT"], env["TORCHELASTIC_RUN_ID"], env["TORCHELASTIC_ERROR_FILE"]) \
        == ("29500", "r", "/e")


def test_one_rank_starts_directly_and_several_under_torchrun():
    python = sys.executable
    assert train_argv(1) == (python, "-m", LAUNCH, "--single", python, "-m", WORKER)
    assert train_argv(2) == (python, "-m", LAUNCH, "--standalone", "--nproc_per_node=2",
                             "--no-python", python, "-m", WORKER)
