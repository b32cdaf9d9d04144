"""Slots own disjoint devices and cores: planning, discovery, and what each sandbox sees."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time

import pytest
from gpu_kit import TOTAL_MIB, seeing_bundle, seen, uuid

from prism_challenge.config import Settings
from prism_challenge.hardware.devices import (
    DeviceError,
    GpuInfo,
    discover_gpus,
    parse_query,
)
from prism_challenge.hardware.slots import Slot, SlotBusy, SlotPlanError, plan_slots
from prism_challenge.isolation import (
    Limits,
    Mount,
    SandboxSpec,
    make_backend,
    minimal_env,
)
from prism_challenge.isolation import cgroup as cgroup_module
from prism_challenge.isolation.bubblewrap import BubblewrapBackend, DeviceNodeMissing
from prism_challenge.isolation.docker import container_kwargs
from prism_challenge.sandbox.runner import Runner, RunPaths


def _settings(nproc: int = 1, slots: int | None = None, **sandbox) -> Settings:
    return Settings(
        challenge={"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 60.0},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
        sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "pids_max": 128,
                 "disk_bytes": 64 * 2**20, "output_bytes": 16384, "save_grace_s": 5.0,
                 "nproc_per_node": nproc, **sandbox},
        validator={"slots": slots},
    )


GPUS4 = [GpuInfo(index=i, uuid=uuid(i), minor=i) for i in range(4)]


# ---- planning ---------------------------------------------------------------------------
def test_four_gpus_in_pairs_make_two_disjoint_slots_with_their_own_cores():
    slots = plan_slots(_settings(nproc=2), GPUS4, tuple(range(8)))
    assert [[g.index for g in s.gpus] for s in slots] == [[0, 1], [2, 3]]
    assert [s.cpus for s in slots] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [d.id for d in slots[1].devices] == [uuid(2), uuid(3)]
    assert slots[0].describe() == f"slot 0 (GPUs {uuid(0)},{uuid(1)}; CPU cores 0-3)"


def test_slot_count_defaults_to_the_gpu_groups_and_a_cpu_host_keeps_its_setting():
    assert len(plan_slots(_settings(nproc=1), GPUS4, tuple(range(8)))) == 4
    assert len(plan_slots(_settings(nproc=3), GPUS4, tuple(range(8)))) == 1  # GPU 3 idle
    assert len(plan_slots(_settings(nproc=1, slots=2), GPUS4, tuple(range(8)))) == 2
    cpu = plan_slots(_settings(), [], (0, 1))
    assert [(s.gpus, s.cpus) for s in cpu] == [((), (0, 1))]
    assert [s.cpus for s in plan_slots(_settings(slots=2), [], (0, 1))] == [(0,), (1,)]


@pytest.mark.parametrize("nproc, slots, gpus, cpus, message", [
    (2, 3, GPUS4, tuple(range(8)), "validator.slots=3 needs 6 GPUs"),
    (8, None, GPUS4, tuple(range(8)), "cannot fill one slot of sandbox.nproc_per_node=8"),
    (1, 3, [], (0, 1), "3 slots need at least 3 CPU cores"),
])
def test_impossible_plans_are_refused_with_the_reason(nproc, slots, gpus, cpus, message):
    with pytest.raises(SlotPlanError, match=message):
        plan_slots(_settings(nproc=nproc, slots=slots), gpus, cpus)


def test_a_slot_has_one_holder_at_a_time():
    slot = Slot(0, (), (0,))
    with slot.lease():
        with slot.lease():  # the holder itself may re-enter (a probe inside its run)
            pass
        errors = []
        t = threading.Thread(target=lambda: errors.append(_try_lease(slot)))
        t.start()
        t.join()
        assert errors == ["busy"]
    assert _try_lease(slot) == "held"


def _try_lease(slot: Slot) -> str:
    try:
        with slot.lease():
            return "held"
    except SlotBusy:
        return "busy"


# ---- discovery --------------------------------------------------------------------------
def test_nvidia_smi_lines_parse_with_bad_states_as_problems(tmp_path):
    proc = tmp_path / "proc"
    (proc / "0000:3b:00.0").mkdir(parents=True)
    (proc / "0000:3b:00.0" / "information").write_text(
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 171\nDevice Minor: \t 5\n")
    text = ("0, GPU-aaaa, 00000000:18:00.0, 81559, 0\n"
            "1, GPU-bbbb, 00000000:3B:00.0, 81559, 40000\n"
            "2, GPU-cccc, 00000000:5C:00.0, [GPU requires reset], [GPU requires reset]\n"
            "3, [Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error]\n"
            "garbage line\n")
    gpus = parse_query(text, proc)
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert gpus[0].device.id == "GPU-aaaa" and gpus[0].device.minor == 0
    assert gpus[1].minor == 5 and gpus[1].device.minor == 5  # from the driver's /proc entry
    assert abs(gpus[1].free_fraction - (1 - 40000 / 81559)) < 1e-9
    assert gpus[2].problem == "[GPU requires reset], [GPU requires reset]"
    assert gpus[3].uuid == "" and gpus[3].device.id == "3" and "[Unknown Error]" in gpus[3].problem


def test_discovery_lists_nvidia_smi_gpus_and_resolves_configured_names(gpu_host):
    assert [g.uuid for g in discover_gpus([])] == [uuid(i) for i in range(4)]
    assert [g.index for g in discover_gpus([uuid(2), "0"])] == [2, 0]
    assert discover_gpus([])[1].memory_total_mib == TOTAL_MIB
    with pytest.raises(DeviceError, match=r"names \['7'\]"):
        discover_gpus(["7"])
    with pytest.raises(DeviceError, match="names a GPU twice"):
        discover_gpus(["1", uuid(1)])
    gpu_host.exit_code.write_text("9")
    gpu_host.state.write_text("")
    with pytest.raises(DeviceError, match="nvidia-smi exited 9"):
        discover_gpus([])


def test_without_nvidia_smi_configured_indices_are_used_and_uuids_refused(no_nvidia_smi):
    assert discover_gpus([]) == []  # this torch has no CUDA: a CPU host
    assert [(g.index, g.device.id, g.device.minor) for g in discover_gpus(["1", "3"])] == [
        (1, "1", 1), (3, "3", 3)]
    with pytest.raises(DeviceError, match="name them by index"):
        discover_gpus([uuid(0)])


# ---- what the sandboxes see -------------------------------------------------------------
def test_two_slots_of_two_gpus_each_see_only_their_pair_concurrently(gpu_host, prepared_data,
                                                                      tmp_path):
    """Two 2-rank runs at once: each rank and the eval sandbox see exactly their
    slot's CUDA_VISIBLE_DEVICES, /dev/nvidia* nodes and CPU cores; the records say so."""
    settings = _settings(nproc=2)
    slots = plan_slots(settings, discover_gpus([]), (0, 1))
    runner = Runner.from_data(settings, make_backend("bubblewrap", dev_dir=gpu_host.dev),
                              prepared_data)
    files = seeing_bundle()
    records, spans = {}, {}

    def run(slot):
        start = time.monotonic()
        digest = hashlib.sha256(f"slot{slot.index}".encode()).hexdigest()
        records[slot.index] = runner.on_slot(slot).run(files, digest,
                                                       tmp_path / f"run{slot.index}")
        spans[slot.index] = (start, time.monotonic())

    threads = [threading.Thread(target=run, args=(s,)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(s[0] for s in spans.values()) < min(s[1] for s in spans.values())  # overlapped
    for slot in slots:
        pair = [uuid(g.index) for g in slot.gpus]
        record = records[slot.index]
        assert record.exit_reason == "ok", record.exit_detail
        assert record.placement.model_dump() == {
            "slot": slot.index, "node": None, "gpus": pair, "cpus": [slot.index],
            "launcher": "prism_challenge.sandbox.harness.launch --ranks 2"}
        train = seen(tmp_path / f"run{slot.index}" / "scratch")
        evals = seen(tmp_path / f"run{slot.index}" / "eval_scratch")
        assert sorted(s["rank"] for s in train) == ["0", "1"] and len(evals) == 1
        for view in train + evals:
            assert view["cuda_visible_devices"] == ",".join(pair)
            assert view["cpus"] == [slot.index]
            assert set(view["nodes"]) == {f"nvidia{g.index}" for g in slot.gpus} | {
                "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}
        assert all(v["torchelastic"] and v["world_size"] == "2" for v in train)


def test_the_docker_spec_of_a_slot_requests_exactly_its_gpus_and_cores(prepared_data, tmp_path):
    settings = _settings(nproc=2)
    slots = plan_slots(settings, GPUS4, tuple(range(8)))
    runner = Runner.from_data(settings, make_backend("bubblewrap"), prepared_data)
    paths = RunPaths(tmp_path / "run")
    paths.create(seeing_bundle())
    for slot in slots:
        placed = runner.on_slot(slot)
        for spec in (placed._train_spec(paths, "p", 60.0), placed._eval_spec(paths, "p")):
            kw = container_kwargs(spec, "img")
            (request,) = kw["device_requests"]
            assert request["DeviceIDs"] == [uuid(g.index) for g in slot.gpus]
            assert kw["cpuset_cpus"] == ",".join(str(c) for c in slot.cpus)
            assert "CUDA_VISIBLE_DEVICES" not in kw["environment"]  # the runtime maps them


def test_a_missing_device_node_is_refused_before_the_sandbox_starts(gpu_host, tmp_path):
    (gpu_host.dev / "nvidia3").unlink()
    slot = plan_slots(_settings(nproc=2), GPUS4, (0, 1))[1]
    with pytest.raises(DeviceNodeMissing, match="nvidia3 is missing"):
        BubblewrapBackend(dev_dir=gpu_host.dev).run(_probe_spec(tmp_path, slot, "true"))


# ---- CPU slots --------------------------------------------------------------------------
AFFINITY = ("import os; a = sorted(os.sched_getaffinity(0)); "
            "os.sched_setaffinity(0, range(os.cpu_count()))\n"
            "print(a, sorted(os.sched_getaffinity(0)))")


def _probe_spec(tmp_path, slot: Slot, code: str) -> SandboxSpec:
    scratch = tmp_path / f"scratch{slot.index}"
    scratch.mkdir(exist_ok=True)
    return SandboxSpec(
        argv=(sys.executable, "-c", code), mounts=(Mount(scratch, "/scratch", writable=True),),
        env=minimal_env(),
        limits=Limits(wall_s=60, memory_bytes=2**30, pids_max=32, disk_bytes=2**24,
                      output_bytes=4096),
        scratch=scratch, gpus=slot.devices, cpus=slot.cpus, name=f"prism-cpuset-{slot.index}")


def _read_back(tmp_path, slots):
    out = {}

    def run(slot):
        result = BubblewrapBackend().run(_probe_spec(tmp_path, slot, AFFINITY))
        out[slot.index] = result.output.strip() if result.cause == "ok" else result

    threads = [threading.Thread(target=run, args=(s,)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_cpu_slots_run_on_disjoint_cores_held_by_the_kernel(tmp_path):
    """Read back from inside: each sandbox runs on its slot's core only, and widening its own
    affinity to every core does not escape the cgroup cpuset."""
    if not os.access(cgroup_module.ROOT / "cpuset", os.W_OK) and not (
            cgroup_module.ROOT / "cgroup.controllers").exists():
        pytest.skip("no writable cpuset controller on this host")
    slots = plan_slots(_settings(slots=2), [], (0, 1))
    out = _read_back(tmp_path, slots)
    assert out == {0: "[0] [0]", 1: "[1] [1]"}


def test_without_cgroups_the_launcher_affinity_still_places_each_slot(tmp_path, monkeypatch):
    """No writable cgroup hierarchy: the cores are the launcher's affinity, which every
    process inherits (a process may widen its own affinity: this is placement, not a wall)."""
    monkeypatch.setattr(cgroup_module, "ROOT", tmp_path / "no-cgroups")
    slots = plan_slots(_settings(slots=2), [], (0, 1))
    out = _read_back(tmp_path, slots)
    assert out == {0: "[0] [0, 1]", 1: "[1] [0, 1]"}


WHO = ("import getpass, grp, os, pwd; u = pwd.getpwuid(os.getuid()); "
       "print(getpass.getuser(), u.pw_name, u.pw_dir, grp.getgrgid(os.getgid()).gr_name, "
       "os.environ['LOGNAME'], os.environ['HOME'], os.environ['XDG_CACHE_HOME'])")


def test_the_sandbox_user_has_a_name_a_home_and_a_group(tmp_path):
    """Code that asks who runs it (torch.compile's inductor calls getpass.getuser()) finds a
    normal user, never a missing passwd entry that would crash a miner's run."""
    slot = Slot(index=0, gpus=(), cpus=())
    result = BubblewrapBackend().run(_probe_spec(tmp_path, slot, WHO))
    assert result.cause == "ok", result.output
    assert result.output.split() == ["prism", "prism", "/scratch", "prism", "prism", "/scratch",
                                     "/scratch/cache"]


def test_no_gpus_configured_means_every_gpu_of_the_host_outside_a_slot(gpu_host, prepared_data):
    """`sandbox.gpus: []` is every GPU, in `prism eval` and `prism check` (a runner without a
    slot) as on the validator; it used to mean none, and trained on the CPU of a GPU host."""
    runner = Runner.from_data(_settings(), make_backend("bubblewrap", dev_dir=gpu_host.dev),
                              prepared_data)
    assert [d.id for d in runner.devices()] == [uuid(i) for i in range(4)]
    assert runner.placement().gpus == [uuid(i) for i in range(4)]
    assert runner._feeder_plan(b"s").gpus == 0  # the fake host's GPUs cannot run CUDA
    named = Runner.from_data(_settings(gpus=["2"]), make_backend("bubblewrap"), prepared_data)
    assert [d.id for d in named.devices()] == [uuid(2)]


def test_assigned_gpus_that_cuda_cannot_use_are_infra_before_any_token(gpu_host, prepared_data,
                                                                      tmp_path, monkeypatch):
    """GPUs were given to the sandbox but CUDA inside sees none (here: stand-in nodes; on a
    host: a lost driver): the run is the host's fault, found at the harness's first hello,
    before any of the miner's code or any token, never a silent CPU run charged to the miner."""
    monkeypatch.setattr(Runner, "cuda_required", True)
    runner = Runner.from_data(_settings(), make_backend("bubblewrap", dev_dir=gpu_host.dev),
                              prepared_data)
    record = runner.run(seeing_bundle(), "ab" * 32, tmp_path / "run")
    assert record.exit_reason == "infra", record.exit_detail
    assert "4 GPU(s) but CUDA is not usable inside it (rank 0 sees no device)" in \
        record.exit_detail
    assert record.consumed.scored_tokens == 0
    assert seen(tmp_path / "run" / "scratch") == []  # the miner's architecture never loaded
