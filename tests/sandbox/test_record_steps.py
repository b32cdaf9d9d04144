"""Run records whose JSON is bounded whatever the schedule: per-step detail as packed columns
(a blob beside the record), a fixed-size summary inside it, the same scored figures."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from record_kit import (
    old_step0,
    old_tail_bpb,
    old_window_bpbs,
    synthetic_record,
)
from sqlalchemy import select, text

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.sandbox.record import RecordError, RunRecord
from prism_challenge.sandbox.steps import CURVE_BUCKETS, RowsAndNats, StepColumns, StepsError
from prism_challenge.scoring import measures, score_record
from prism_challenge.storage import Store
from prism_challenge.storage.tables import RunRecord as RunRecordRow
from prism_challenge.storage.tables import Submission
from prism_challenge.verification.replay import DrawnPlan, choose_checks, draw_plan


def test_a_200k_step_record_is_bounded_and_its_columns_compact():
    """200k one-row steps (a miner's choice): the record's JSON stays the size of a small
    run's; the per-step blob costs a few bytes a step beyond the kept losses."""
    big, small = (synthetic_record(n, keep_rate=1e-4) for n in (200_000, 2_000))
    big_json, small_json = big.model_dump_json(), small.model_dump_json()
    assert len(big_json) < 1_000_000
    assert len(big_json) < 1.2 * len(small_json) + 50_000  # flat, not 100x
    assert "batches" not in json.loads(big_json) and "steps" not in json.loads(big_json)
    assert CURVE_BUCKETS // 2 < len(big.summary.curve) <= CURVE_BUCKETS
    assert big.summary.count == 200_000
    assert sum(b.batches for b in big.summary.curve) == 200_000
    blob = big.steps_blob()
    per_step = (len(blob) - 8 * len(big.columns.sample)) / 200_000
    assert per_step < 48, per_step
    again = RunRecord.model_validate({**json.loads(big_json), "steps": blob})
    assert again.columns == big.columns and again.summary == big.summary
    wired = RunRecord.model_validate(big.to_wire())
    assert wired.columns == big.columns


@pytest.mark.parametrize("seed,ranks,windows,min_tokens,fraction", [
    (0, 1, 8, 1, 0.1), (1, 3, 8, 4096, 0.1), (2, 2, 5, 10_000, 0.5), (3, 4, 64, 1, 0.03),
])
def test_vectorised_figures_equal_the_per_step_loops(seed, ranks, windows, min_tokens, fraction):
    """Batches reported out of order, several ranks, empty batches: the tail, windows and
    first step agree with the per-entry loops to 1e-12."""
    record = synthetic_record(3_000, ranks=ranks, seed=seed)
    cols = record.columns
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(cols))
    empty = rng.random(len(cols)) < 0.02
    tokens, nbytes = cols.tokens.copy(), cols.bytes.copy()
    tokens[empty], nbytes[empty] = 0, 0
    shuffled = StepColumns(step=cols.step[order], rank=cols.rank[order],
                           offset_row=cols.offset_row[order], rows=cols.rows[order],
                           tokens=tokens[order], bytes=nbytes[order], nats=cols.nats[order],
                           t=cols.t[order], sample_start=np.arange(len(cols) + 1) * 0,
                           sample=np.zeros(0))
    record = record.with_steps(shuffled)
    entries = list(record.columns.entries())
    assert measures.tail_bpb(record, fraction) == pytest.approx(
        old_tail_bpb(entries, fraction), rel=1e-12)
    new, old = (measures.window_bpbs(record, windows, min_tokens),
                old_window_bpbs(entries, windows, min_tokens))
    assert len(new) == len(old) >= 2
    assert new == pytest.approx(old, rel=1e-12)
    assert measures.step0_nats_per_token(record) == pytest.approx(old_step0(entries), rel=1e-12)


