"""Intake: signed submissions in, `received` rows out (docs/submissions.md).

Kept import-light: the miner's client imports `intake.signing` and `intake.schemas` without
pulling in the web stack.
"""
