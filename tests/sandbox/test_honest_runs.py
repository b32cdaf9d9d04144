"""A baseline bundle runs end to end in the real sandbox and yields an honest record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from record_kit import old_step0, old_tail_bpb, old_window_bpbs
from sandbox_kit import BATCH, STEPS, bundle, digest_of, tiny_settings

from prism_challenge.sandbox.heldout_round import LOCAL_ROUND
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.scoring import measures, score_record
from prism_challenge.verification.verdict import verdict

ROOT = Path(__file__).resolve().parents[2]


def _baseline() -> dict[str, bytes]:
    return {n: (ROOT / "examples" / "baseline" / n).read_bytes()
            for n in ("architecture.py", "training.py")}


def test_baseline_end_to_end_then_identical_rerun(runner, tmp_path):
    files = _baseline()
    first = runner.run(files, digest_of(files), tmp_path / "a")
    assert first.exit_reason == "ok", first.exit_detail
    assert first.consumed.rows == first.budget.rows == BATCH * STEPS
    assert first.consumed.bytes == first.budget.bytes
    cols = first.columns
    assert cols.step.tolist() == list(range(len(cols)))
    assert first.axes.optimizers[0].cls == "AdamW"
    assert first.axes.batch_size == 16 and first.axes.layer_count == 2
    assert first.eval.val_bpb_trained < first.eval.val_bpb_twin
    assert first.eval.probe_trained.ok and first.eval.probe_twin.ok
    assert first.eval.val_tokens == runner.settings.scoring.heldout_positions == 256
    assert first.eval.val_bytes > 0
    assert cols.offset_row.tolist() == list(range(0, BATCH * STEPS, 16))
    # kept losses: each position with the same chance, capped for a tiny budget
    assert first.keep_rate == 0.02
    assert 20 <= len(cols.sample) <= 130  # ~61 of 3,072 expected
    assert len(bytes.fromhex(first.sample_secret)) == 32
    score = score_record(first, runner.settings.scoring)
    assert score.eligible, score.reasons
    # the vectorised readers of the packed columns score a recorded run as the per-step
    # loops over its entries did
    entries, s = list(cols.entries()), runner.settings.scoring
    assert score.tail_bpb == pytest.approx(old_tail_bpb(entries, s.tail_fraction), rel=1e-12)
    assert measures.window_bpbs(first, s.curve_windows, s.curve_window_tokens) == \
        pytest.approx(old_window_bpbs(entries, s.curve_windows, s.curve_window_tokens), rel=1e-12)
    assert measures.step0_nats_per_token(first) == pytest.approx(old_step0(entries), rel=1e-12)
    stored = RunRecord.model_validate({**json.loads(first.model_dump_json()),
                                       "steps": first.steps_blob()})
    assert score_record(stored, s) == score
    uniform = math.log2(first.vocab_size) * first.budget.scored_tokens / first.budget.bytes
    assert score.prequential_bpb < uniform
    # run again against itself as the leader: an honest run is never stopped early
    plan = runner.early_stop_plan(score.bpb, 1, first)
    assert plan.checkpoints == (20, 39, 58, 77)
    second = runner.run(files, digest_of(files), tmp_path / "b", early_stop=plan)
    assert second.stopped_early is None and second.consumed.rows == second.budget.rows
    again = score_record(second, runner.settings.scoring)
    assert abs(again.prequential_bpb - score.prequential_bpb) < 1e-6
    assert second.columns.nats.tolist() == cols.nats.tolist()
    # same bundle, same round: the same held-out positions, so the same ranked bpb
    assert first.eval.heldout_commit == second.eval.heldout_commit == LOCAL_ROUND.commit
    assert second.eval.val_bpb_trained == first.eval.val_bpb_trained
    assert 0 < first.eval.val_bpb_trained_se < 0.5 and first.eval.val_bpb_twin_se > 0
    assert abs(again.bpb - score.bpb) < 1e-9
    assert score.heldout_se == first.eval.val_bpb_trained_se


def test_two_process_gloo_run_and_its_replay_checks_every_rank(make_runner, tmp_path):
    runner = make_runner(tiny_settings(nproc_per_node=2))
    files = bundle("tiny")
    record = runner.run(files, digest_of(files), tmp_path / "ddp")
    assert record.exit_reason == "ok", record.exit_detail
    assert record.axes.world_size == 2
    assert set(record.columns.rank.tolist()) == {0, 1}
    assert record.consumed.rows == record.budget.rows
    offsets = sorted(record.columns.offset_row.tolist())
    assert offsets == list(range(0, record.budget.rows, BATCH))  # disjoint, in stream order
    assert record.eval.val_bpb_trained is not None
    replay = runner.replay(files, record, tmp_path / "ddp-replay")
    assert verdict(replay, runner.settings.verification).passed
    assert replay.batches_compared == record.summary.count
    assert replay.probes.ranks == [0, 1] and replay.snapshots.ranks
    assert replay.probes.mismatched == 0 and replay.probes.compared >= 2 * BATCH
    # every rank streamed its snapshot to the feeder: each reached the eval sandbox's inputs
    handed = sorted(p.name for p in (tmp_path / "ddp-replay" / "eval_inputs").glob("step_*"))
    assert replay.missing == [] and handed == [
        f"step_{s:08d}_rank{r}.pt" for s in replay.snapshot_steps for r in (0, 1)]


def test_a_tamper_on_rank_1_only_is_caught_by_the_replay(make_runner, tmp_path):
    """training.py halves the harness's per-position loss in-process, on rank 1 only."""
    runner = make_runner(tiny_settings(nproc_per_node=2))
    files = bundle("tamper")
    files["training.py"] = files["training.py"].replace(
        b"harness_context.token_nats = _halved\n", b"").replace(
        b"def train(ctx):\n", b"def train(ctx):\n    if ctx.rank == 1:\n"
        b"        harness_context.token_nats = _halved\n")
    record = runner.run(files, digest_of(files), tmp_path / "ddp")
    assert record.exit_reason == "ok", record.exit_detail
    replay = runner.replay(files, record, tmp_path / "ddp-replay")
    check = verdict(replay, runner.settings.verification)
    assert not check.passed
    assert {r.split(":")[0] for r in check.reasons} >= {"probe", "snapshot"}
    # the replay's probes and the eval sandbox's snapshot re-predictions (losses the host
    # computes) both find rank 1's losses halved, and nothing on rank 0
    for examples in (replay.probes.examples, replay.snapshots.examples):
        assert examples and {e.rank for e in examples} == {1}
        assert examples[0].recomputed == pytest.approx(2 * examples[0].recorded, rel=1e-3)


