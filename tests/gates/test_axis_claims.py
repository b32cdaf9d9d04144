"""Declared axes the code contradicts: flagged with the fix by `prism check`'s static
findings and in the validator's gate reason (shown on the submission page), never refused."""

from __future__ import annotations

from pathlib import Path

from gates_helpers import row_of, submit

from prism_challenge.bundle import Bundle
from prism_challenge.config import Settings
from prism_challenge.gates import GateStage
from prism_challenge.gates.axis_claims import axis_contradictions
from prism_challenge.miner.findings import failed, static_findings
from prism_challenge.storage import Status

NOW = 3_000_000.0
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_files(name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (EXAMPLES / name).iterdir() if p.is_file()
            and p.suffix in (".py", ".toml")}


def nadam_baseline() -> dict[str, bytes]:
    """The baseline, still declaring adamw, with NAdam constructed instead."""
    files = example_files("baseline")
    text = files["training.py"].decode()
    assert "torch.optim.AdamW(" in text
    files["training.py"] = text.replace("torch.optim.AdamW(", "torch.optim.NAdam(").encode()
    return files


def test_every_example_declares_what_its_code_does():
    for name in ("baseline", "conv_mixer", "muon", "small_batch", "nanogpt_port",
                 "autoresearch_port"):
        files = example_files(name)
        declared = Bundle(files).meta.axes
        assert declared and axis_contradictions(files, declared) == [], name


def test_a_declared_optimiser_that_is_not_constructed_is_flagged_with_the_fix():
    files = nadam_baseline()
    [line] = axis_contradictions(files, {"optimizer": "adamw", "norm": "layernorm"})
    assert line.startswith('declared axis optimizer = "adamw" but the code never names adamw')
    assert "construct that optimiser in train(ctx), or declare the one you construct" in line
    # prism check's static findings: a warning (the run still happens), not a failure
    findings = static_findings(Bundle(files))
    warns = [f for f in findings if f.status == "warn"]
    assert [f.detail for f in warns] == [line] and not failed(findings)


def test_bf16_and_compile_declared_without_them_in_the_code():
    files = example_files("baseline")
    lines = axis_contradictions(files, {"precision": "bf16", "compile": "true",
                                        "position": "rope", "norm": "none", "lr": 0.001})
    assert [ln.split(" but ")[0] for ln in lines] == [
        'declared axis compile = "true"', 'declared axis position = "rope"',
        'declared axis precision = "bf16"']
    assert "autocast_dtype=torch.bfloat16" in lines[2]
    text = files["training.py"].decode().replace(
        "ctx.batches(batch_size)",
        "ctx.batches(batch_size, autocast_dtype=torch.bfloat16, compile=True)")
    assert "compile=True" in text
    assert axis_contradictions({"training.py": text}, {"precision": "bf16",
                                                       "compile": "true"}) == []


def test_the_gate_queues_the_bundle_and_its_reason_carries_the_flag(store):
    sid = submit(store, Bundle(nadam_baseline()), "hk-a", NOW)
    stage = GateStage(Settings(llm={"enabled": False}), store, reviewer=None)
    [outcome] = stage.process_due(NOW)
    assert outcome.status == Status.QUEUED
    reason = row_of(store, sid).reason
    assert reason.startswith("gates passed (LLM review disabled)\naxis flag: declared axis "
                             'optimizer = "adamw" but the code never names adamw')
    # an agreeing declaration adds nothing
    sid2 = submit(store, Bundle(example_files("conv_mixer")), "hk-b", NOW + 1)
    stage.process_due(NOW + 2)
    assert row_of(store, sid2).reason == "gates passed (LLM review disabled)"
