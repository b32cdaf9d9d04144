"""Evaluations on a real two-node Ray cluster (127.0.0.1): same scores as the local executor,
a head killed mid-run leaves no run behind, nodes on other data are refused, a node lost
mid-run is requeued and scored once, and a hopeless run is stopped early against the leader.

The tests share one cluster; the last one kills the worker node, so it stays last.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from cluster_kit import tiny_bundle, tiny_settings, together
from fixture_bundles import bundle as sandbox_bundle
from fixture_bundles import queue_bundle

from prism_challenge.data import prepare_data
from prism_challenge.data.manifest import read_manifest
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Runner
from prism_challenge.storage import Store
from prism_challenge.storage.tables import RunRecord as RunRecordRow
from prism_challenge.storage.tables import Score, Submission, Verification
from prism_challenge.validator.worker import EvaluationWorker

pytestmark = pytest.mark.timeout(600)
HERE = Path(__file__).resolve().parent


def _pool(settings, data_root):
    from prism_challenge.cluster.ray_pool import ClusterPool

    pool = ClusterPool(settings, read_manifest(data_root))
    pool.connect()
    return pool


def _scores(store) -> dict[str, tuple[float, float | None, dict]]:
    """digest -> (bpb, prequential bpb, the whole detail, which a failed comparison shows)."""
    with store.session() as s:
        return {sub.digest: (score.bpb, score.detail["prequential_bpb"], score.detail)
                for sub, score in s.query(Submission, Score).join(
                    Score, Score.submission_id == Submission.id)}


def _records(store) -> list[tuple[int, RunRecord]]:
    with store.session() as s:
        return [(r.submission_id, RunRecord.stored(r))
                for r in s.query(RunRecordRow).order_by(RunRecordRow.id)]


def test_two_bundles_on_two_nodes_score_as_the_local_executor(ray_cluster, store, tmp_path,
                                                               prepared_data):
    settings = tiny_settings(tmp_path, prepared_data, ray_cluster.address,
                             verification={"enabled": False})
    bundles = [tiny_bundle("1e-2"), tiny_bundle("3e-3")]
    pool = _pool(settings, prepared_data)
    try:
        assert pool.wait_ready(120) == 2
        assert pool.capacity() == 2 and [u.slots for u in pool.usage()] == [1, 1]
        workers = [EvaluationWorker(settings, store, slot, None, capacity=pool.capacity)
                   for slot in pool.slots]
        sids = [queue_bundle(store, b.files, f"hk{i}") for i, b in enumerate(bundles)]
        stop = threading.Event()  # a head shutting down mid-run: the node stops, requeued
        stopping = EvaluationWorker(settings, store, pool.slots[0], None, cancel=stop)
        run = threading.Thread(target=stopping.run_once)
        run.start()
        deadline = time.monotonic() + 120
        while not _sandboxes_of(bundles[0].digest, ray_cluster):  # its sandbox has started
            assert run.is_alive() and time.monotonic() < deadline
            time.sleep(0.2)
        stop.set()
        run.join(60)
        with store.session() as s:
            row = s.get(Submission, sids[0])
            assert (row.status, row.reason) == ("queued", "interrupted by a validator shutdown")
        assert pool.slots[0].usable()  # the slot stopped its job and takes the next one
        assert sorted(together(workers)) == sids  # one evaluation per node, at once
    finally:
        pool.close()
    with store.session() as s:
        assert [s.get(Submission, i).status for i in sids] == ["scored", "scored"]
    records = _records(store)
    assert sorted(sid for sid, _ in records) == sids  # each record landed once
    nodes = {r.placement.node for _, r in records}
    assert len(nodes) == 2 and all(n.startswith("127.0.0.1/") for n in nodes)
    assert all(r.exit_reason == "ok" for _, r in records)

    local_settings = settings.model_copy(update={"validator": settings.validator.model_copy(
        update={"executor": "local", "work_dir": tmp_path / "local-runs"})})
    local_store = Store(f"sqlite:///{tmp_path / 'local.db'}")
    try:
        runner = Runner.from_data(local_settings, BubblewrapBackend(), prepared_data)
        for i, b in enumerate(bundles):
            queue_bundle(local_store, b.files, f"hk{i}")
        assert None not in together([EvaluationWorker(local_settings, local_store, runner, None)
                                     for _ in bundles])
        want = _scores(local_store)
    finally:
        local_store.close()
    got = _scores(store)
    assert set(got) == set(want) == {b.digest for b in bundles}
    assert got[bundles[0].digest][0] != pytest.approx(got[bundles[1].digest][0], abs=1e-3)
    for digest, (bpb, prequential, detail) in want.items():
        assert got[digest][1] == pytest.approx(prequential, abs=1e-6), (got[digest][2], detail)
        assert got[digest][0] == pytest.approx(bpb, abs=1e-6), (got[digest][2], detail)


def test_head_restart_ends_the_dead_heads_runs_and_refuses_nodes_on_other_data(
        ray_cluster, tmp_path, prepared_data):
    """A head SIGKILLed while its run is in flight on a node: the restarted head ends that
    run (no sandbox of it survives) and requeues the submission. The restarted head's data
    is another version than both nodes': every slot refuses, naming the two versions, and
    the submission stays queued, unscored."""
    from prism_challenge.validator.demo import make_wallets
    from prism_challenge.validator.node import ValidatorNode

    source = write_jsonl(tmp_path / "src" / "docs.jsonl", english_like_documents(850, seed=1))
    head_data = tmp_path / "head-data"
    prepare_data(small_spec([source]), head_data)
    head_version = read_manifest(head_data).sha256
    node_version = read_manifest(prepared_data).sha256
    assert head_version != node_version
    db = {"url": f"sqlite:///{tmp_path / 'head.db'}"}
    old = tiny_settings(tmp_path, prepared_data, ray_cluster.address, storage=db,
                        verification={"enabled": False})
    bundle = tiny_bundle()
    store = Store(db["url"])
    sid = queue_bundle(store, bundle.files, "hk")
    store.close()
    (tmp_path / "old.json").write_text(json.dumps(old.model_dump(mode="json")))
    dead = subprocess.Popen([sys.executable, str(HERE / "crashing_head.py"),
                             str(tmp_path / "old.json")], cwd=HERE, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 180
        while not _sandboxes_of(bundle.digest, ray_cluster):  # its run is in a sandbox on a node
            assert dead.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
    finally:
        dead.kill()
        dead.wait()

    make_wallets(tmp_path / "wallets", ["validator"])
    settings = tiny_settings(tmp_path, head_data, ray_cluster.address, storage=db,
                             intake={"port": 0}, validator={"epoch_s": 60},
                             wallet={"name": "validator", "path": str(tmp_path / "wallets")},
                             chain={"local_ledger": str(tmp_path / "local-chain.db")})
    node = ValidatorNode(settings)
    url = node.start()
    try:
        import ray

        mine = {f"prism-slot-{slot.index}-{slot.generation}" for slot in node.cluster.slots}
        assert set(ray.util.list_named_actors()) == mine  # the dead head's slots are gone
        with node.store.session() as s:
            row = s.get(Submission, sid)
            # the head's crash was the validator's: the interrupted attempt is refunded
            assert (row.status, row.attempts) == ("queued", 0)
            assert row.reason == "resumed after the validator stopped mid-run"
        deadline = time.monotonic() + 120
        while sum(len(u.refused) for u in node.cluster.usage()) < 2 or \
                _sandboxes_of(bundle.digest, ray_cluster):
            assert time.monotonic() < deadline, node.cluster.usage()
            time.sleep(0.5)
        time.sleep(1.0)  # several worker polls: none may claim the submission
        usage = node.cluster.usage()
        assert [(u.slots, u.ready, u.busy, len(u.refused)) for u in usage] == [(1, 0, 0, 1)] * 2
        for u in usage:
            (reason,) = u.refused
            assert f"is version {node_version[:16]}" in reason
            assert f"the head's is {head_version[:16]}" in reason
            assert reason.startswith(f"node {u.name}:")
        metrics = httpx.get(f"{url}/metrics").text
        refused = re.findall(r'prism_cluster_node_refused_slots\{node="([^"]+)"\} (\S+)',
                             metrics)
        assert sorted(refused) == sorted((u.name, "1.0") for u in usage)
        assert re.findall(r"prism_cluster_node_ready_slots\{[^}]*\} (\S+)", metrics) == \
            ["0.0", "0.0"]
        page = httpx.get(f"{url}/").text
        assert "<h2>Cluster</h2>" in page and "2 nodes, 0 slots taking runs" in page
        assert f"the head&#x27;s is {head_version[:16]}" in page
        with node.store.session() as s:
            row = s.get(Submission, sid)
            assert (row.status, row.attempts) == ("queued", 0)
            assert s.query(Score).count() == 0 and s.query(RunRecordRow).count() == 0
    finally:
        node.stop()


def _ray_worker_of(pid: int) -> int:
    """The Ray worker process a sandbox descends from (its proctitle starts with `ray::`)."""
    while pid > 1:
        if (Path("/proc") / str(pid) / "cmdline").read_bytes().startswith(b"ray::"):
            return pid
        pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    raise AssertionError("the sandbox does not descend from a Ray worker")


def _sandboxes_of(digest: str, cluster) -> list[int]:
    """bubblewrap processes of this cluster's nodes running a run directory of this bundle
    (named by its digest); another test process's cluster may run the same bundle."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"bwrap") and any(digest[:12].encode() in a for a in argv) \
                and any(str(cluster.work).encode() in a for a in argv):
            found.append(int(proc.name))
    return found


