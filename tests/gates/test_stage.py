"""GateStage transitions through the real store: selection, AST rejection, bad rows, races."""

from __future__ import annotations

from gates_helpers import bundle_from, bundle_of, row_of, submit
from sqlalchemy import select

from prism_challenge.config import Settings
from prism_challenge.gates import GateStage
from prism_challenge.storage import Status, transition
from prism_challenge.storage.tables import BundleFingerprint, Submission

NOW = 3_000_000.0


def stage(store, **gates) -> GateStage:
    return GateStage(Settings(llm={"enabled": False}, gates=gates), store, reviewer=None)


def test_ast_rejection_is_final_and_leaves_no_fingerprint(store):
    files = {k: v.decode() for k, v in bundle_of("attacks", "a1_socket_exfiltration")
             .files.items()}
    sid = submit(store, bundle_from(files), "hk-a", NOW)
    [outcome] = stage(store).process_due(NOW)
    assert outcome.status == Status.REJECTED
    row = row_of(store, sid)
    assert row.status == "rejected" and row.reviewed == "pending"
    assert row.reason.startswith("AST policy:\nAST-IMPORT training.py:2: import of 'socket'")
    with store.session() as s:
        assert s.scalars(select(BundleFingerprint)).all() == []
    assert stage(store).process_due(NOW + 1e6) == []


def test_only_due_received_submissions_are_taken_oldest_first(store):
    late = submit(store, bundle_of("honest", "gpt"), "hk-a", NOW + 2)
    early = submit(store, bundle_of("honest", "lstm"), "hk-b", NOW + 1)
    later = submit(store, bundle_of("honest", "moe"), "hk-c", NOW + 3)
    with store.session() as s:
        transition(s, later, Status.RECEIVED, reason="held", not_before=NOW + 100, now=NOW)
    outcomes = stage(store).process_due(NOW + 10)
    assert [o.submission_id for o in outcomes] == [early, late]
    assert row_of(store, later).status == "received"
    assert [o.submission_id for o in stage(store).process_due(NOW + 100)] == [later]


def test_batch_size_limits_one_pass(store):
    ids = [submit(store, bundle_of("honest", n), f"hk-{n}", NOW + i)
           for i, n in enumerate(["gpt", "lstm", "moe"])]
    assert [o.submission_id for o in stage(store, batch_size=2).process_due(NOW + 5)] == ids[:2]
    assert [o.submission_id for o in stage(store, batch_size=2).process_due(NOW + 5)] == ids[2:]


def test_corrupt_stored_bundle_is_rejected_with_the_reason(store):
    sid = submit(store, bundle_of("honest", "gpt"), "hk-a", NOW)
    with store.session() as s:
        s.get(Submission, sid).bundle = b"\x00garbage"
    [outcome] = stage(store).process_due(NOW)
    assert outcome.status == Status.REJECTED
    assert row_of(store, sid).reason.startswith("bundle refused: ")


def test_a_submission_moved_by_another_worker_is_left_alone(store):
    sid = submit(store, bundle_of("honest", "gpt"), "hk-a", NOW)
    with store.session() as s:
        transition(s, sid, Status.QUEUED, reason="another worker")
    assert stage(store).process_one(sid, NOW) is None
    assert stage(store).process_one(sid + 99, NOW) is None
    assert row_of(store, sid).reason == "another worker"


def test_a_flood_of_violations_is_summarised(store):
    training = "import torch\n" + "".join(f"import os as o{i}\n" for i in range(40)) + (
        "def train(ctx):\n    pass\n")
    files = {"architecture.py": bundle_of("honest", "gpt").source("architecture.py"),
             "training.py": training}
    sid = submit(store, bundle_from(files), "hk-a", NOW)
    stage(store).process_due(NOW)
    reason = row_of(store, sid).reason
    assert reason.count("AST-IMPORT") == 20 and reason.endswith("... and 20 more")


def test_a_gate_error_holds_instead_of_crashing_or_rejecting(store, monkeypatch):
    import prism_challenge.gates.stage as stage_module

    def broken(files):
        raise RuntimeError("boom")

    monkeypatch.setattr(stage_module, "check_policy", broken)
    bad = submit(store, bundle_of("honest", "gpt"), "hk-a", NOW)
    good = submit(store, bundle_of("honest", "lstm"), "hk-b", NOW + 1)
    outcomes = stage(store).process_due(NOW + 2)
    assert [(o.submission_id, o.status) for o in outcomes] == [
        (bad, Status.RECEIVED), (good, Status.RECEIVED)]
    row = row_of(store, bad)
    assert row.reason.startswith("held: gate error (RuntimeError: boom), retry at ")
    assert row.not_before == NOW + 2 + Settings().llm.backoff_s
    monkeypatch.undo()
    statuses = {o.submission_id: o.status for o in stage(store).process_due(row.not_before)}
    assert statuses == {bad: Status.QUEUED, good: Status.QUEUED}
