"""`GET /v1/submissions/{id}/curve` over real HTTP."""

from __future__ import annotations

import math

import httpx
import pytest
from dashboard_store import add_run, make_record, populate


def test_curve_json_of_the_latest_attempt(store, serve):
    ids = populate(store)
    body = httpx.get(f"{serve()}/v1/submissions/{ids['leader']}/curve", timeout=10).json()
    assert (body["submission_id"], body["attempt"], body["exit_reason"]) == (ids["leader"], 1,
                                                                             "ok")
    assert (body["batches"], body["skipped"]) == (6, 0)
    assert [p["tokens"] for p in body["points"]] == [100, 200, 300, 400, 500, 600]
    assert [round(p["bpb"], 9) for p in body["points"]] == [4.0, 3.0, 2.5, 2.0, 1.5, 1.0]
    assert body["points"][-1]["running_bpb"] == pytest.approx(14.0 / 6)
    assert body["uniform_bpb"] == pytest.approx(2.0)
    assert (body["val_bpb_trained"], body["val_bpb_twin"]) == (1.25, 2.25)


def test_curve_of_a_submission_without_runs_and_of_an_unknown_one(store, serve):
    ids = populate(store)
    url = serve()
    empty = httpx.get(f"{url}/v1/submissions/{ids['waiting']}/curve", timeout=10).json()
    assert (empty["attempt"], empty["points"], empty["batches"]) == (None, [], 0)
    missing = httpx.get(f"{url}/v1/submissions/999/curve", timeout=10)
    assert missing.status_code == 404 and missing.json() == {
        "detail": "no submission with id 999", "rule": "NOT_FOUND"
    }


def test_a_non_finite_loss_is_skipped_and_the_running_bpb_becomes_null(store, serve):
    ids = populate(store)
    record = make_record("9" * 64, bpb=(4.0, 3.0, 2.0))
    batches = list(record.columns.entries())
    batches[1] = batches[1].model_copy(update={"nats": math.inf})
    payload = record.with_steps(batches).model_dump(mode="json")
    add_run(store, ids["second"], 1, payload, created_at=1_700_000_700.0)
    r = httpx.get(f"{serve()}/v1/submissions/{ids['second']}/curve", timeout=10)
    assert r.status_code == 200
    body = r.json()  # strict JSON: no Infinity / NaN tokens
    assert "Infinity" not in r.text and "NaN" not in r.text
    assert body["skipped"] == 1
    assert [(p["tokens"], p["running_bpb"]) for p in body["points"]] == [(100, 4.0), (300, None)]
    page = httpx.get(f"{serve()}/dashboard/submissions/{ids['second']}", timeout=10)
    assert page.status_code == 200 and "1 left out (no bytes or a non-finite loss)" in page.text
