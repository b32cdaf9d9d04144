"""`prism eval --no-replay`: the score of the record without the replay that verifies it.

One real (tiny) run in the sandbox with the replay skipped, at the `evaluate_bundle` level;
the other tests reuse its record (the sandbox's `run_in_sandbox` returns it) so that no
second training runs, and count the replays started (`replay_in_sandbox`)."""

from __future__ import annotations

import json
import re

import pytest
from miner_kit import EXAMPLES, copy_example, prism_in_process
from rich.console import Console

from prism_challenge.bundle import Bundle
from prism_challenge.cli.common import settings_from
from prism_challenge.miner import evaluate as evaluate_module
from prism_challenge.miner.compare import Side, load_stored, print_comparison
from prism_challenge.miner.evaluate import NOT_VERIFIED, evaluate_bundle
from prism_challenge.verification.replay import ReplayRecord
from prism_challenge.verification.verdict import Verdict

NOT_VERIFIED_LINE = (
    "NOT VERIFIED: the replay was skipped with --no-replay. A validator additionally replays "
    "the run with checks drawn after it ended (every batch loss reproduced; kept positions at "
    "probed and snapshotted steps re-predicted without their targets) before it may take "
    "weight.")
SKIPPED_ROW = "not verified (record eligible, replay skipped)"


class Replays:
    """Stands in for `replay_in_sandbox`: counts the replays started (and, when given a
    record, returns it as the replay's)."""

    def __init__(self, returns: ReplayRecord | None = None) -> None:
        self.calls: list[tuple] = []
        self.returns = returns

    def __call__(self, bundle, record, settings, data, **_):
        self.calls.append((bundle.digest, record))
        if self.returns is None:
            raise AssertionError("a replay was started")
        return self.returns


@pytest.fixture(scope="module")
def unreplayed(tiny_config, prepared_data, tmp_path_factory):
    """evaluate_bundle(skip_replay=True) of the baseline, for real, into an --out folder
    holding an earlier run's replay.json: (report, out folder, replays started)."""
    out = tmp_path_factory.mktemp("no-replay") / "out"
    out.mkdir()
    (out / "replay.json").write_text('{"an earlier run": "passed"}')
    replays = Replays()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evaluate_module, "replay_in_sandbox", replays)
        report = evaluate_bundle(Bundle.from_dir(EXAMPLES / "baseline"),
                                 settings_from(tiny_config), prepared_data, out,
                                 skip_replay=True)
    return report, out, replays


def test_skip_replay_scores_the_record_starts_no_replay_and_says_not_verified(unreplayed):
    report, out, replays = unreplayed
    assert replays.calls == []
    assert report.score.eligible is True and report.record.exit_reason == "ok"
    assert report.replay_skipped is True
    assert report.replay is None and report.verification is None
    assert report.eligible is False  # a validator pays only a verified run
    # the earlier run's replay.json is gone: nothing in the folder passes for a verification
    assert not (out / "replay.json").exists() and "replay" not in report.files
    assert {p.name for p in out.iterdir()} == {"record.json", "score.json", "steps.npz",
                                              "learning_curve.png"}
    assert NOT_VERIFIED == NOT_VERIFIED_LINE
    summary = json.loads((out / "score.json").read_text())
    assert summary["not_verified"] == NOT_VERIFIED_LINE
    assert summary["verification"] is None and summary["eligible"] is False
    assert summary["score"]["eligible"] is True
    assert summary["score"]["bpb"] == report.score.bpb


def test_the_default_still_replays_and_keeps_its_replay(unreplayed, tiny_config, prepared_data,
                                                       tmp_path, monkeypatch):
    """Without skip_replay an eligible record is replayed once, its replay.json written and
    its verdict deciding eligibility; score.json says nothing of a skipped replay."""
    report, _, _ = unreplayed
    monkeypatch.setattr(evaluate_module, "run_in_sandbox", lambda *a, **k: report.record)
    replay = ReplayRecord(digest=report.record.digest, exit_reason="ok", probe_steps=[1],
                          snapshot_steps=[3], last_step=5)
    replays = Replays(replay)
    monkeypatch.setattr(evaluate_module, "replay_in_sandbox", replays)
    monkeypatch.setattr(evaluate_module, "verdict",
                        lambda r, v: Verdict(passed=r is replay, reasons=[]))
    bundle = Bundle.from_dir(EXAMPLES / "baseline")
    out = tmp_path / "out"
    again = evaluate_bundle(bundle, settings_from(tiny_config), prepared_data, out)
    assert replays.calls == [(bundle.digest, report.record)]
    assert again.replay is replay and again.verification == Verdict(passed=True, reasons=[])
    assert again.replay_skipped is False and again.eligible is True
    assert ReplayRecord.model_validate_json((out / "replay.json").read_text()) == replay
    summary = json.loads((out / "score.json").read_text())
    assert "not_verified" not in summary and summary["eligible"] is True
    assert summary["verification"] == {"passed": True, "reasons": [], "comparable": True}


