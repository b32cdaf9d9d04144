"""Health probes and host faults through the real worker, store, runner and bubblewrap, on a
fake 2-GPU host (fake nvidia-smi on PATH, stand-in device nodes; torch itself runs on CPU)."""

from __future__ import annotations

import logging
import threading
import time

import httpx
import pytest
from fixture_bundles import queue_bundle
from gpu_kit import TINY_BUNDLE, uuid

from prism_challenge.api import ApiDeps
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config import Settings
from prism_challenge.hardware.devices import discover_gpus
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import plan_slots
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.runner import Runner
from prism_challenge.storage.tables import RunRecord, Score, Submission
from prism_challenge.validator.app import create_app
from prism_challenge.validator.rotation import Rotation
from prism_challenge.validator.slot_metrics import SlotCollector
from prism_challenge.validator.worker import EvaluationWorker

# The honest tiny training loop, renamed so a test's train() can call it after its own check.
TINY_TRAIN = (TINY_BUNDLE / "training.py").read_text().replace("def train(ctx):",
                                                               "def _honest(ctx):")
ECC = ('RuntimeError("CUDA error: uncorrectable ECC error encountered\\nCUDA kernel errors '
       'might be asynchronously reported at some other API call, so the stacktrace below '
       'might be incorrect.")')


def _training(body: str) -> bytes:
    return (TINY_TRAIN + "\nimport os\n\ndef train(ctx):\n" + body).encode()


class Node:
    """Two GPU slots of one GPU each, one worker per slot, as `ValidatorNode` wires them."""

    def __init__(self, store, settings, dev_dir, data):
        self.store = store
        self.settings = settings
        backend = make_backend("bubblewrap", dev_dir=dev_dir)
        self.slots = plan_slots(settings, discover_gpus(settings.sandbox.gpus), (0, 1))
        self.rotation = Rotation(settings, self.slots,
                                 HealthCheck(settings, backend, settings.validator.work_dir))
        runner = Runner.from_data(settings, backend, data)
        self.workers = [EvaluationWorker(settings, store, runner, None, slot=s,
                                         rotation=self.rotation) for s in self.slots]

    def queue(self, training: bytes, tag: str) -> int:
        return queue_bundle(self.store, {
            "architecture.py": (TINY_BUNDLE / "architecture.py").read_bytes(),
            "training.py": training + f"# {tag}\n".encode()}, "hk-" + tag)

    def row(self, sid):
        with self.store.session() as s:
            row = s.get(Submission, sid)
            return row.status, row.attempts, row.reason or ""

    def records(self, sid) -> list[dict]:
        with self.store.session() as s:
            rows = s.query(RunRecord).filter_by(submission_id=sid).order_by(RunRecord.id)
            return [r.record for r in rows]

    def scores(self, sid) -> int:
        with self.store.session() as s:
            return s.query(Score).filter_by(submission_id=sid).count()

    def metrics(self, live_server) -> str:
        """`GET /metrics` of the node's app, over real HTTP."""
        deps = ApiDeps(self.settings, self.store, StaticMetagraph.of([], block=1),
                       slots=SlotCollector(self.rotation))
        return httpx.get(f"{live_server(create_app(deps))}/metrics", timeout=10).text


@pytest.fixture
def node(gpu_host, store, tmp_path, prepared_data):
    def make(**validator) -> Node:
        settings = Settings(
            challenge={"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 60},
            scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
            sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 5},
            validator={"work_dir": str(tmp_path / "runs"), "slots": 2, **validator},
        )
        return Node(store, settings, gpu_host.dev, prepared_data)

    return make


def test_a_bad_device_takes_its_slot_out_and_the_run_completes_on_another(node, gpu_host,
                                                                          caplog, live_server):
    n = node()
    gpu_host.set(0, total="[GPU requires reset]", used="[GPU requires reset]")
    sid = n.queue(_training("    _honest(ctx)\n"), "a")
    with caplog.at_level(logging.ERROR, logger="prism.validator"):
        assert n.workers[0].run_once() is None  # probe fails: nothing claimed
    assert n.row(sid)[:2] == ("queued", 0)
    assert f"slot 0 (GPUs {uuid(0)}; CPU cores 0) taken out of rotation: GPU {uuid(0)}: " \
           "[GPU requires reset]" in caplog.text
    assert n.workers[1].run_once() == sid
    assert n.row(sid)[0] == "scored"
    (record,) = n.records(sid)
    assert record["exit_reason"] == "ok"
    assert record["placement"] == {
        "slot": 1, "node": None, "gpus": [uuid(1)], "cpus": [1],
        "launcher": "prism_challenge.sandbox.harness.launch --single"}
    text = n.metrics(live_server)
    assert f'prism_slot_in_rotation{{cpus="0",gpus="{uuid(0)}",slot="0"}} 0.0' in text
    assert f'prism_slot_in_rotation{{cpus="1",gpus="{uuid(1)}",slot="1"}} 1.0' in text
    assert 'prism_slot_probe_failures_total{slot="0"} 1.0' in text
    assert n.workers[0].run_once() is None  # stays out until slot_reprobe_s has passed


def test_memory_in_use_on_a_gpu_fails_its_probe(node, gpu_host):
    n = node(probe_min_free_fraction=0.9)
    gpu_host.set(1, used="40000")
    health = n.rotation.health
    assert health.check(n.slots[0]).ok
    bad = health.check(n.slots[1])
    assert not bad.ok and bad.problems == (f"GPU {uuid(1)}: 40000 of 81559 MiB already in use",)


