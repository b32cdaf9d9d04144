"""A shutdown that lands while a slot's health probe runs: the probe's sandbox is stopped at
once, the slot keeps its place in rotation (a cut-short probe says nothing of it), and the
worker starts nothing afterwards. Real store, real bubblewrap probe on a CPU slot."""

from __future__ import annotations

import threading

from fixture_bundles import queue_bundle
from validator_kit import TINY

from prism_challenge.config import Settings
from prism_challenge.hardware.devices import host_cpus
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import Slot
from prism_challenge.isolation import make_backend
from prism_challenge.storage.tables import Submission
from prism_challenge.validator.rotation import Rotation
from prism_challenge.validator.worker import EvaluationWorker


class StopsOnceStarted:
    """The real bubblewrap backend; once the probe's sandbox runs (its first poll), the
    validator's shutdown begins. Records how each sandbox ended."""

    def __init__(self, stop: threading.Event) -> None:
        self.real = make_backend("bubblewrap")
        self.name = self.real.name
        self.stop = stop
        self.causes: list[str] = []

    def run(self, spec, *, stop_at=None):
        def polled():
            self.stop.set()
            return stop_at() if stop_at is not None else None

        result = self.real.run(spec, stop_at=polled)
        self.causes.append(result.cause)
        return result


class NeverRuns:
    """The slot's runner: any run or replay it is asked for fails the test."""

    def on_slot(self, slot):
        return self

    def run(self, *a, **kw):
        raise AssertionError("a run started after the shutdown began")

    replay = run


def test_a_shutdown_during_the_probe_stops_it_and_starts_no_run(store, tmp_path):
    settings = Settings(validator={"work_dir": str(tmp_path / "runs"),
                                   "probe_timeout_s": 280.0})
    stop = threading.Event()
    backend = StopsOnceStarted(stop)
    slot = Slot(0, (), host_cpus()[:1])
    rotation = Rotation(settings, [slot], HealthCheck(settings, backend, tmp_path / "health",
                                                      cancel=stop))
    worker = EvaluationWorker(settings, store, NeverRuns(), None, cancel=stop, slot=slot,
                              rotation=rotation)
    sid = queue_bundle(store, {n: (TINY / n).read_bytes()
                               for n in ("architecture.py", "training.py")}, "hk")

    assert worker.run_once() is None
    assert backend.causes == ["timeout"]  # killed at its first poll, not left to finish
    assert rotation.in_rotation(slot)
    with store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("queued", 0)
    assert worker.run_once() is None  # stopping: not even a probe
    assert backend.causes == ["timeout"]


def test_the_same_probe_without_a_shutdown_admits_the_slot(tmp_path):
    settings = Settings(validator={"probe_timeout_s": 280.0})
    backend = StopsOnceStarted(threading.Event())  # its event is not the probe's cancel
    health = HealthCheck(settings, backend, tmp_path / "health")
    result = health.check(Slot(0, (), host_cpus()[:1]))
    assert (result.ok, result.cancelled, backend.causes) == (True, False, ["ok"])
