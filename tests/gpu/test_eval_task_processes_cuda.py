"""On a real GPU: the eval sandbox answers every held-out task in a process of its own,
forked from an eval process that never touched CUDA; each makes its own CUDA context
(several prepared ahead), and the held-out figures are the same run after run. A build that
starts CUDA (forks of the eval process could not use it) is refused as the miner's error
before training, with the fix in the message."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from prism_challenge.config import Settings
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.runner import Runner

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "examples" / "baseline"


@pytest.fixture(scope="module")
def runner(prepared_data) -> Runner:
    settings = Settings(
        challenge={"seq_len": 128, "token_budget": 128 * 16 * 20, "deadline_s": 120.0},
        sandbox={"cpu_threads": 2, "memory_bytes": 16 * 2**30, "pids_max": 256,
                 "startup_grace_s": 120.0, "eval_time_s": 300.0},
        scoring={"heldout_positions": 512},
    )
    return Runner.from_data(settings, make_backend("bubblewrap"), prepared_data)


def _files(extra: bytes = b"") -> dict[str, bytes]:
    return {"architecture.py": (BASELINE / "architecture.py").read_bytes() + extra,
            "training.py": (BASELINE / "training.py").read_bytes()}


def _run(runner: Runner, files, folder: Path):
    return runner.run(files, hashlib.sha256(b"".join(files.values())).hexdigest(), folder)


def test_each_held_out_task_runs_in_its_own_cuda_process_with_the_same_figures(runner,
                                                                              tmp_path):
    first, second = (_run(runner, _files(), tmp_path / n) for n in ("a", "b"))
    assert first.exit_reason == second.exit_reason == "ok"
    assert first.eval.val_bpb_trained == second.eval.val_bpb_trained
    assert first.eval.val_bpb_twin == second.eval.val_bpb_twin
    profile = json.loads((tmp_path / "a" / "eval_scratch" / "eval_profile.json").read_text())
    # every forward and probe in a process of its own, each prepared (its context) ahead
    tasks = profile["counts"]["forward"] + profile["counts"]["probe"]
    assert profile["counts"]["spare_prepare"] >= tasks
    print("eval sandbox time (s):", profile["seconds"], "counts:", profile["counts"])


def test_a_build_that_starts_cuda_is_the_miners_error_before_training(runner, tmp_path):
    """Refused by the training sandbox right after the build (the eval could not fork from
    it), not after a whole run; `is_available()` in the build is fine."""
    record = _run(runner, _files(b"\nimport torch as _t\n_t.zeros(1, device='cuda')\n"),
                  tmp_path / "c")
    said = f"{record.exit_reason} {record.exit_detail}"
    assert record.exit_reason == "contract", said
    assert "used CUDA while its model was built" in said, said
    assert "(CUDA was started at architecture.py:" in said, said  # the line that did it
    asked = _run(runner, _files(b"\nimport torch as _t\nASKED = _t.cuda.is_available()\n"),
                 tmp_path / "d")
    assert asked.exit_reason == "ok" and asked.eval.val_tokens > 0, asked.eval


def test_the_kernel_warm_up_changes_no_held_out_figure(runner, tmp_path):
    """The spares' warm-up (`sandbox.eval_gpu_warmup`) loads kernels on constant inputs: the
    held-out figures of the same weights are identical with it on and off, at any spares."""
    from prism_challenge.sandbox.heldout_round import HeldOutRound

    files = _files()
    run = _run(runner, files, tmp_path / "w")
    assert run.exit_reason == "ok", run.exit_detail
    weights = tmp_path / "w" / "eval_inputs" / "final.pt"
    figures = []
    for spares, warm in ((3, False), (3, True), (6, True)):
        sandbox = runner.settings.sandbox.model_copy(update={"eval_gpu_spares": spares,
                                                             "eval_gpu_warmup": warm})
        on = Runner(runner.settings.model_copy(update={"sandbox": sandbox}), runner.backend,
                    runner.train, runner.val)
        (result,) = on.evaluate_weights(files, weights, tmp_path / f"e{spares}{warm}",
                                        [HeldOutRound("warm", b"\x02" * 32)], "fp32")
        assert result.exit_reason == "ok", result.detail
        figures.append((result.val_bpb_trained, result.val_bpb_twin))
    assert figures[0] == figures[1] == figures[2], figures