def test_a_node_lost_mid_run_is_requeued_and_scored_once_then_leads_an_early_stop(
        ray_cluster, store, tmp_path, prepared_data):
    """Kill the worker node's raylet while it runs a submission: the run goes back to the
    queue (not charged), the head's node scores it, and exactly one record and score land;
    its contender replay also runs on the cluster. Verified, it leads: a collapsed model
    accepted after it gets the early-stop bar the head made from its own data (the same as a
    local runner's) and is stopped at the first checkpoint on the node, censored, never left
    running."""
    settings = tiny_settings(tmp_path, prepared_data, ray_cluster.address)
    assert settings.scoring.early_stop.enabled
    pool = _pool(settings, prepared_data)
    try:
        assert pool.wait_ready(120) == 2
        by_node = {slot.about["node_id"]: slot for slot in pool.slots}
        doomed = by_node[ray_cluster.worker.node_id]
        survivor = by_node[ray_cluster.head.node_id]
        workers = {slot: EvaluationWorker(settings, store, slot, None, capacity=pool.capacity)
                   for slot in pool.slots}
        bundle = tiny_bundle()
        sid = queue_bundle(store, bundle.files, "hk")
        run = threading.Thread(target=workers[doomed].run_once)
        run.start()
        deadline = time.monotonic() + 120
        while not _sandboxes_of(bundle.digest, ray_cluster):  # in a sandbox on the worker node
            assert run.is_alive() and time.monotonic() < deadline
            time.sleep(0.2)
        # the host goes away: its raylet and the Ray worker running the job, at once (a
        # worker outliving its raylet by a few seconds could still hand its result back).
        # The worker is found first: once its raylet is gone it may die on its own, and the
        # sandbox it started is then no longer its child.
        job = {_ray_worker_of(pid) for pid in _sandboxes_of(bundle.digest, ray_cluster)}
        ray_cluster.worker.all_processes["raylet"][0].process.kill()
        for pid in job:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it went with its raylet
                pass
        run.join(120)
        assert not run.is_alive()
        with store.session() as s:
            row = s.get(Submission, sid)
            assert (row.status, row.attempts) == ("queued", 1)
            assert row.reason.startswith("infra: NodeLost:")
            assert s.query(RunRecordRow).count() == 0
        assert doomed.state == "lost" and not doomed.usable()
        assert workers[survivor].run_once() == sid
        assert workers[survivor].run_once() == sid  # the replay of the would-be leader

        ((_, leader),) = _records(store)
        with store.session() as s:
            leader_bpb = s.get(Score, sid).bpb
        local = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
        assert survivor.competition == local.competition == leader.competition
        with store.session() as s:
            assert s.get(Score, sid).corpus == leader.competition
        head_plan = survivor.early_stop_plan(leader_bpb, sid, leader)
        local_plan = local.early_stop_plan(leader_bpb, sid, leader)
        assert head_plan is not None and _plain(head_plan) == _plain(local_plan)
        hopeless = queue_bundle(store, sandbox_bundle("constant", CONFIDENCE="30"), "hk2")
        assert workers[survivor].run_once() == hopeless
        deadline = time.monotonic() + 60
        while len(pool.usage()) != 1:
            assert time.monotonic() < deadline
            pool.sync()
            time.sleep(0.5)
        assert pool.capacity() == 1
    finally:
        pool.close()
    with store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("scored", 2)
        verification = s.get(Verification, sid)
        assert verification.status == "passed"  # with the plan the head stored, on the node
        assert verification.replay["snapshot_steps"] == verification.plan["snapshot_steps"]
        assert s.get(Submission, hopeless).status == "scored"
        assert s.get(Score, hopeless).detail["censored"]
        assert s.get(Verification, hopeless) is None  # censored: never a contender
        assert s.query(Score).count() == 2
    (record_sid, record), (stopped_sid, stopped) = _records(store)
    assert (record_sid, stopped_sid) == (sid, hopeless) and record.exit_reason == "ok"
    assert record.placement.node == stopped.placement.node == survivor.about["node"]
    stop = stopped.stopped_early
    assert (stop.checkpoint, stop.position, stop.leader_submission) == (20 / 96, 24, sid)
    assert stopped.exit_reason == "ok" and stopped.consumed.rows == 24


def _plain(plan) -> tuple:
    """An early-stop plan as comparable values (its leader curve holds arrays)."""
    return (plan.target_bpb, plan.leader_id, plan.checkpoints, plan.max_gain,
            plan.budget_bytes, plan.recent_rows, plan.leader.edges.tolist(),
            plan.leader.bits.tolist())
