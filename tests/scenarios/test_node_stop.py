"""A graceful stop is bounded: a loop that does not end within the stop's time is named in
the log with where it is (the operator's lead on the hang), and the node closes anyway.
A real node (local ledger, SQLite, its API on 127.0.0.1)."""

from __future__ import annotations

import logging
import threading

from prism_challenge.config import load_settings
from prism_challenge.validator.node import ValidatorNode


def _hangs_on(release: threading.Event) -> None:
    release.wait()


def test_a_loop_that_ignores_the_stop_is_named_and_the_node_still_closes(
        tiny_config, tmp_path, caplog):
    settings = load_settings(tiny_config(
        storage={"url": f"sqlite:///{tmp_path / 'node.db'}"}, intake={"port": 0},
        validator={"poll_s": 0.05, "epoch_s": 3600, "work_dir": str(tmp_path / "runs")}))
    node = ValidatorNode(settings)
    node.start()
    release = threading.Event()
    node._spawn("stuck", lambda: _hangs_on(release))
    try:
        with caplog.at_level(logging.ERROR, logger="prism.validator"):
            node.stop(timeout_s=1.0)
    finally:
        release.set()
    (stuck,) = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
    assert stuck.startswith("loop stuck still running 1s after the stop")
    assert "in _hangs_on" in stuck and "release.wait()" in stuck
