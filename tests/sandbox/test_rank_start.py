"""Training's ranks start without torchrun, and no worker can tell.

In a real bubblewrap sandbox, workers started by real torchrun (`--standalone
--nproc_per_node=N`) and by the harness's launcher (`launch --single` for one rank, `launch
--ranks N` for several) write out their environment: the same variables, with the same
values except those torchrun draws per start (port, run id, error file) and the agent store
no agent hosts here. The launcher's workers can still open a gloo process group, as a
miner's code might; several ranks are forks of the launcher that start with torch already
imported; a rank that fails stops the others and fails the start.
"""

from __future__ import annotations

import json
import sys

import pytest

from prism_challenge.isolation.bubblewrap import HARNESS_ROOT, BubblewrapBackend
from prism_challenge.isolation.spec import Limits, Mount, SandboxResult, SandboxSpec, minimal_env
from prism_challenge.sandbox.harness.launch import SIGNALS, single_rank_env
from prism_challenge.sandbox.runner import LAUNCH, WORKER, launch_argv, train_argv

DUMP = """
import json, os, sys
seen = {"env": dict(os.environ), "pid": os.getpid(), "ppid": os.getppid(),
        "argv": sys.argv[1:], "torch_loaded": "torch" in sys.modules}
if "--group" in sys.argv:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    seen["group"] = [dist.get_rank(), dist.get_world_size()]
    dist.destroy_process_group()
with open(f"{sys.argv[1]}.{os.environ['RANK']}", "w") as fh:
    json.dump(seen, fh)
"""
FAIL = """
import os, sys, time
if os.environ["RANK"] == "1":
    sys.exit(3)
time.sleep(120)
"""
# drawn by torchrun per start; the agent store exists only under torchrun
DRAWN = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"}
PY = sys.executable


def _sandbox(tmp_path, name: str, argv: tuple[str, ...]) -> tuple[SandboxResult, object]:
    probe, scratch = tmp_path / "probe", tmp_path / name
    probe.mkdir(exist_ok=True)
    (probe / "dump.py").write_text(DUMP)
    (probe / "fail.py").write_text(FAIL)
    scratch.mkdir()
    spec = SandboxSpec(
        argv=argv, mounts=(Mount(probe, "/probe"), Mount(scratch, "/scratch", writable=True)),
        env=minimal_env({"OMP_NUM_THREADS": "1", "PYTHONPATH": f"{HARNESS_ROOT}:/probe"}),
        scratch=scratch,
        limits=Limits(wall_s=240, memory_bytes=2**32, pids_max=64, disk_bytes=2**24,
                      output_bytes=65536))
    return BubblewrapBackend().run(spec), scratch


def _seen(tmp_path, name: str, argv: tuple[str, ...], ranks: int) -> list[dict]:
    result, scratch = _sandbox(tmp_path, name, argv)
    assert result.cause == "ok" and result.exit_code == 0, result.output
    return [json.loads((scratch / f"seen.json.{r}").read_text()) for r in range(ranks)]


def _torchrun(ranks: int, *worker: str) -> tuple[str, ...]:
    return (PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
            "--no-python", *worker)


@pytest.fixture(scope="module")
def one(tmp_path_factory) -> tuple[dict, dict]:
    tmp = tmp_path_factory.mktemp("one")
    worker = (PY, "/probe/dump.py", "/scratch/seen.json")
    (torchrun,) = _seen(tmp, "torchrun", _torchrun(1, *worker), 1)
    (single,) = _seen(tmp, "single", launch_argv(1, (*worker, "--group")), 1)
    return torchrun, single


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[list[dict], list[dict]]:
    tmp = tmp_path_factory.mktemp("two")
    torchrun = _seen(tmp, "torchrun", _torchrun(2, PY, "/probe/dump.py", "/scratch/seen.json"),
                     2)
    ours = _seen(tmp, "ours", launch_argv(2, (PY, "-m", "dump", "/scratch/seen.json",
                                              "--group")), 2)
    return torchrun, ours


