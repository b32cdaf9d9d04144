"""`prism eval` for real: full (tiny) budget in the sandbox, report, record, score and curve."""

from __future__ import annotations

import json
import re
import shutil

from miner_kit import BUDGET_ROWS, copy_example, prism, prism_in_process

from prism_challenge.sandbox.record import RunRecord


def test_eval_conv_mixer_on_data_without_a_val_split(tiny_config, prepared_data, tmp_path):
    root = shutil.copytree(prepared_data, tmp_path / "data")
    manifest = json.loads((root / "MANIFEST.json").read_text())
    for shard in manifest["splits"]["val"]["shards"]:
        (root / shard["file"]).unlink()
    bundle = copy_example("conv_mixer", tmp_path / "conv")
    out = tmp_path / "out"
    res = prism("eval", str(bundle), "-c", str(tiny_config), "--data-root", str(root),
                "--out", str(out))
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
