"""`prism eval` for real: full (tiny) budget in the sandbox, report, record, score and curve."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from miner_kit import BUDGET_ROWS, copy_example, prism, prism_in_process

from prism_challenge.sandbox.record import RunRecord


def test_eval_conv_mixer_on_data_without_a_val_split(tiny_config, prepared_data, tmp_path):
    root = shutil.copytree(prepared_data, tmp_path / "data")
    manifest = json.loads((root / "MANIFEST.json").read_text())
    for shard in manifest["splits"]["val"]["shards"]:
        (root / shard["file"]).unlink()
    bundle = copy_example("conv_mixer", tmp_path / "conv")
    out = tmp_path / "out"
    res = prism_in_process("eval", str(bundle), "-c", str(tiny_config), "--data-root",
                           str(root), "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    record = RunRecord.model_validate({**json.loads((out / "record.json").read_text()),
                                       "steps": (out / "steps.npz").read_bytes()})
    assert record.exit_reason == "ok" and len(record.columns) == record.summary.count > 1
    assert int(record.columns.rows.sum()) == BUDGET_ROWS
    assert record.consumed.rows == record.budget.rows == BUDGET_ROWS
    assert record.axes.module_census.get("RMSNorm", 0) == 9
    summary = json.loads((out / "score.json").read_text())
    assert summary["val_source"].startswith(f"held-out train rows {BUDGET_ROWS:,}..")
    score = summary["score"]
    assert score["eligible"] is True and score["reasons"] == []
    assert score["prequential_bpb"] < score["uniform_bpb"]
    assert score["heldout_delta"] > 0
    assert summary["axes"]["arms"]["norm"] == "rmsnorm"
    assert summary["axes"]["arms"]["optimizer"] == "adamw"
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "learning_curve.png").stat().st_size > 10_000
    assert "held-out numbers from held-out train rows" in res.stdout
    assert re.search(rf"prequential bpb\s+│\s+{score['prequential_bpb']:.4f}", res.stdout)
    assert f"ELIGIBLE: a validator would rank this run at {score['bpb']:.4f} bpb" in res.stdout
    assert f"{BUDGET_ROWS}/{BUDGET_ROWS}" in res.stderr  # the progress bar's rows
    # ctx.log (every 20 steps: once here) is kept in the record and shown
    (point,) = record.telemetry
    assert set(point.values) == {"loss", "lr"} and point.values["lr"] > 0
    step, loss = point.step, point.values["loss"]
    assert re.search(rf"loss\s+│\s+1\s+│\s+{step}\.\.{step}\s+│\s+{loss:.4g}\s", res.stdout)


def test_eval_refuses_a_policy_violation_and_writes_nothing(tiny_config, prepared_data,
                                                           tmp_path):
    bundle = copy_example("baseline", tmp_path / "bad")
    (bundle / "architecture.py").write_text(
        "import torch\n\n\ndef build_model(ctx):\n    return torch.load('w.pt')\n")
    out = tmp_path / "out"
    res = prism_in_process("eval", str(bundle), "-c", str(tiny_config), "--data-root",
                           str(prepared_data), "--out", str(out))
    assert res.exit_code == 1
    assert "refused by the static gates (not run)" in res.stdout
    assert re.search(r"policy\s+│\s+FAIL\s+│\s+\S+ architecture.py:5", res.stdout)
    assert not out.exists()


def test_eval_without_data_names_the_prepare_command(tiny_config, tmp_path):
    bundle = copy_example("baseline", tmp_path / "b")
    res = prism_in_process("eval", str(bundle), "-c", str(tiny_config), "--data-root",
                           str(tmp_path / "none"), "--out", str(tmp_path / "out"))
    assert res.exit_code == 2
    assert f"prism prepare-data --source demo --out {tmp_path / 'none'}" in res.stderr
    assert not (tmp_path / "out").exists()


PROGRESS_LINE = re.compile(r"^\[progress \+(\d+\.\d) s\] (.+)$", re.M)


def printing_baseline(dest):
    """The baseline with a print() in its training loop (its output is the miner's own)."""
    bundle = copy_example("baseline", dest)
    text = (bundle / "training.py").read_text()
    old = "        if step % 20 == 0:\n"
    assert old in text
    (bundle / "training.py").write_text(text.replace(
        old, '        print(f"PRINTED step {step}")\n' + old, 1))
    return bundle


@pytest.fixture(scope="module")
def printed_eval(guide_run, tiny_config, prepared_data, tmp_path_factory):
    """One `prism eval` of the printing baseline, off a terminal, a progress line a second,
    compared with the guide's stored eval of the plain baseline (same machine and config)."""
    folder, ran = guide_run
    (argv, _), = [(argv, res) for argv, res in ran if argv[1] == "eval"]
    stored = folder / argv[argv.index("--out") + 1]
    tmp = tmp_path_factory.mktemp("printed")
    out = tmp / "out"
    res = prism("eval", str(printing_baseline(tmp / "printing")), "-c", str(tiny_config),
                "--data-root", str(prepared_data), "--out", str(out), "--progress-every", "1",
                "--compare", str(stored), timeout=560)
    return res, out, stored


@pytest.mark.timeout(600)  # one full eval with its replay; slow only on a loaded machine
def test_eval_progress_lines_in_every_phase_and_the_loops_print(printed_eval):
    """Off a terminal every phase prints progress lines at the configured interval (at
    most 10 s apart); the loop's print() reaches the record and the report."""
    res, out, _ = printed_eval
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [(float(t), text) for t, text in PROGRESS_LINE.findall(res.stderr)]
    times = [t for t, _ in lines]
    assert times == sorted(times) and len(lines) >= 10
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) <= 10.0
    for phase in ("training: ", "held-out evaluation: ", "replay: "):
        assert any(text.startswith(phase) for _, text in lines), phase
    assert any(re.match(rf"training: {BUDGET_ROWS}/{BUDGET_ROWS} rows \(100%\), "
                        r"[\d,]+ tokens( at [\d,]+ tokens/s)?, loss \d+\.\d{3} nats/token "
                        r"\(step \d+\)", text) for _, text in lines)
    # 256 of the trained model, the same 256 of its twin, and each model's recheck of a
    # block of its 32 rows
    assert any(re.match(r"held-out evaluation: [\d,]+/576 positions", text)
               for _, text in lines)
    record = RunRecord.model_validate({**json.loads((out / "record.json").read_text()),
                                       "steps": (out / "steps.npz").read_bytes()})
    steps = len(set(record.columns.step.tolist()))
    assert [ln for ln in record.train_output.splitlines() if ln.startswith("PRINTED")] == [
        f"PRINTED step {i}" for i in range(steps)]
    assert f"  | PRINTED step {steps - 1}\n" in res.stdout


