"""Start-up hands the registry only the scored submissions it has not observed, reading one
missing record at a time: a record the registry already holds is never loaded."""

from __future__ import annotations

import time

from fixture_bundles import bundle, queue_bundle
from sqlalchemy import select, update

from prism_challenge.config import Settings
from prism_challenge.registry import Registry
from prism_challenge.storage.tables import RegistryEvent, RunRecord, Score
from prism_challenge.validator.worker import EvaluationWorker
from tests.scoring.scoring_records import make_record


def _scored(store, tag: str, record: dict) -> int:
    files = bundle("tiny")
    files["training.py"] += f"# {tag}\n".encode()
    sid = queue_bundle(store, files, "hk" + tag)
    with store.session() as s:
        s.add(RunRecord(submission_id=sid, attempt=1, record=record, created_at=time.time()))
        s.add(Score(submission_id=sid, bpb=3.0, heldout_delta=0.0, eligible=True,
                    corpus="demo", detail={}, created_at=time.time()))
    return sid


def test_start_up_observes_only_what_the_registry_lacks(store):
    settings = Settings()
    registry = Registry(store, settings)
    worker = EvaluationWorker(settings, store, None, registry)
    record = make_record().model_dump(mode="json")
    seen = _scored(store, "a", record)
    assert worker.catch_up_registry() == 1  # a crash had left it unobserved
    with store.session() as s:  # now observed: its record is spoilt, loading it would raise
        s.execute(update(RunRecord).where(RunRecord.submission_id == seen)
                  .values(record={"not": "a record"}))
    missing = _scored(store, "b", record)
    assert worker.catch_up_registry() == 1
    with store.session() as s:
        keys = set(s.scalars(select(RegistryEvent.key).where(RegistryEvent.key.like("obs:%"))))
    assert keys == {f"obs:{seen}", f"obs:{missing}"}
    assert worker.catch_up_registry() == 0  # idempotent: nothing left to hand over
