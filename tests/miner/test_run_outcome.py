"""A run that stops short of its budget says why in one line: the exception and the bundle's
line that raised it, the memory limit, or train() returning early, each with what to do
next; the traceback follows below the report, whole. And an `--out` folder reused for a run
without a replay keeps no replay of an earlier run."""

from __future__ import annotations

import json
import re

from miner_kit import EXAMPLES, copy_example, prism_in_process
from record_kit import synthetic_record

from prism_challenge.config.settings import Settings
from prism_challenge.isolation.spec import Limits, human_bytes
from prism_challenge.isolation.supervise import memory_limit_reached
from prism_challenge.miner import sandbox_run
from prism_challenge.miner.check import _run_findings
from prism_challenge.miner.outcome import crash_cause, host_out_of_memory, run_problem
from prism_challenge.miner.sandbox_run import LocalRunFailed, run_in_sandbox
from prism_challenge.sandbox.record import Consumed

RAISE = '            raise ValueError("shapes do not match: 16 vs 32")'
CRASH_CAUSE = f"ValueError: shapes do not match: 16 vs 32 (training.py line 25, in train: " \
              f"{RAISE.strip()})"
FIX = "fix it, then run `prism check` again"
SMALLER = "make the model or the batch size smaller, or keep fewer tensors alive in train()"
TYPO = "    return TinyGTP(ctx.vocab_size, ctx.seq_len)\n"


def _crashing_train(tmp_path):
    """The baseline whose train() raises in its third step (after 3 batches were scored)."""
    bundle = copy_example("baseline", tmp_path / "crash")
    training = bundle / "training.py"
    old = "        batch.loss.backward()\n"
    assert old in training.read_text()
    training.write_text(training.read_text().replace(
        old, f"{old}        if step == 2:\n{RAISE}\n"))
    assert training.read_text().splitlines()[24] == RAISE  # line 25, as CRASH_CAUSE says
    return bundle


def _run(command, bundle, config, data_root, *extra):
    return prism_in_process(command, str(bundle), "-c", str(config), "--data-root",
                            str(data_root), *extra)


def _row(text: str, name: str) -> str:
    """The detail cell of a report table's row `name` (one line: COLUMNS is 400)."""
    found = re.search(rf"^│ {re.escape(name)}\s+│ (.*?)\s+│$", text, flags=re.M)
    assert found, text
    return found.group(1)


def test_check_names_the_exception_and_the_line_of_a_crash_in_train(tiny_config, prepared_data,
                                                                  tmp_path):
    res = _run("check", _crashing_train(tmp_path), tiny_config, prepared_data)
    assert res.returncode == 1, res.stdout
    smoke = re.search(r"^│ smoke run\s+│ FAIL\s+│ (.*?)\s+│$", res.stdout, flags=re.M)
    assert smoke, res.stdout
    assert smoke.group(1) == (f"48/64 rows consumed in 3 batches, exit crash: the run crashed "
                              f"at row 48 of 64 with {CRASH_CAUSE}; {FIX}")
    below = res.stdout.split("└", 1)[1]  # the traceback, whole, after the table
    assert '  |   File "/submission/training.py", line 25, in train' in below
    assert "  | ValueError: shapes do not match: 16 vs 32" in below
    assert "Traceback" not in res.stdout.split("└", 1)[0]


