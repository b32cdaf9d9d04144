"""`prism check` for real: the real bubblewrap sandbox, the prepared data, the CLI in a process
of its own (the passing example) or in this one (the failures: the same command through
typer's CliRunner, without a second `import torch` and prewarmed interpreter per check)."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from miner_kit import copy_example, prism, prism_in_process
from record_kit import synthetic_record

from prism_challenge.config.settings import Settings
from prism_challenge.miner.check import _run_findings


def _check(bundle, tiny_config, data_root, *extra, timeout: float = 240):
    return prism("check", str(bundle), "-c", str(tiny_config), "--data-root", str(data_root),
                 *extra, timeout=timeout)


def _check_fast(bundle, config, data_root, *extra):
    """In-process: the same command, sandboxes included, in the test's process."""
    return prism_in_process("check", str(bundle), "-c", str(config), "--data-root",
                            str(data_root), *extra)


def test_check_passes_the_example(tiny_config, prepared_data, tmp_path):
    """small_batch takes one row a step: 64 batches. (The miner guide's test checks baseline,
    the wheel's test checks it from an installed package.)"""
    name, batches = "small_batch", 64
    # brackets in the path: printed as written, never taken for console markup
    res = _check(copy_example(name, tmp_path / f"[b]{name}"), tiny_config, prepared_data)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "smoke run of 64 rows" in out
    assert re.search(r"parameters\s+│\s+pass\s+│\s+466,432 of the cap 150,000,000", out)
    assert re.search(rf"smoke run\s+│\s+pass\s+│\s+64/64 rows consumed in {batches} batches, "
                     "exit ok", out)
    assert re.search(r"gates\s+│\s+pass", out) and "FAIL" not in out
    assert "PASS: next, `prism eval" in out and f"[b]{name}`" in out.replace("\n", "")
    assert "training in the sandbox" in res.stderr


@pytest.mark.timeout(600)  # two smoke runs: the first is refused for its batch
def test_check_fails_a_model_that_leaks_only_while_scored(tiny_config, prepared_data, tmp_path):
    """docs/security.md B3 + B5: attention that sees the future only in the scored forward's mode
    (train mode, grad on), causal in eval mode; the probe runs in both modes and catches it.

    Also the smoke budget sized to the bundle: 32 rows make 16 lanes of 2 rows, so a step may
    take 15 and the baseline's batch of 16 would be refused by the smoke budget, not by a
    validator. The check raises the budget to the fewest rows that fit (33) and says so."""
    bundle = copy_example("baseline", tmp_path / "leaky")
    arch = bundle / "architecture.py"
    text = arch.read_text()
    old = "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
    assert old in text
    arch.write_text(text.replace(old, (
        "        leak = self.training and torch.is_grad_enabled()\n"
        "        y = F.scaled_dot_product_attention(q, k, v, is_causal=not leak)\n")))
    res = _check_fast(bundle, tiny_config, prepared_data, "--smoke-rows", "32")
    assert res.returncode == 1, res.stdout + res.stderr
    assert re.search(r"policy\s+│\s+pass", res.stdout)  # statically fine: only running shows it
    assert re.search(r"smoke budget\s+│\s+info\s+│\s+raised from 32 to 33 rows: the bundle's "
                     r"batch needs 33 .*--smoke-rows 33", res.stdout)
    # the run ends; only the probe fails
    assert re.search(r"smoke run\s+│\s+pass\s+│\s+33/33 rows consumed in 3 batches", res.stdout)
    assert re.search(r"gate causality\s+│\s+FAIL\s+│\s+causality:", res.stdout)
    assert "smoke run of 33 rows" in res.stdout and "batch_size 16 is over" not in res.stdout
    assert re.search(r"FAIL: \d+ check\(s\) failed", res.stdout)


def test_check_refuses_a_policy_violation_without_running_it(tiny_config, prepared_data,
                                                             tmp_path):
    bundle = copy_example("baseline", tmp_path / "bad")
    (bundle / "training.py").write_text(
        "import subprocess\n\n\ndef train(ctx):\n    subprocess.run(['true'])\n")
    res = _check_fast(bundle, tiny_config, prepared_data)
    assert res.returncode == 1
    assert re.search(r"policy\s+│\s+FAIL\s+│\s+\S+ training.py:1", res.stdout)
    assert re.search(r"smoke run\s+│\s+skip\s+│\s+not run", res.stdout)
    assert "training in the sandbox" not in res.stderr + res.stdout


def test_check_reports_bundle_rule_failures(tiny_config, prepared_data, tmp_path):
    bundle = copy_example("baseline", tmp_path / "extra")
    (bundle / "notes.txt").write_text("hello")
    res = _check_fast(bundle, tiny_config, prepared_data)
    assert res.returncode == 1
    assert "FAIL bundle [BUNDLE_" in res.stdout and "notes.txt" in res.stdout


