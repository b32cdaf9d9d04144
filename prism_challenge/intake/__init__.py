"""Intake: signed submissions in, `received` rows out (DESIGN §3, issue 4).

Kept import-light: the miner's client imports `intake.signing` and `intake.schemas` without
pulling in the web stack.
"""
