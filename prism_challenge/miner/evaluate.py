"""`prism eval`: score a bundle locally exactly as a validator would, on the local data.

The full configured budget runs in the real sandbox; the record is scored with the
validator's `score_record`; then, as a validator does before a run may take weight, the run
is replayed with checks drawn after it ended, and the replay's verdict decides eligibility
(every local run is treated as a contender). The declared axes are read against the
registry's schema. The record, the replay, the score and a learning curve are written to the
output folder so that two runs (or a run and a validator's number) can be compared.

`skip_replay` (`prism eval --no-replay`) leaves the replay out, roughly halving the time: the
run is then eligible on its record only, NOT verified, and the report and `score.json` say so
(`NOT_VERIFIED`). No command replays a stored run: verifying it later is a run without
`--no-replay`, which trains again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prism_challenge.bundle import Bundle
from prism_challenge.config.settings import Settings
from prism_challenge.isolation import IsolationBackend
from prism_challenge.miner.curve import plot_learning_curve
from prism_challenge.miner.data import open_local_data
from prism_challenge.miner.findings import Finding, failed, state_findings, static_findings
from prism_challenge.miner.sandbox_run import replay_in_sandbox, run_in_sandbox
from prism_challenge.registry import DEFAULT_AXES
from prism_challenge.registry.axes import AxisReading, read_axes
from prism_challenge.sandbox.progress import ProgressCallback
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.scoring import ScoreResult, score_record
from prism_challenge.verification.replay import ReplayRecord
from prism_challenge.verification.verdict import Verdict, verdict

RECORD_FILE = "record.json"
STEPS_FILE = "steps.npz"  # the record's per-step columns (sandbox/steps.py)
REPLAY_FILE = "replay.json"
SCORE_FILE = "score.json"
CURVE_FILE = "learning_curve.png"
# said by the report and score.json of an eligible record whose replay was skipped
NOT_VERIFIED = ("NOT VERIFIED: the replay was skipped with --no-replay. A validator "
                "additionally replays the run with checks drawn after it ended (every batch "
                "loss reproduced; kept positions at probed and snapshotted steps re-predicted "
                "without their targets) before it may take weight.")


class StaticRefusal(ValueError):
    """The bundle fails the validator's static gates; it is not run."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__("the bundle fails the static gates")
        self.findings = findings


@dataclass(frozen=True)
class EvalReport:
    bundle: Bundle
    findings: list[Finding]
    record: RunRecord
    score: ScoreResult
    replay: ReplayRecord | None  # None when the run was not eligible to begin with
    verification: Verdict | None
    axes: AxisReading
    val_source: str
    corpus: str
    wall_s: float
    files: dict[str, Path]
    # an eligible record whose replay `skip_replay` left out: eligible on its record only,
    # not verified (`eligible` is False: a validator pays only a verified run)
    replay_skipped: bool = False

    @property
    def eligible(self) -> bool:
        """What a validator would pay: eligible on its record AND verified by its replay."""
        return self.score.eligible and self.verification is not None and \
            self.verification.passed


def evaluate_bundle(bundle: Bundle, settings: Settings, data_root: Path, out_dir: Path, *,
                    backend: IsolationBackend | None = None,
                    on_event: Callable[[str], None] | None = None,
                    on_progress: ProgressCallback | None = None,
                    skip_replay: bool = False) -> EvalReport:
    """Run, score and write `record.json` (with its per-step columns in `steps.npz`),
    `score.json` and `learning_curve.png`; `replay.json` when the replay ran (an eligible
    record, unless `skip_replay`), otherwise an earlier run's is removed.

    Raises (before anything runs or is written) the data errors of `open_local_data`, then
    `StaticRefusal` for a bundle the validator would refuse; `LocalRunFailed` when the
    sandbox itself cannot run here.
    """
    data = open_local_data(data_root, settings)
    findings = static_findings(bundle)
    if failed(findings):
        raise StaticRefusal([f for f in findings if f.status == "fail"])
    t0 = time.monotonic()
    record = run_in_sandbox(bundle, settings, data, backend=backend, on_event=on_event,
                            on_progress=on_progress)
    score = score_record(record, settings.scoring)
    replay = check = None
    skipped = skip_replay and score.eligible
    if score.eligible and not skip_replay:
        replay = replay_in_sandbox(bundle, record, settings, data, backend=backend,
                                   on_event=on_event, on_progress=on_progress)
        check = verdict(replay, settings.verification)
    wall = time.monotonic() - t0
    axes = read_axes(DEFAULT_AXES, record.axes, dict(bundle.meta.axes))
    findings = findings + state_findings(record)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"record": out / RECORD_FILE, "score": out / SCORE_FILE, "curve": out / CURVE_FILE}
    files["record"].write_text(record.model_dump_json(indent=2) + "\n")
    files["steps"] = out / STEPS_FILE
    files["steps"].write_bytes(record.steps_blob() or b"")
    if replay is not None:
        files["replay"] = out / REPLAY_FILE
        files["replay"].write_text(replay.model_dump_json(indent=2) + "\n")
    else:  # an earlier run's replay in a reused --out folder would pass for this run's
        (out / REPLAY_FILE).unlink(missing_ok=True)
    summary = {"digest": bundle.digest, "name": bundle.meta.name, "corpus": data.corpus,
               "manifest_sha256": record.manifest_sha256, "val_source": data.val_source,
               "score": score.model_dump(mode="json"),
               "verification": check.model_dump(mode="json") if check else None,
               "eligible": bool(score.eligible and check and check.passed),
               "axes": axes.model_dump(mode="json"), "wall_s": round(wall, 3)}
    if skipped:
        summary["not_verified"] = NOT_VERIFIED
    files["score"].write_text(json.dumps(summary, indent=2) + "\n")
    title = f"{bundle.meta.name or bundle.digest[:12]} on {data.corpus}"
    plot_learning_curve(record, score, files["curve"], title)
    return EvalReport(bundle, findings, record, score, replay, check, axes, data.val_source,
                      data.corpus, wall, files, replay_skipped=skipped)