@pytest.fixture
def kernel_log(tmp_path, monkeypatch):
    """The kernel's log (/dev/kmsg) at the lowest seam: `xid(gpu, code)` logs a driver Xid for
    fake GPU `gpu`, stamped a minute ahead so that it falls inside the run that follows; the
    rotation reads it like the real one."""
    from prism_challenge.hardware import faults

    path = tmp_path / "kmsg"
    path.write_text("")
    monkeypatch.setattr("prism_challenge.validator.rotation.kernel_xids",
                        lambda bus_ids, since: faults.kernel_xids(bus_ids, since, kmsg=path))

    def xid(gpu: int, code: int = 48) -> None:
        usec = int((time.monotonic() + 60) * 1e6)
        with path.open("a") as fh:
            fh.write(f"3,{usec},{usec},-;NVRM: Xid (PCI:0000:{0x18 + gpu:02x}:00): {code}, "
                     "pid=1234, name=python, An uncorrectable double bit error\n")

    return xid


def test_a_host_fault_on_one_slot_is_requeued_elsewhere_and_never_charged(node, live_server,
                                                                          kernel_log):
    """The host says so (the kernel logged an ECC Xid for GPU 0 during the run): the crash is
    infra, requeued on the other slot. The text the run printed decides nothing."""
    n = node()
    sid = n.queue(_training(f"    if os.environ['CUDA_VISIBLE_DEVICES'] == '{uuid(0)}':\n"
                            f"        raise {ECC}\n    _honest(ctx)\n"), "b")
    kernel_log(0)
    assert n.workers[0].run_once() == sid
    status, attempts, reason = n.row(sid)
    assert (status, attempts) == ("queued", 1) and n.scores(sid) == 0
    assert reason.startswith("infra: host fault: NVRM: Xid (PCI:0000:18:00): 48")
    assert "the run ended with crash" in reason and reason.endswith("(slot 0)")
    assert n.workers[0].run_once() is None  # slot 0 is out of rotation after the Xid
    assert n.workers[1].run_once() == sid
    assert n.row(sid)[0] == "scored" and n.scores(sid) == 1
    first, second = n.records(sid)
    assert (first["exit_reason"], first["placement"]["slot"]) == ("infra", 0)
    assert (second["exit_reason"], second["placement"]["slot"]) == ("ok", 1)
    assert 'prism_slot_host_faults_total{slot="0"} 1.0' in n.metrics(live_server)


def test_a_fault_on_every_slot_ends_as_an_infra_failure_not_a_miner_failure(node, kernel_log):
    n = node(infra_retries=1)
    sid = n.queue(_training(f"    raise {ECC}\n"), "c")
    kernel_log(0)
    kernel_log(1)
    assert n.workers[0].run_once() == sid
    assert n.row(sid)[0] == "queued"
    assert n.workers[1].run_once() == sid
    status, attempts, reason = n.row(sid)
    assert (status, attempts) == ("failed", 2)
    assert reason.startswith("infra failure: host faults on slots [0, 1]: host fault: NVRM: Xid")
    assert n.scores(sid) == 0
    assert [r["exit_reason"] for r in n.records(sid)] == ["infra", "infra"]


def test_the_same_crash_text_without_host_evidence_is_the_miners(node):
    """A bundle that prints a driver error to re-roll its run gains nothing: no Xid, a
    passing probe, so the crash is charged."""
    n = node()
    sid = n.queue(_training(f"    raise {ECC}\n"), "e")
    assert n.workers[0].run_once() == sid
    assert n.row(sid)[:2] == ("scored", 1)
    (record,) = n.records(sid)
    assert record["exit_reason"] == "crash"


def test_the_miners_own_crash_is_charged_on_a_gpu_slot(node):
    """(GPU out-of-memory inside the run stays the miner's too: no host evidence.)"""
    n = node()
    sid = n.queue(_training("    raise ValueError('loss is nan')\n"), "d")
    assert n.workers[0].run_once() == sid
    status, attempts, _ = n.row(sid)
    assert (status, attempts) == ("scored", 1) and n.scores(sid) == 1
    (record,) = n.records(sid)
    assert record["exit_reason"] == "crash" and "ValueError: loss is nan" in record["exit_detail"]
    assert n.rotation.in_rotation(n.slots[0])


def test_a_crash_while_the_slots_device_fails_is_the_hosts(node, gpu_host):
    """No telling error text, but the slot's probe fails right after the run: not charged."""
    n = node()
    sid = n.queue(_training("    raise RuntimeError('CUDA error: unspecified launch failure')\n"),
                  "e")

    def break_gpu0_once_running():  # after the pre-run probe, long before train() starts
        deadline = time.monotonic() + 60
        while n.row(sid)[0] != "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        gpu_host.set(0, total="[Unknown Error]", used="[Unknown Error]")

    breaker = threading.Thread(target=break_gpu0_once_running)
    breaker.start()
    assert n.workers[0].run_once() == sid
    breaker.join()
    status, _, reason = n.row(sid)
    assert status == "queued" and n.scores(sid) == 0
    assert "host fault: the slot's health probe failed after the run: GPU " in reason
    assert "the run ended with crash" in reason
    assert not n.rotation.in_rotation(n.slots[0])
    (record,) = n.records(sid)
    assert (record["exit_reason"], record["placement"]["slot"]) == ("infra", 0)