def _row(text: str, name: str) -> list[str]:
    found = re.search(rf"^│ {re.escape(name)}\s+│(.*)│$", text, flags=re.M)
    assert found, text
    return [cell.strip() for cell in found.group(1).split("│")]


def test_cli_no_replay_exits_0_says_not_verified_and_names_the_command_to_verify(
        unreplayed, tiny_config, prepared_data, tmp_path, monkeypatch):
    """`prism eval --no-replay --compare BUNDLE`: neither bundle is replayed, the report and
    the comparison say NOT VERIFIED, the exit status is 0 (the record is eligible) and the
    last line is the command that verifies the run."""
    report, _, _ = unreplayed
    monkeypatch.setattr(evaluate_module, "run_in_sandbox", lambda *a, **k: report.record)
    replays = Replays()
    monkeypatch.setattr(evaluate_module, "replay_in_sandbox", replays)
    bundle = copy_example("baseline", tmp_path / "mine")
    out = tmp_path / "out"
    res = prism_in_process("eval", str(bundle), "-c", str(tiny_config), "--data-root",
                           str(prepared_data), "--out", str(out), "--no-replay",
                           "--compare", str(EXAMPLES / "baseline"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert replays.calls == []
    lines = res.stdout.splitlines()
    assert NOT_VERIFIED_LINE in lines
    bpb = report.score.bpb
    assert f"NOT VERIFIED (replay skipped with --no-replay): eligible on its record; a " \
           f"validator would rank this run at {bpb:.4f} bpb only if its replay verifies it" \
           in lines
    assert "ELIGIBLE:" not in res.stdout and "contender replay" not in res.stdout
    assert _row(res.stdout, "eligible (record and replay)") == [SKIPPED_ROW, SKIPPED_ROW, ""]
    assert lines[-1] == (
        "to verify it, run it again without --no-replay (no command replays a stored run, so "
        f"it trains again before the replay): prism eval {bundle} --config {tiny_config} "
        f"--data-root {prepared_data} --out {out}")
    for folder in (out, out / "reference"):
        assert not (folder / "replay.json").exists()
        assert json.loads((folder / "score.json").read_text())["not_verified"] == \
            NOT_VERIFIED_LINE


def test_cli_no_replay_of_a_record_that_is_not_eligible_exits_1_as_without_it(
        unreplayed, tiny_config, prepared_data, tmp_path, monkeypatch):
    report, _, _ = unreplayed
    crashed = report.record.model_copy(update={"eval": None})
    monkeypatch.setattr(evaluate_module, "run_in_sandbox", lambda *a, **k: crashed)
    replays = Replays()
    monkeypatch.setattr(evaluate_module, "replay_in_sandbox", replays)
    out = tmp_path / "out"
    res = prism_in_process("eval", str(EXAMPLES / "baseline"), "-c", str(tiny_config),
                           "--data-root", str(prepared_data), "--out", str(out), "--no-replay")
    assert res.returncode == 1, res.stdout + res.stderr
    assert replays.calls == []
    assert "replay: not run (the record is not eligible)" in res.stdout.splitlines()
    assert res.stdout.strip().splitlines()[-1].startswith("NOT ELIGIBLE: see the gates")
    assert "NOT VERIFIED" not in res.stdout and "to verify it" not in res.stdout
    assert "not_verified" not in json.loads((out / "score.json").read_text())


def test_a_stored_unverified_run_compares_as_not_verified(unreplayed):
    """`--compare` with the --out folder of a --no-replay run: not verified, not 'False'."""
    report, out, _ = unreplayed
    stored = load_stored(out)
    assert stored.verified is False and stored.eligible is False
    mine = Side("mine", report.record, report.score, True)
    console = Console(width=400, record=True)
    print_comparison(console, mine, stored)
    assert _row(console.export_text(), "eligible (record and replay)") == [
        "True", SKIPPED_ROW, ""]


def test_the_guide_quotes_the_not_verified_line():
    guide = (EXAMPLES.parent / "docs" / "miners.md").read_text()
    assert NOT_VERIFIED_LINE in " ".join(guide.split())
