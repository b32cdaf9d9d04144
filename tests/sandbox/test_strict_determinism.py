"""The sandbox's deterministic mode is strict: an op without a deterministic kernel stops the
run at once with torch's own message, instead of warning and failing a replay later."""

from __future__ import annotations

from sandbox_kit import bundle, digest_of, tiny_settings


def _calls_put() -> dict[str, bytes]:
    """The tiny bundle, calling after each step `put_` without accumulate: it has no
    deterministic kernel, on the CPU as on CUDA."""
    files = bundle("tiny")
    files["training.py"] = files["training.py"].replace(
        b"        opt.step()",
        b"        opt.step()\n"
        b"        torch.zeros(4).put_(torch.tensor([1, 1]), torch.ones(2), accumulate=False)")
    return files


def test_an_op_without_a_deterministic_kernel_stops_the_run_with_its_name(run):
    record = run(_calls_put())
    assert record.exit_reason == "crash"
    assert "put_ does not have a deterministic implementation" in record.exit_detail
    assert record.stack.deterministic is True
    assert record.consumed.rows == 8  # the first step's batch, then the op raised


def test_without_the_mode_the_same_op_runs(make_runner, tmp_path):
    files = _calls_put()
    loose = make_runner(tiny_settings(deterministic_algorithms=False))
    record = loose.run(files, digest_of(files), tmp_path / "run")
    assert record.exit_reason != "crash", record.exit_detail
    assert record.stack.deterministic is False