def test_the_replay_plan_and_its_lookups_are_those_of_the_per_step_dicts():
    record = synthetic_record(500, ranks=2, seed=5, keep_rate=0.0005)
    entries = list(record.columns.entries())
    original = {(b.step, b.rank): (b.rows, b.nats) for b in entries}
    held = sorted({b.step for b in entries if b.sample})
    assert 10 < len(held) < 500
    drawn = draw_plan(record, snapshots=4, rng=np.random.default_rng(7))
    snaps = frozenset(int(s) for s in np.random.default_rng(7).choice(held, size=4,
                                                                      replace=False))
    assert frozenset(drawn.snapshot_steps) == snaps
    plan = choose_checks(record, DrawnPlan(snapshot_steps=sorted(snaps)))
    assert (plan.snapshot_steps, plan.probe_steps) == (snaps, frozenset(held) - snaps)
    lookup = RowsAndNats(record.columns)
    assert all(lookup.get(k) == v for k, v in original.items())
    assert lookup.get((500, 0)) is None and lookup.get((3, 2)) is None and (0, 1) in lookup


def test_a_record_read_without_its_columns_says_how_to_read_them():
    record = synthetic_record(10)
    digest = RunRecord.model_validate_json(record.model_dump_json())
    assert digest.summary == record.summary and digest.steps is None
    with pytest.raises(RecordError, match=r"without its per-step columns.*RunRecord.stored"):
        measures.tail_bpb(digest, 0.1)


def test_a_corrupt_or_ragged_blob_is_a_clear_error():
    record = synthetic_record(10)
    raw = json.loads(record.model_dump_json())
    with pytest.raises(ValueError, match="not a PRISM step table"):
        RunRecord.model_validate({**raw, "steps": b"garbage"})
    with pytest.raises(StepsError, match="unequal length"):
        StepColumns(step=[0, 1], rank=[0], offset_row=[0, 1], rows=[1, 1], tokens=[1, 1],
                    bytes=[1, 1], nats=[1.0, 1.0], t=[0.0, 0.0], sample_start=[0, 0, 0],
                    sample=[])
    with pytest.raises(ValueError, match="not a PRISM step table"):
        RunRecord.model_validate({**raw, "steps": base64.b64encode(b"\x00" * 9).decode()})


def _old_json(record: RunRecord) -> dict:
    """The record as version 2 wrote it: a `batches` list of per-step objects."""
    raw = json.loads(record.model_dump_json())
    del raw["summary"]
    raw["version"] = 2
    raw["batches"] = [json.loads(e.model_dump_json()) for e in record.columns.entries()]
    return raw


def test_a_version_2_record_is_converted_on_read_and_scores_the_same():
    record = synthetic_record(300, ranks=2, seed=9)
    old = RunRecord.model_validate(_old_json(record))
    assert old.columns == record.columns and old.summary == record.summary
    settings = ScoringSettings()
    assert score_record(old, settings) == score_record(record, settings)


def test_the_store_migration_rewrites_old_records_with_their_blob(tmp_path):
    """A store written before per-step columns: on open each `batches` record is rewritten
    as the bounded JSON plus its blob, and reads back the same."""
    url = f"sqlite:///{tmp_path / 'prism.db'}"
    record = synthetic_record(200, seed=3)
    store = Store(url)
    with store.session() as s:
        sub = Submission(digest="a" * 64, hotkey="h", status="scored", accepted_at=0.0,
                         updated_at=0.0, block=1, bundle=b"x")
        s.add(sub)
        s.flush()
        s.add(RunRecordRow(submission_id=sub.id, attempt=1, record=_old_json(record),
                           created_at=0.0))
    with store.engine.begin() as conn:
        conn.execute(text("update schema_version set version = 5"))
    store.close()
    store = Store(url)
    with store.session() as s:
        row = s.scalars(select(RunRecordRow)).one()
        assert "batches" not in row.record and row.record["summary"]["count"] == 200
        again = RunRecord.stored(row)
    store.close()
    assert again.columns == record.columns
