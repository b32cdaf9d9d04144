"""A run's eval sandbox, started together with its train sandbox.

The eval sandbox's start (the interpreter, `import torch`, the harness) is seconds and needs
nothing from training, so it runs while the train sandbox starts: the eval harness connects
and says hello, and its `EvalServer` holds that hello until training has ended and the
final weights are in `/inputs`. Until then the sandbox has run only the harness's own code:
the miner's `architecture.py` is imported after the hello is answered, so none of the
miner's code runs in it while its training runs, and the train sandbox cannot reach it
(separate namespaces, mounts and socket). It is this run's own sandbox, started for it and
ended with it: nothing crosses between runs.

Its wall limit (`sandbox.eval_time_s`) counts from `open`, when its work is handed over; the
result's `wall_s` is that part too, so `eval_s` in the record means what it meant before.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator

from prism_challenge.isolation import IsolationBackend, SandboxResult, SandboxSpec
from prism_challenge.sandbox.eval_server import EvalServer, Task


class EarlyEval:
    """An eval sandbox running ahead of its work: `open` hands the work over, `wait` returns
    its result, `abandon` ends it unused (a cancelled run)."""

    def __init__(self, backend: IsolationBackend, spec: SandboxSpec, server: EvalServer,
                 *, wait_limit_s: float, cancel: threading.Event) -> None:
        self.server = server
        self.eval_time_s = spec.limits.wall_s
        self.cancel = cancel
        self.opened_at: float | None = None
        self._progress: Callable[[], None] = lambda: None
        self._abandoned = False
        self._result: SandboxResult | None = None
        self._error: BaseException | None = None
        # the static limit covers the wait for training too; after `open`, `stop_at` holds it
        # to eval_time_s from then on
        spec = dataclasses.replace(spec, limits=dataclasses.replace(
            spec.limits, wall_s=wait_limit_s + spec.limits.wall_s))
        self._thread = threading.Thread(target=self._run, args=(backend, spec), daemon=True,
                                        name=f"{spec.name}-early")
        self._thread.start()

    def _run(self, backend: IsolationBackend, spec: SandboxSpec) -> None:
        try:
            self._result = backend.run(spec, stop_at=self._stop_at)
        except BaseException as exc:  # raised again in the runner's thread by `wait`
            self._error = exc

    def _stop_at(self) -> float | None:
        if self.cancel.is_set() or self._abandoned:
            return 0.0
        if self.opened_at is None:
            return None
        self._progress()
        return self.opened_at + self.eval_time_s

    def open(self, hello: dict, tasks: Iterator[Task], progress: Callable[[], None]) -> None:
        self._progress = progress
        self.opened_at = time.monotonic()
        self.server.open(hello, tasks)

    def wait(self) -> SandboxResult:
        """The sandbox's result once it has ended, with `wall_s` counted from `open`."""
        self._thread.join()
        self.server.close()
        if self._error is not None:
            raise self._error
        assert self._result is not None and self.opened_at is not None
        ran_before = max(0.0, time.monotonic() - self.opened_at)
        return dataclasses.replace(self._result, wall_s=min(self._result.wall_s, ran_before))

    def abandon(self) -> None:
        """End the sandbox if its work was never handed over (no-op after `wait`)."""
        self._abandoned = True
        self.server.close()
        self._thread.join()