def test_early_return_is_charged_for_unconsumed_tokens(run):
    files = bundle("tiny")
    files["training.py"] = files["training.py"].replace(
        b"        opt.step()\n", b"        opt.step()\n        break\n")
    record = run(files)
    assert record.exit_reason == "ok"
    assert record.consumed.rows == BATCH
    assert "before the token budget" in record.exit_detail


def test_compiled_forward_runs_in_the_sandbox_and_its_replay_agrees(make_runner, tmp_path):
    """`ctx.batches(compile=True)`: inductor builds inside the sandbox (gcc from the read-only
    /usr, caches in /scratch, which must hold its ~150 MB precompiled header), and the replay
    (which compiles the snapshots' model too) reproduces the record. The model is a bigram:
    every sandbox builds its kernels with gcc, and each kernel costs seconds. One snapshot:
    each snapshot's task process compiles the model again (a second one took a fifth of the
    test's time and checked nothing the first does not); snapshots are drawn among the steps
    that hold a kept position, so it is always compared."""
    files = bundle("bigram")
    files["training.py"] = files["training.py"].replace(b"ctx.batches(8)",
                                                        b"ctx.batches(8, compile=True)")
    settings = tiny_settings(challenge={"deadline_s": 180.0}, disk_bytes=2**30)
    runner = make_runner(settings.model_copy(update={
        "verification": settings.verification.model_copy(update={"snapshot_steps": 1})}))
    record = runner.run(files, digest_of(files), tmp_path / "compiled")
    assert record.exit_reason == "ok", record.exit_detail
    assert record.axes.compile is True
    assert record.consumed.rows == record.budget.rows
    replay = runner.replay(files, record, tmp_path / "compiled-replay")
    assert verdict(replay, runner.settings.verification).passed, replay.model_dump()
    assert len(replay.snapshot_steps) == 1 and replay.snapshots.compared > 0
