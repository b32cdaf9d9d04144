"""A miner's local loop: `prism check` and `prism eval` without a validator.

    check_bundle(bundle, settings, data_root)          static gates + a smoke run -> CheckReport
    evaluate_bundle(bundle, settings, data_root, out)  the full local scoring -> EvalReport
    open_local_data(data_root, settings)               train + (val split | held-out train rows)

Miner code only ever runs in the real sandbox (`prism_challenge.sandbox.Runner`), never in
the process that calls these functions.
"""

from prism_challenge.miner.check import CheckReport, check_bundle, smoke_settings
from prism_challenge.miner.data import (
    DataMismatch,
    DataRootMissing,
    HeldOutRows,
    LocalData,
    open_local_data,
    prepare_command,
)
from prism_challenge.miner.evaluate import (
    EvalReport,
    StaticRefusal,
    evaluate_bundle,
)
from prism_challenge.miner.findings import Finding, static_findings
from prism_challenge.miner.sandbox_run import LocalRunFailed

__all__ = [
    "CheckReport",
    "DataMismatch",
    "DataRootMissing",
    "EvalReport",
    "Finding",
    "HeldOutRows",
    "LocalData",
    "LocalRunFailed",
    "StaticRefusal",
    "check_bundle",
    "evaluate_bundle",
    "open_local_data",
    "prepare_command",
    "smoke_settings",
    "static_findings",
]
