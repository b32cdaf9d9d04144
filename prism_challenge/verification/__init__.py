"""Verification of a contender: deciding, running and judging a replay of a scored run.

In: a scored `RunRecord` that would take the lead, and its bundle. Out: a `ReplayRecord`
(the replay's checks against the original) and a `Verdict` (passed, or failed with its
reason), kept as a `verifications` row. Guarantees: the checks are drawn only when the replay
starts (`replay.py`), so a run cannot prepare for them; only a passed run can lead
(`jobs.py` queues, claims and settles the rows; `verdict.py` judges).
"""
