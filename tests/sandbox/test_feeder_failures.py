"""The feeder's own failures are the validator's (infra), and its limits are the miner's."""

from __future__ import annotations

from sandbox_kit import bundle, digest_of

from prism_challenge.sandbox.runner import Runner


class FailingStream:
    """The real train stream, whose storage fails after the first rows (a disk error)."""

    def __init__(self, stream, fail_from_row: int) -> None:
        self._stream = stream
        self._fail_from_row = fail_from_row

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def rows_at(self, seq_len, indices):
        self._fail_from_row -= len(indices)
        if self._fail_from_row < 0:
            raise OSError(5, "Input/output error")
        return self._stream.rows_at(seq_len, indices)


def test_a_data_read_failure_is_infra_not_a_miner_crash(runner, tmp_path):
    broken = Runner(runner.settings, runner.backend, FailingStream(runner.train, 16),
                    runner.val)
    files = bundle("tiny")
    record = broken.run(files, digest_of(files), tmp_path / "run")
    assert record.exit_reason == "infra"
    assert "Input/output error" in record.exit_detail
    assert record.consumed.rows == 16  # what was served before the failure


def test_an_oversized_batch_request_is_refused_as_the_miners_error(run):
    files = bundle("tiny")
    files["training.py"] = files["training.py"].replace(b"ctx.batches(8)",
                                                        b"ctx.batches(10**7)")
    record = run(files)
    assert record.exit_reason == "contract"
    assert "rows a step may take" in record.exit_detail
    assert record.consumed.rows == 0
