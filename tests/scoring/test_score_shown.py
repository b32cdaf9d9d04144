"""What a reader sees of a score: `prism eval` prints the held-out bpb with its standard
error, the gap with the bound it is judged at, and names a deadline cut in its verdict;
`/v1/leaderboard` serves the same figures with every entry."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from rich.console import Console
from scoring_records import make_record, with_eval
from verified_kit import mark_verified

from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.bundle import Bundle
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config import Settings
from prism_challenge.miner.evaluate import EvalReport
from prism_challenge.miner.render import print_eval
from prism_challenge.registry.axes import AxisReading
from prism_challenge.scoring import record_score, score_record
from prism_challenge.storage.tables import Submission
from prism_challenge.validator.app import create_app
from prism_challenge.verification.verdict import Verdict

ROOT = Path(__file__).resolve().parents[2]


def _printed(record) -> tuple[str, object]:
    score = score_record(record, Settings().scoring)
    report = EvalReport(bundle=Bundle.from_dir(ROOT / "examples" / "baseline"), findings=[],
                        record=record, score=score, replay=None,
                        verification=Verdict(passed=True, reasons=[]), axes=AxisReading(),
                        val_source="the val split", corpus="demo", wall_s=1.0, files={})
    console = Console(record=True, width=200, force_terminal=False)
    print_eval(console, report)
    return console.export_text(), score


def test_held_out_bpb_and_gap_are_printed_with_their_noise_and_the_gap_bound():
    ev = make_record().eval.model_copy(update={"val_bpb_trained_se": 0.0512,
                                               "val_bpb_twin_se": 0.0633})
    text, score = _printed(make_record(eval=ev))
    assert re.search(r"held-out bpb, trained\s+│ 3\.0000 ± 0\.0512", text)
    assert re.search(r"held-out bpb, random-init twin\s+│ 8\.1000 ± 0\.0633", text)
    assert score.gap_se > 0.0512  # the held-out SE and the best window's, combined
    assert score.gap_bound == score.gap - 2 * score.gap_se
    assert (f"│ {score.gap:.4f} ± {score.gap_se:.4f}, judged at its bound "
            f"{score.gap_bound:.4f}") in text


def test_a_deadline_cut_is_named_in_the_verdict_with_the_tokens_it_charged():
    record = make_record()  # 800 of 1000 tokens consumed, exit_reason deadline
    text, score = _printed(record)
    assert score.unconsumed_tokens == 200
    assert text.strip().splitlines()[-1] == (
        f"ELIGIBLE: a validator would rank this run at {score.bpb:.4f} bpb, and its replay "
        "verifies it (cut by the deadline limit: 200 unconsumed tokens charged)")
    assert any(line.startswith("│ note") and "(exit: deadline)" in line
               for line in text.splitlines())


def test_a_run_that_ended_on_its_own_has_no_cut_label():
    text, _ = _printed(make_record(exit_reason="ok"))
    assert "cut by the" not in text


def test_the_leaderboard_route_serves_held_out_se_gap_and_bound(store):
    settings = Settings()
    result = score_record(with_eval(make_record(), val_bpb_trained_se=0.04), settings.scoring)
    with store.session() as s:
        row = Submission(digest="a" * 64, hotkey="hk-a", status="running", reviewed="passed",
                         accepted_at=1.0, updated_at=1.0, bundle=b"x")
        s.add(row)
        s.flush()
        record_score(s, row.id, result, "demo", now=2.0)
        mark_verified(s, row.id)
    deps = ApiDeps(settings=settings, store=store, metagraph=StaticMetagraph.of(["hk-a"], block=1))
    with ApiServer(create_app(deps)) as server:
        board = httpx.get(f"{server.url}/v1/leaderboard", params={"corpus": "demo"}).json()
    (standing,) = board["standings"]
    entry = standing["entry"]
    assert (entry["heldout_bpb"], entry["heldout_se"]) == (3.0, 0.04)
    assert entry["gap"] == pytest.approx(result.gap)
    assert entry["gap_bound"] == pytest.approx(result.gap - 2 * result.gap_se)
    assert result.gap_se > 0.04  # the best window's noise adds to the held-out SE
