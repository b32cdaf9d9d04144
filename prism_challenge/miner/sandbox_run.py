"""One local run of a bundle in the real sandbox, on the settings' backend."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from prism_challenge.bundle import Bundle
from prism_challenge.config.settings import Settings
from prism_challenge.isolation import IsolationBackend, make_backend
from prism_challenge.miner.data import LocalData
from prism_challenge.miner.outcome import host_out_of_memory, humanize
from prism_challenge.sandbox.progress import ProgressCallback
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Runner
from prism_challenge.verification.replay import ReplayRecord


class LocalRunFailed(RuntimeError):
    """The sandbox itself failed (the validator's side, not the bundle): nothing to score."""


def run_failure(record: RunRecord | ReplayRecord) -> LocalRunFailed:
    """Why an `infra` run did not run here: this machine out of memory, or the sandbox."""
    at = (f" at row {record.consumed.rows:,} of {record.budget.rows:,}"
          if isinstance(record, RunRecord) else " in the replay")
    if (line := host_out_of_memory(record.exit_detail, at)) is not None:
        return LocalRunFailed(line)
    return LocalRunFailed(f"the sandbox failed on this machine: "
                          f"{humanize(record.exit_detail[-600:])}")


def backend_of(settings: Settings) -> IsolationBackend:
    s = settings.sandbox
    return make_backend(s.backend, docker_image=s.docker_image, prewarm=s.prewarm)


def run_in_sandbox(bundle: Bundle, settings: Settings, data: LocalData, *,
                   backend: IsolationBackend | None = None,
                   on_event: Callable[[str], None] | None = None,
                   on_progress: ProgressCallback | None = None) -> RunRecord:
    """Train and evaluate `bundle` exactly as a validator would; the run dir is temporary."""
    runner = Runner(settings, backend or backend_of(settings), data.train, data.val,
                    on_event=on_event, on_progress=on_progress)
    with tempfile.TemporaryDirectory(prefix="prism-local-") as tmp:
        record = runner.run(bundle.files, bundle.digest, Path(tmp) / "run")
    if record.exit_reason == "infra":
        raise run_failure(record)
    return record


def replay_in_sandbox(bundle: Bundle, record: RunRecord, settings: Settings, data: LocalData,
                      *, backend: IsolationBackend | None = None,
                      on_event: Callable[[str], None] | None = None,
                      on_progress: ProgressCallback | None = None) -> ReplayRecord:
    """Replay a local run with checks drawn now, as a validator does for a contender."""
    runner = Runner(settings, backend or backend_of(settings), data.train, data.val,
                    on_event=on_event, on_progress=on_progress)
    with tempfile.TemporaryDirectory(prefix="prism-local-") as tmp:
        replay = runner.replay(bundle.files, record, Path(tmp) / "replay")
    if replay.exit_reason == "infra":
        raise run_failure(replay)
    return replay
