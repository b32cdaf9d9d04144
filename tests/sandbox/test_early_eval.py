"""A run's eval sandbox starts with its training, and runs none of the miner's code until
training has ended.

Real bubblewrap, a real run: the backend records the order in which sandboxes start and
end; the miner's architecture refuses to build in the eval sandbox unless the final
weights are already there, so a run that evaluates proves every import of it came after
training. A run whose work is never handed over (a shutdown) leaves its eval sandbox ended.
"""

from __future__ import annotations

import threading

import pytest
from sandbox_kit import bundle, digest_of, tiny_settings

from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.sandbox.runner import Cancelled, Runner

# In the eval sandbox (PRISM_INPUTS is set there only), building the model before the final
# weights arrived is an error the record would show as a failed evaluation.
AFTER_TRAINING = b'''
import os as _os
if _os.environ.get("PRISM_INPUTS") and not _os.path.exists("/inputs/final.pt"):
    raise RuntimeError("architecture.py imported in the eval sandbox before training ended")
'''


class Recording(BubblewrapBackend):
    """The real backend, noting which sandbox (train or eval) starts and ends, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self._lock = threading.Lock()

    def _note(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def run(self, spec, *, stop_at=None):
        kind = spec.name.rsplit("-", 1)[1]
        self._note(f"start {kind}")
        try:
            return super().run(spec, stop_at=stop_at)
        finally:
            self._note(f"end {kind}")


def _runner(prepared_data, backend, early: bool = True) -> Runner:
    runner = Runner.from_data(tiny_settings(), backend, prepared_data)
    runner.early_eval = early
    return runner


def test_the_eval_sandbox_waits_through_training_and_then_evaluates(prepared_data, tmp_path):
    backend = Recording()
    files = bundle("tiny")
    files["architecture.py"] += AFTER_TRAINING
    record = _runner(prepared_data, backend).run(files, digest_of(files), tmp_path / "run")
    assert backend.events == ["start eval", "start train", "end train", "end eval"]
    assert record.exit_reason == "ok" and record.eval.exit_reason == "ok", record.eval.detail
    assert record.eval.val_bpb_trained is not None and record.eval.val_bpb_twin is not None
    assert record.eval.probe_trained is not None and record.eval.probe_trained.ok


def test_a_cancelled_run_ends_its_waiting_eval_sandbox(prepared_data, tmp_path):
    backend = Recording()
    cancel = threading.Event()
    files = bundle("tiny")
    files["training.py"] = b"import time\ndef train(ctx):\n    time.sleep(600)\n"
    runner = _runner(prepared_data, backend)
    runner.on_progress = lambda p: cancel.set() if backend.events[-1:] == ["start train"] \
        else None
    with pytest.raises(Cancelled):
        runner.run(files, digest_of(files), tmp_path / "run", cancel=cancel)
    assert sorted(backend.events) == ["end eval", "end train", "start eval", "start train"]
