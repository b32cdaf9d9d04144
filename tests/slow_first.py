"""The suite's longest test files run first, so two workers end together.

`make test` runs the suite with pytest-xdist's work stealing: each worker starts on a
contiguous half of the collection and an idle worker takes the tail of a busy one's queue.
A test of a minute that happens to sit at the end of the collection is the whole wait at
the end; listed here first, it runs while the other worker still has short tests to take.
Files are named without their folder, so moving a file between test folders keeps its
place; `tests/packaging/test_slow_first.py` checks that every name still exists. The order
is the slowest first, from `--durations` of a CI run on 2 cores; each file's tests keep
their own order and stay together (module-scoped fixtures are set up once).
"""

from __future__ import annotations

SLOW_FILES = (
    "test_honest_runs.py",
    "test_verification.py",
    "test_docs_commands.py",
    "test_honest_verification.py",
    "test_worker.py",
    "test_ray_cluster.py",
    "test_rotation.py",
    "test_two_validators.py",
    "test_crash_resume.py",
    "test_demo_end_to_end.py",
    "test_eval_cli.py",
    "test_state_contract_cli.py",
    "test_wheel.py",
    "test_miner_install.py",
    "test_replay_plan.py",
    "test_heldout_round.py",
    "test_stack.py",  # beside the other two readers of the session's shared tiny run
    "test_benchmark_smoke.py",
)


def slow_first(items: list) -> None:
    """Reorder collected items in place: the listed files first, in the listed order."""
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))
