"""The cluster's parts that need no Ray: capacity from Ray's node list, the node-side checks
(data version, bundle digest), the per-node view on /metrics and the dashboard, and that the
local executor never imports Ray."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from cluster_kit import tiny_bundle, tiny_settings
from prometheus_client import CollectorRegistry, generate_latest

from prism_challenge.bundle import wire
from prism_challenge.cluster.capacity import NodeUsage, plan_capacity, slot_resources
from prism_challenge.cluster.node_slot import (
    BundleMismatch,
    NodeSlot,
    SlotRefused,
    arrived,
    node_settings,
)
from prism_challenge.dashboard.cluster_panel import cluster_html
from prism_challenge.data.manifest import read_manifest
from prism_challenge.metrics.cluster import ClusterCollector
from prism_challenge.sandbox.early_stop import EarlyStopPlan, LeaderCurve


def _node(node_id: str, alive: bool = True, **resources) -> dict:
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "10.0.0.1",
            "Resources": resources}


def test_capacity_counts_cpu_slots_and_on_a_gpu_cluster_only_gpu_groups():
    cpu = [_node("a", CPU=4.0), _node("b", CPU=1.0), _node("dead", False, CPU=8.0)]
    plan = plan_capacity(cpu, cpus_per_slot=2, nproc=1)
    assert [(c.node_id, c.slots) for c in plan] == [("a", 2), ("b", 0)]
    assert slot_resources(cpu, cpus_per_slot=2, nproc=1) == {"num_cpus": 2, "num_gpus": 0}
    gpu = [_node("g8", CPU=64.0, GPU=8.0), _node("g3", CPU=2.0, GPU=3.0), _node("c", CPU=32.0)]
    plan = plan_capacity(gpu, cpus_per_slot=1, nproc=2)
    assert [(c.node_id, c.slots) for c in plan] == [("g8", 4), ("g3", 1), ("c", 0)]
    assert slot_resources(gpu, cpus_per_slot=1, nproc=2) == {"num_cpus": 1, "num_gpus": 2}


def test_a_node_uses_its_own_data_root_and_work_dir(tmp_path, prepared_data):
    head = tiny_settings(tmp_path, prepared_data)
    mine = node_settings(head, {"PRISM_DATA__ROOT": "/srv/prism/data",
                                "PRISM_VALIDATOR__WORK_DIR": "/scratch/runs"})
    assert (mine.data.root, mine.validator.work_dir) == (Path("/srv/prism/data"),
                                                         Path("/scratch/runs"))
    assert mine.challenge == head.challenge and mine.sandbox == head.sandbox
    assert node_settings(head, {}).data.root == Path(prepared_data)


def test_a_bundle_is_taken_only_under_the_digest_the_head_sent():
    a, b = tiny_bundle("1e-2"), tiny_bundle("3e-3")
    assert arrived(a.to_wire(), a.digest) == a
    with pytest.raises(BundleMismatch, match=f"not the {b.digest[:16]}"):
        arrived(a.to_wire(), b.digest)
    files = dict(a.files)
    files["training.py"] += b"# changed in transit\n"
    with pytest.raises(BundleMismatch):
        arrived(wire.encode(files), a.digest)


def test_a_slot_on_another_data_version_refuses_every_job(tmp_path, prepared_data):
    version = read_manifest(prepared_data).sha256
    settings = tiny_settings(tmp_path, prepared_data)
    ready = NodeSlot(settings, version, node="10.0.0.1/aa", index=0, gpu_ids=[])
    assert ready.refused is None and ready.about()["refused"] is None
    other = "0" * 64
    slot = NodeSlot(settings, other, node="10.0.0.2/bb", index=1, gpu_ids=[])
    assert slot.runner is None
    assert slot.refused.startswith("node 10.0.0.2/bb: its data at")
    assert f"is version {version[:16]}…, the head's is {other[:16]}…" in slot.refused
    bundle = tiny_bundle()
    with pytest.raises(SlotRefused, match="the head's is 0000"):
        slot.run(bundle.to_wire(), bundle.digest)
    assert not (tmp_path / "runs").exists()  # nothing was started
    missing = NodeSlot(settings.model_copy(update={"data": settings.data.model_copy(
        update={"root": tmp_path / "nowhere"})}), version, node="n", index=2, gpu_ids=[])
    assert "no MANIFEST" in missing.refused


def test_a_node_refuses_an_early_stop_plan_made_for_another_budget(tmp_path, prepared_data):
    """The head makes the plan from its MANIFEST and the leader's record; the node checks it
    against its own budget before anything runs (a wrong plan would stop honest runs)."""
    settings = tiny_settings(tmp_path, prepared_data)
    slot = NodeSlot(settings, read_manifest(prepared_data).sha256, node="n", index=0,
                    gpu_ids=[])
    budget = slot.runner.budget
    curve = LeaderCurve(np.array([0, budget.rows]), np.array([0.0, 8.0 * budget.bytes]))
    fits = EarlyStopPlan(target_bpb=7.0, leader=curve, leader_id=1, checkpoints=(20,),
                         max_gain=0.5, budget_bytes=budget.bytes)
    assert fits.fits(budget.rows, budget.bytes)
    bundle = tiny_bundle()
    for wrong in (replace(fits, budget_bytes=budget.bytes + 1),
                  replace(fits, checkpoints=(budget.rows,)),
                  replace(fits, leader=LeaderCurve(np.array([0, budget.rows * 2]),
                                                   np.array([0.0, 1.0])))):
        assert not wrong.fits(budget.rows, budget.bytes)
        with pytest.raises(ValueError, match="does not fit this runner's budget"):
            slot.run(bundle.to_wire(), bundle.digest, early_stop=wrong)
    assert not (tmp_path / "runs").exists()  # refused before anything was started


def test_per_node_slots_on_metrics_and_the_dashboard():
    nodes = [NodeUsage("a" * 56, "10.0.0.1", slots=4, ready=4, busy=3),
             NodeUsage("b" * 56, "10.0.0.2", slots=2, ready=0, busy=0,
                       refused=("node 10.0.0.2/bbbbbbbb: its data <x> is version 1…",))]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(lambda: nodes))
    text = generate_latest(registry).decode()
    for line in ('prism_cluster_node_slots{node="10.0.0.1/aaaaaaaa"} 4.0',
                 'prism_cluster_node_busy_slots{node="10.0.0.1/aaaaaaaa"} 3.0',
                 'prism_cluster_node_ready_slots{node="10.0.0.2/bbbbbbbb"} 0.0',
                 'prism_cluster_node_refused_slots{node="10.0.0.2/bbbbbbbb"} 1.0'):
        assert line in text
    html = cluster_html(nodes)
    assert "2 nodes, 4 slots taking runs, 3 busy." in html
    assert "<td>3/4</td>" in html and "its data &lt;x&gt; is version" in html


def test_the_local_executor_never_imports_ray():
    code = ("import sys\n"
            "import prism_challenge.validator.node, prism_challenge.cluster.node_slot\n"
            "print('ray' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