def _same_contract(torchrun: dict, ours: dict, rank: int, world: int) -> None:
    assert set(ours["env"]) == set(torchrun["env"])
    same = {k: v for k, v in torchrun["env"].items() if k not in DRAWN}
    assert same.pop("TORCHELASTIC_USE_AGENT_STORE") == "True"
    assert ours["env"]["TORCHELASTIC_USE_AGENT_STORE"] == "False"
    assert {k: ours["env"][k] for k in same} == same
    assert same["RANK"] == same["LOCAL_RANK"] == str(rank)
    assert same["WORLD_SIZE"] == same["LOCAL_WORLD_SIZE"] == str(world)
    assert same["TORCHELASTIC_SIGNALS_TO_HANDLE"] == SIGNALS
    for env in (torchrun["env"], ours["env"]):
        assert 0 < int(env["MASTER_PORT"]) < 65536
        assert env["TORCHELASTIC_ERROR_FILE"].startswith("/scratch/tmp/torchelastic_")
        assert env["TORCHELASTIC_ERROR_FILE"].endswith(f"/attempt_0/{rank}/error.json")
    assert ours["env"]["TORCHELASTIC_RUN_ID"] != torchrun["env"]["TORCHELASTIC_RUN_ID"]


def test_the_direct_worker_sees_what_torchrun_gives_its_only_worker(one):
    _same_contract(*one, rank=0, world=1)


def test_the_direct_worker_is_the_sandbox_process_and_can_open_a_process_group(one):
    torchrun, single = one
    assert single["group"] == [0, 1]
    assert single["argv"] == ["/scratch/seen.json", "--group"]
    # bwrap is pid 1 and the waiter the prewarmed interpreter enters beside pid 2
    # (isolation/prewarm.py); the launcher became the worker (pid 3); torchrun's worker is
    # its child
    assert single["pid"] == 3 and torchrun["pid"] > 3


def test_each_of_several_ranks_sees_what_torchrun_gives_that_worker(two):
    torchrun, ours = two
    for rank in (0, 1):
        _same_contract(torchrun[rank], ours[rank], rank=rank, world=2)
    assert len({r["env"]["MASTER_PORT"] for r in ours}) == 1  # one rendezvous
    assert len({r["env"]["TORCHELASTIC_RUN_ID"] for r in ours}) == 1


def test_several_ranks_are_forks_that_start_with_torch_and_open_one_group(two):
    torchrun, ours = two
    assert [r["group"] for r in ours] == [[0, 2], [1, 2]]
    assert [r["argv"] for r in ours] == [["/scratch/seen.json", "--group"]] * 2
    # both ranks are children of the launcher (pid 3), which imported torch before forking
    # them; torchrun's workers are fresh interpreters that have imported nothing yet
    assert {r["ppid"] for r in ours} == {3} and all(r["torch_loaded"] for r in ours)
    assert not any(r["torch_loaded"] for r in torchrun)


def test_a_rank_that_fails_stops_the_others_and_fails_the_start(tmp_path):
    result, _ = _sandbox(tmp_path, "fail", launch_argv(2, (PY, "-m", "fail")))
    assert result.cause == "crash" and result.exit_code == 1, result.output
    assert "rank 1 (pid" in result.output and "exited with status 3" in result.output
    assert result.wall_s < 60  # rank 0 would sleep 120 s: it was stopped


def test_the_env_function_keeps_what_the_sandbox_set_and_draws_the_rest():
    env = single_rank_env({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}, port=29500, run_id="r",
                          error_file="/e")
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    assert (env["MASTER_PORT"], env["TORCHELASTIC_RUN_ID"], env["TORCHELASTIC_ERROR_FILE"]) \
        == ("29500", "r", "/e")


def test_the_launcher_starts_one_rank_directly_and_forks_several():
    assert train_argv(1) == (PY, "-m", LAUNCH, "--single", PY, "-m", WORKER)
    assert train_argv(2) == (PY, "-m", LAUNCH, "--ranks", "2", PY, "-m", WORKER)