def test_eval_verdict_says_a_crashed_run_was_charged_and_why(tiny_config, prepared_data,
                                                             tmp_path):
    """A crash is charged (the unconsumed tokens at log2 V bits), not zeroed: the run stays
    eligible, and the verdict says it crashed, where, and what to do."""
    out = tmp_path / "out"
    res = _run("eval", _crashing_train(tmp_path), tiny_config, prepared_data, "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    score = json.loads((out / "score.json").read_text())["score"]
    what = f"the run crashed at row 48 of 96 with {CRASH_CAUSE}"
    assert res.stdout.strip().splitlines()[-1] == (
        f"ELIGIBLE: a validator would rank this run at {score['bpb']:.4f} bpb, and its replay "
        f"verifies it (but {what}: {score['unconsumed_tokens']:,} unconsumed tokens charged "
        f"at log2 V bits each; {FIX})")
    assert score["unconsumed_tokens"] > 0
    assert _row(res.stdout, "exit") == f"crash: {what}"
    assert "  | ValueError: shapes do not match: 16 vs 32" in res.stdout


def test_eval_of_a_model_that_cannot_be_built_keeps_no_earlier_replay(tiny_config,
                                                                      prepared_data, tmp_path):
    bundle = copy_example("baseline", tmp_path / "typo")
    arch = bundle / "architecture.py"
    assert TYPO.replace("GTP", "GPT") in arch.read_text()
    arch.write_text(arch.read_text().replace(TYPO.replace("GTP", "GPT"), TYPO))
    line = arch.read_text().splitlines().index(TYPO.rstrip("\n")) + 1
    out = tmp_path / "out"
    out.mkdir()
    (out / "replay.json").write_text("{}")  # an earlier run's, in the same folder
    res = _run("eval", bundle, tiny_config, prepared_data, "--out", str(out))
    assert res.returncode == 1, res.stdout + res.stderr
    assert not (out / "replay.json").exists()
    assert {p.name for p in out.iterdir()} == {"record.json", "score.json", "steps.npz",
                                              "learning_curve.png"}
    crash = (f"the run crashed at row 0 of 96 with NameError: name 'TinyGTP' is not defined "
             f"(architecture.py line {line}, in build_model: {TYPO.strip()})")
    assert _row(res.stdout, "exit") == f"crash: {crash}"
    assert res.stdout.strip().splitlines()[-1] == f"NOT ELIGIBLE: see the gates ({crash}; {FIX})"


def test_a_crash_inside_a_library_says_no_line_of_the_bundle_was_kept():
    kept = ('  File "/venv/torch/nn/modules/linear.py", line 134, in forward\n'
            "    return F.linear(input, self.weight, self.bias)\n"
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2048x512 and 256x128)\n")
    assert crash_cause(kept) == (
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2048x512 and 256x128) "
        "(raised inside a library: the frames the sandbox kept hold no line of your bundle, "
        "so look for the call of yours that reaches it)")
    assert crash_cause("Segmentation fault\n") == "Segmentation fault"


def test_the_memory_limit_and_an_early_return_each_say_what_to_do():
    finished = synthetic_record(8, rows=2)
    assert run_problem(finished) is None
    short = Consumed(rows=4, scored_tokens=100, bytes=400, nats=50.0)
    memory = finished.model_copy(update={
        "exit_reason": "memory", "consumed": short,
        "exit_detail": "memory limit of 8589934592 bytes reached"})
    assert run_problem(memory).line == (
        "the run reached the sandbox's memory limit of 8.0 GiB (sandbox.memory_bytes) at row 4 "
        f"of 16; {SMALLER}; the validators run under their own limit, so raise "
        "sandbox.memory_bytes in your config only to match theirs on this machine")
    early = finished.model_copy(update={
        "consumed": short, "exit_detail": "train() returned before the token budget was consumed"})
    assert run_problem(early).line == (
        "train(ctx) returned at row 4 of 16; iterate ctx.batches(...) to its end: every token "
        "left is charged at log2 V bits")


