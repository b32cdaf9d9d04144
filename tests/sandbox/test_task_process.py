"""The eval sandbox's task processes (harness/task_process.py), with real forks: each task
runs in a process of its own, forked from a parent no task ran in, one at a time, with the
next one forked ahead; a crashed one is named, and none is left behind."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
from fixture_bundles import bundle

from prism_challenge.sandbox.harness.eval_main import _Models
from prism_challenge.sandbox.harness.loading import ContractError, load_module
from prism_challenge.sandbox.harness.task_process import (
    DONE,
    NEXT,
    TaskProcessError,
    fork_task,
    run_task_processes,
)

CFG = {"vocab_size": 64, "seq_len": 16, "param_cap": 10**6, "seed": 7, "threads": 1}


class Forks:
    """Every task process a test forks, to check that each was reaped."""

    def __init__(self, prepare, work, profile=dict) -> None:
        self.args, self.pids = (prepare, work, profile), []

    def __call__(self):
        child = fork_task(*self.args)
        self.pids.append(child.pid)
        return child

    def all_reaped(self) -> bool:
        for pid in self.pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            return False
        return bool(self.pids)


@pytest.mark.parametrize("spares", [1, 3])
def test_tasks_run_one_at_a_time_each_in_a_new_process_of_an_untouched_parent(tmp_path,
                                                                               spares):
    log = tmp_path / "log"
    state = {"touched": 0}  # what a task changes in its own process

    def fork():  # what each task process runs
        def prepare() -> None:
            with log.open("a") as f:
                f.write(f"prepare {os.getpid()}\n")

        def work(prepared):
            # the host's queue: the tasks already started (a file: each process has its own
            # copy of everything else)
            task = log.read_text().count("start") if log.exists() else 0
            if task == 4:
                return DONE
            with log.open("a") as f:
                f.write(f"start {task} {os.getpid()} {state['touched']}\n")
            state["touched"] += 1
            time.sleep(0.05)
            with log.open("a") as f:
                f.write(f"end {task} {os.getpid()}\n")
            return NEXT

        return prepare, work

    forks = Forks(*fork(), lambda: {"seconds": {"work": 0.5}, "counts": {"work": 1}})
    profiles = []
    assert run_task_processes(forks, profiles.append, spares) == DONE
    lines = [line.split() for line in log.read_text().splitlines()]
    runs = [line for line in lines if line[0] in ("start", "end")]
    # start and end alternate: no task starts before the one before it ended
    assert [line[0] for line in runs] == ["start", "end"] * 4
    assert [int(line[1]) for line in runs[::2]] == [0, 1, 2, 3]
    pids = [int(line[2]) for line in runs[::2]]
    assert len(set(pids)) == 4 and os.getpid() not in pids
    # every task sees the parent's state, not what an earlier task left
    assert [int(line[3]) for line in runs[::2]] == [0, 0, 0, 0]
    assert state["touched"] == 0
    # each process was forked (and prepared) before it started: the spare
    prepared = [int(line[1]) for line in lines if line[0] == "prepare"]
    assert set(pids) <= set(prepared)
    assert len(profiles) == 5 and profiles[0] == {"seconds": {"work": 0.5},
                                                  "counts": {"work": 1}}
    assert forks.all_reaped() and len(forks.pids) == 5 + spares


def test_a_task_process_killed_by_a_signal_is_named_and_nothing_is_left_running():
    forks = Forks(lambda: None, lambda prepared: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(TaskProcessError, match="killed by signal SIGKILL"):
        run_task_processes(forks, lambda profile: None)
    assert forks.all_reaped()


def test_what_preparing_raised_reaches_the_task_which_reports_it(tmp_path):
    seen = tmp_path / "seen"

    def prepare():
        raise RuntimeError("no device here")

    def work(prepared):
        seen.write_text(repr(prepared))
        return 4  # FAILED: the process reported it

    forks = Forks(prepare, work)
    assert run_task_processes(forks, lambda p: None) == 4
    assert seen.read_text() == "RuntimeError('no device here')"
    assert forks.all_reaped()


SHARED = b'''
import torch
from torch import nn


class Shared(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 8)
        self.memo = torch.zeros(4)
        self.memo.share_memory_()  # every forked task process would write the same pages

    def forward(self, input_ids):
        return self.embed(input_ids)


def build_model(ctx):
    return Shared(ctx.vocab_size)
'''


def test_a_build_that_puts_a_tensor_in_shared_memory_is_refused(tmp_path):
    arch = tmp_path / "architecture.py"
    arch.write_bytes(SHARED.replace(b"self.memo.share_memory_()", b"pass"))
    honest = _Models(load_module(arch, "architecture"), CFG, tmp_path)
    honest.build_pristine()
    assert isinstance(honest.pristine, torch.nn.Module) and honest.final is None
    arch.write_bytes(SHARED)
    models = _Models(load_module(arch, "architecture"), CFG, tmp_path)
    with pytest.raises(ContractError, match=r"shared memory .*share_memory_"):
        models.build_pristine()


def test_the_eval_refuses_a_shared_memory_build_in_the_real_sandbox(run):
    """Training does not mind the tensor (the AST policy refuses the call at the gate); the
    eval sandbox, whose task processes would all share it, refuses the build before any
    task and says why."""
    tiny = bundle("tiny")
    arch = tiny["architecture.py"].decode()
    assert "return Tiny(ctx.vocab_size)" in arch
    shared = arch.replace("return Tiny(ctx.vocab_size)",
                          "m = Tiny(ctx.vocab_size)\n    m.keep = torch.zeros(4)\n"
                          "    m.keep.share_memory_()\n    return m")
    record = run({**tiny, "architecture.py": shared.encode()})
    assert record.exit_reason == "ok"  # training was fine
    said = f"{record.eval.exit_reason} {record.eval.detail}"
    assert "shared memory" in said and "share_memory_" in said, said
    assert record.eval.val_tokens == 0