@pytest.mark.timeout(600)
def test_eval_compare_prints_the_paired_held_out_difference(printed_eval):
    """`--compare` with a stored reference (the guide's eval of the plain baseline): the
    printing baseline side by side with it, the held-out difference paired on the same plan,
    and the same ranked bpb printed by both runs."""
    res, out, stored = printed_eval
    assert res.returncode == 0, res.stdout + res.stderr
    assert "compared with the reference (same machine and config)" in res.stdout
    assert "baseline (stored)" in res.stdout and "not like for like" not in res.stdout
    paired = re.search(r"held-out difference: ([+-]\d\.\d{4}) ± (\d\.\d{4}) bpb \(paired "
                       r"over (\d+) rows of the same held-out plan", res.stdout)
    assert paired, res.stdout
    mine = RunRecord.model_validate_json((out / "record.json").read_text()).eval
    theirs = RunRecord.model_validate_json((stored / "record.json").read_text()).eval
    assert int(paired[3]) == len(mine.val_row_bits) == 64  # 256 positions, 4 cuts a row
    assert abs(float(paired[1]) - (mine.val_bpb_trained - theirs.val_bpb_trained)) < 2e-4
    # The two bundles differ only by a print() in the loop: the same training, so two
    # `prism eval` runs print the same ranked bpb and the same held-out figures.
    ranked = json.loads((stored / "score.json").read_text())["score"]["bpb"]
    assert f"ELIGIBLE: a validator would rank this run at {ranked:.4f} bpb" in res.stdout
    assert mine.val_bpb_trained == theirs.val_bpb_trained
