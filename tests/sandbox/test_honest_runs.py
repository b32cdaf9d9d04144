"""A baseline bundle runs end to end in the real sandbox and yields an honest record."""

from __future__ import annotations

import math
from pathlib import Path

from sandbox_kit import BATCH, STEPS, bundle, digest_of, tiny_settings

from prism_challenge.scoring import score_record

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
    assert [b.step for b in first.batches] == list(range(len(first.batches)))
    assert first.axes.optimizers[0].cls == "AdamW"
    assert first.axes.batch_size == 16 and first.axes.layer_count == 2
    assert first.eval.val_bpb_trained < first.eval.val_bpb_twin
    assert first.eval.probe_trained.ok and first.eval.probe_twin.ok
    assert first.audits[0].step == 0 and all(a.ok for a in first.audits)
    assert first.eval.step0_weights_match_twin is True
    score = score_record(first, runner.settings.scoring)
    assert score.eligible, score.reasons
    uniform = math.log2(first.vocab_size) * first.budget.scored_tokens / first.budget.bytes
    assert score.prequential_bpb < uniform
    second = runner.run(files, digest_of(files), tmp_path / "b")
    again = score_record(second, runner.settings.scoring)
    assert abs(again.prequential_bpb - score.prequential_bpb) < 1e-6
    assert [b.nats for b in second.batches] == [b.nats for b in first.batches]


def test_two_process_gloo_run(make_runner, tmp_path):
    runner = make_runner(tiny_settings(nproc_per_node=2))
    files = bundle("tiny")
    record = runner.run(files, digest_of(files), tmp_path / "ddp")
    assert record.exit_reason == "ok", record.exit_detail
    assert record.axes.world_size == 2
    assert {b.rank for b in record.batches} == {0, 1}
    assert record.consumed.rows == record.budget.rows
    offsets = sorted(b.offset_row for b in record.batches)
    assert offsets == list(range(0, record.budget.rows, BATCH))  # disjoint, in stream order
    assert all(a.ok for a in record.audits) and record.eval.val_bpb_trained is not None


def test_early_return_is_charged_for_unconsumed_tokens(run):
    files = bundle("tiny")
    files["training.py"] = files["training.py"].replace(
        b"        opt.step()\n", b"        opt.step()\n        break\n")
    record = run(files)
    assert record.exit_reason == "ok"
    assert record.consumed.rows == BATCH
    assert "before the token budget" in record.exit_detail


def test_compiled_forward_runs_in_the_sandbox_and_audits_agree(make_runner, tmp_path):
    """`ctx.batches(compile=True)`: inductor builds inside the sandbox (gcc from the read-only
    /usr, caches in /scratch, which must hold its ~100 MB), and the uncompiled audit replay
    agrees with the record."""
    files = bundle("tiny")
    files["training.py"] = files["training.py"].replace(b"ctx.batches(8)",
                                                        b"ctx.batches(8, compile=True)")
    runner = make_runner(tiny_settings(disk_bytes=2**30))
    record = runner.run(files, digest_of(files), tmp_path / "compiled")
    assert record.exit_reason == "ok", record.exit_detail
    assert record.axes.compile is True
    assert record.consumed.rows == record.budget.rows
    assert len(record.audits) >= 2 and all(a.ok for a in record.audits)