def test_byte_counts_read_in_gib_and_mib():
    assert [human_bytes(n) for n in (8 * 2**30, 3 * 2**20 // 2, 2048, 1000)] == [
        "8.0 GiB", "1.5 MiB", "2.0 KiB", "1000 bytes"]


def test_a_limit_the_sandbox_already_wrote_in_gib_reads_as_one_written_in_bytes():
    """Details the isolation layer writes now ("of 8.0 GiB") give the same lines as those of
    records stored before it did ("of 8589934592 bytes")."""
    limits = Limits(wall_s=1, memory_bytes=8 * 2**30, pids_max=1, disk_bytes=1, output_bytes=1)
    short = Consumed(rows=4, scored_tokens=100, bytes=400, nats=50.0)
    memory = synthetic_record(8, rows=2).model_copy(update={
        "exit_reason": "memory", "consumed": short,
        "exit_detail": memory_limit_reached(limits)})
    assert run_problem(memory).what == (
        "the run reached the sandbox's memory limit of 8.0 GiB (sandbox.memory_bytes) at row 4 "
        "of 16")
    host = host_out_of_memory(
        "killed by the host's OOM killer while under its own limit of 8.0 GiB", " at row 4")
    assert host == host_out_of_memory(
        "killed by the host's OOM killer while under its own limit of 8589934592 bytes",
        " at row 4")
    assert host.startswith("this machine ran out of memory at row 4, before the run reached "
                           "the sandbox's limit of 8.0 GiB (the host's OOM killer ended it); ")


def test_the_host_running_out_of_memory_locally_says_so_in_gib_with_what_to_change(
        monkeypatch):
    """The host's OOM killer ends a run under its own limit: an `infra` record, which a
    local run turns into its one-line error; the limit in GiB, not 8589934592 bytes."""
    short = Consumed(rows=4, scored_tokens=100, bytes=400, nats=50.0)
    record = synthetic_record(8, rows=2).model_copy(update={
        "exit_reason": "infra", "consumed": short, "exit_detail":
        "killed by the host's OOM killer while under its own limit of 8589934592 bytes"})

    class Runner:
        def __init__(self, *args, **kwargs):
            pass

        def run(self, *args):
            return record

    monkeypatch.setattr(sandbox_run, "Runner", Runner)
    bundle = type("B", (), {"files": {}, "digest": "d" * 64})()
    data = type("D", (), {"train": None, "val": None})()
    try:
        run_in_sandbox(bundle, None, data, backend=object())
    except LocalRunFailed as exc:
        line = str(exc)
    else:
        raise AssertionError("an infra run must raise LocalRunFailed")
    assert line == (
        "this machine ran out of memory at row 4 of 16, before the run reached the sandbox's "
        f"limit of 8.0 GiB (the host's OOM killer ended it); {SMALLER}, or free memory here; "
        "to have the sandbox's own limit stop a run first, set sandbox.memory_bytes in your "
        "config below the memory this machine can spare")


def test_an_allocation_that_fails_inside_train_is_named_out_of_memory_in_gib():
    kept = ('  File "/submission/training.py", line 30, in train\n'
            "    big = torch.empty(1 << 34)\n"
            "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not "
            "enough memory: you tried to allocate 68719476736 bytes.\n")
    short = Consumed(rows=4, scored_tokens=100, bytes=400, nats=50.0)
    crash = synthetic_record(8, rows=2).model_copy(update={
        "exit_reason": "crash", "consumed": short, "exit_detail": kept})
    problem = run_problem(crash)
    assert problem.what == (
        "the run ran out of memory at row 4 of 16 with RuntimeError: [enforce fail at "
        "alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to "
        "allocate 64.0 GiB. (training.py line 30, in train: big = torch.empty(1 << 34))")
    assert problem.fix == f"{SMALLER}, then run `prism check` again"


def test_another_limit_in_the_smoke_run_line_reads_in_mib():
    short = Consumed(rows=4, scored_tokens=100, bytes=400, nats=50.0)
    disk = synthetic_record(8, rows=2).model_copy(update={
        "exit_reason": "disk", "consumed": short,
        "exit_detail": "scratch space over 67108864 bytes"})
    smoke = next(f for f in _run_findings(disk, Settings()) if f.check == "smoke run")
    assert smoke.detail.endswith("exit disk: scratch space over 64.0 MiB")


def test_eval_verdict_of_a_run_cut_by_the_memory_limit_says_what_to_change():
    from rich.console import Console

    from prism_challenge.bundle import Bundle
    from prism_challenge.miner.evaluate import EvalReport
    from prism_challenge.miner.render import print_eval
    from prism_challenge.registry.axes import AxisReading
    from prism_challenge.scoring import score_record

    record = synthetic_record(8, rows=2).model_copy(update={
        "exit_reason": "memory", "exit_detail": "memory limit of 3221225472 bytes reached"})
    report = EvalReport(Bundle.from_dir(EXAMPLES / "baseline"), [], record,
                        score_record(record, Settings().scoring), None, None, AxisReading(),
                        "the val split", "demo", 1.0, {})
    console = Console(width=400, record=True)
    print_eval(console, report)
    text = console.export_text()
    assert "memory: the run reached the sandbox's memory limit of 3.0 GiB" in text
    verdict = text.strip().splitlines()[-1]
    assert verdict.startswith("NOT ELIGIBLE") and "(cut by the memory limit:" in verdict
    assert verdict.endswith(f"charged; {SMALLER}; the validators run under their own limit, "
                            "so raise sandbox.memory_bytes in your config only to match "
                            "theirs on this machine)")