def test_check_usage_and_data_errors_exit_2(tiny_config, prepared_data, tmp_path):
    example = copy_example("baseline", tmp_path / "b")
    res = _check_fast(tmp_path / "missing", tiny_config, prepared_data)
    assert res.returncode == 2 and "no such bundle folder" in res.stderr
    res = _check_fast(example / "training.py", tiny_config, prepared_data)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert f"training.py is a file: give the bundle folder that holds architecture.py and " \
           f"training.py ({example})" in res.stderr
    nowhere = tmp_path / "no-data"
    res = _check_fast(example, tiny_config, nowhere)
    assert res.returncode == 2
    assert f"prism prepare-data --source demo --out {nowhere}" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("challenge:\n  seq_lenn: 32\n")
    res = _check_fast(example, bad, prepared_data)
    assert res.returncode == 2 and "seq_lenn" in res.stderr
    huge = tmp_path / "huge.yaml"
    huge.write_text("challenge:\n  seq_len: 32\n  token_budget: 3200000\n")
    res = _check_fast(example, huge, prepared_data, "--smoke-rows", "1000000")
    assert res.returncode == 2 and "does not fit the data" in res.stderr
    assert not nowhere.exists()  # a refused check creates nothing


def test_a_model_of_the_wrong_type_is_reported_once(tiny_config, prepared_data, tmp_path):
    """One violation, one line: a build_model that returns the wrong type fails the smoke run
    with the contract's message and the fix; no knock-on parameter or gate line repeats it."""
    bundle = copy_example("baseline", tmp_path / "wrong_type")
    arch = bundle / "architecture.py"
    text = arch.read_text()
    old = "    return TinyGPT(ctx.vocab_size, ctx.seq_len)\n"
    assert old in text
    arch.write_text(text.replace(old, "    return [TinyGPT(ctx.vocab_size, ctx.seq_len)]\n"))
    res = _check_fast(bundle, tiny_config, prepared_data, "--smoke-rows", "32")
    assert res.returncode == 1, res.stdout + res.stderr
    failed = [line for line in res.stdout.splitlines() if re.search(r"│\s+FAIL\s+│", line)]
    assert len(failed) == 1 and "smoke run" in failed[0], res.stdout
    assert "exit contract" in failed[0] and "build_model" in res.stdout
    assert "FAIL: 1 check(s) failed" in res.stdout


def test_smallest_smoke_budget_matches_the_stream_order():
    """The fewest rows for a batch, against the stream order's own step limit."""
    from prism_challenge.config import Settings
    from prism_challenge.miner.check import smallest_rows
    from prism_challenge.sandbox.stream_order import LaneOrder

    settings = Settings(challenge={"stream_lanes": 256}, sandbox={"nproc_per_node": 2})
    for batch, rows in ((1, 5), (8, 33), (16, 65), (127, 509)):
        assert smallest_rows(batch, settings) == rows
        assert LaneOrder(rows, 256).max_step_rows // 2 >= batch
        assert LaneOrder(rows - 1, 256).max_step_rows // 2 < batch
    assert smallest_rows(128, settings) is None  # 2 ranks x 128 rows: more than 255 lanes


def _with_nats(record, nats):
    return record.model_copy(update={"steps": dataclasses.replace(record.columns, nats=nats)})


def test_the_learning_line_compares_the_mean_of_each_end_not_one_batch():
    """A falling run whose last batch held harder text than its first: one batch at each
    end said "does not fall"; the first and last 10% of the steps say what the run did."""
    record = synthetic_record(40, ranks=2)
    cols = record.columns
    per_byte = np.linspace(3.0, 2.0, 40)[cols.step]  # nats per byte, falling step by step
    per_byte[cols.step == 39] = 3.5  # the last step's batches: harder text
    record = _with_nats(record, per_byte * cols.bytes)
    [line] = [f for f in _run_findings(record, Settings()) if f.check == "learning"]
    head = cols.step < 4  # both ranks' batches of steps 0-3, weighted by their bytes
    first = (per_byte[head] * cols.bytes[head]).sum() / cols.bytes[head].sum() / math.log(2)
    assert line.detail.startswith(
        f"bpb of the first 4 and the last 4 of 40 steps (10% at each end): {first:.3f} -> ")
    assert line.detail.endswith(": falls")


def test_a_two_step_run_compares_its_first_and_last_step():
    record = synthetic_record(2)
    cols = record.columns
    record = _with_nats(record, np.array([4.0, 3.0]) * math.log(2) * cols.bytes)
    [line] = [f for f in _run_findings(record, Settings()) if f.check == "learning"]
    assert line.detail == "bpb of the first and the last of 2 steps: 4.000 -> 3.000: falls"
    assert not [f for f in _run_findings(synthetic_record(1), Settings())
                if f.check == "learning"]
