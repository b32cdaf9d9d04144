"""A cluster node's replay is blamed on the host exactly like a local slot's: only from the
host's own evidence (the kernel's Xids for the slot's GPUs), never from what the sandbox
printed. Real node slot, runner and bubblewrap; the kernel log at its lowest seam."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from cluster_kit import tiny_bundle, tiny_settings
from fixture_bundles import bundle as fixture_bundle

from prism_challenge.bundle import Bundle
from prism_challenge.cluster.node_slot import NodeSlot
from prism_challenge.data.manifest import read_manifest
from prism_challenge.hardware import faults
from prism_challenge.hardware.devices import GpuInfo
from prism_challenge.hardware.health import Health
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.verification.replay import draw_plan

BUS = "00000000:18:00.0"


@pytest.fixture
def short_dir():
    """The node's work folder under a short path: a sandbox's feeder socket lives in it, and
    a Unix socket path must stay under 108 bytes wherever pytest puts its temporary folders."""
    path = Path(tempfile.mkdtemp(prefix="prism-node-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_fake_host_fault_in_a_cluster_replay_is_the_miners_a_logged_xid_the_hosts(
        tmp_path, short_dir, prepared_data, monkeypatch):
    settings = tiny_settings(short_dir, prepared_data)
    slot = NodeSlot(settings, read_manifest(prepared_data).sha256, node="n", index=0,
                    gpu_ids=[])
    honest = tiny_bundle()
    record = slot.run(honest.to_wire(), honest.digest)["record"]
    assert record["exit_reason"] == "ok", record["exit_detail"]
    plan = draw_plan(RunRecord.model_validate(record), snapshots=2)
    faker = Bundle(fixture_bundle("fakefault", AT="3"))  # prints an ECC error at step 3

    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    monkeypatch.setattr("prism_challenge.cluster.node_slot.kernel_xids",
                        lambda bus_ids, since: faults.kernel_xids(bus_ids, since, kmsg=kmsg))
    # the slot's GPU, as the node's evidence sees it (the sandbox itself runs on the CPU)
    slot.gpus = (GpuInfo(index=0, bus_id=BUS),)

    def xid(bus: str) -> str:  # stamped an hour ahead: inside the replay that follows
        usec = int((time.monotonic() + 3600) * 1e6)
        return f"3,{usec},{usec},-;NVRM: Xid (PCI:{bus}): 48, pid=1, An uncorrectable DBE\n"

    kmsg.write_text(xid("0000:19:00"))  # another GPU's Xid is not this slot's evidence
    probed = []  # nvidia-smi and the GPU's device nodes cannot exist here: the probe passes
    slot.health = SimpleNamespace(check=lambda s: probed.append(s.gpus) or Health(True, (), 0.1))
    out = slot.replay(faker.to_wire(), faker.digest, record, plan.model_dump())
    assert out["exit_reason"] == "crash" and "ECC" in out["exit_detail"]
    assert out["snapshot_steps"] == plan.snapshot_steps  # the head's plan, not a new draw
    assert slot.refused is None and probed == [slot.gpus]  # no Xid: the probe was asked

    kmsg.write_text(xid("0000:18:00"))  # the host logs a fault for the slot's GPU
    out = slot.replay(faker.to_wire(), faker.digest, record, plan.model_dump())
    assert out["exit_reason"] == "infra"
    assert out["exit_detail"].startswith("host fault: NVRM: Xid (PCI:0000:18:00): 48")
    assert "the run ended with crash" in out["exit_detail"]
    assert slot.runner is None and slot.refused.startswith("node n: the kernel logged NVRM")
