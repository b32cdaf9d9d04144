"""The eval sandbox's task processes (harness/task_process.py), with real forks: each task
runs in a process of its own, forked from a parent no task ran in, one at a time, with the
next one forked ahead; a crashed one is named, and none is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from fixture_bundles import bundle
from sandbox_kit import digest_of

from prism_challenge.sandbox.harness.task_process import (
    DONE,
    NEXT,
    REPORT_BYTES,
    TaskProcessError,
    fork_task,
    read_report,
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
    code, reports = run_task_processes(forks, spares)
    assert code == DONE
    profiles = [read_report(r) for r in reports]
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
    assert {len(r) for r in reports} == {REPORT_BYTES}  # the same allocation every time
    # five started (four tasks, then the one that found none) and the spares left over
    assert forks.all_reaped() and len(forks.pids) == 5 + spares - 1


def test_a_task_process_killed_by_a_signal_is_named_and_nothing_is_left_running():
    forks = Forks(lambda: None, lambda prepared: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(TaskProcessError, match="killed by signal SIGKILL"):
        run_task_processes(forks)
    assert forks.all_reaped()


def test_what_preparing_raised_reaches_the_task_which_reports_it(tmp_path):
    seen = tmp_path / "seen"

    def prepare():
        raise RuntimeError("no device here")

    def work(prepared):
        seen.write_text(repr(prepared))
        return 4  # FAILED: the process reported it

    forks = Forks(prepare, work)
    assert run_task_processes(forks)[0] == 4
    assert seen.read_text() == "RuntimeError('no device here')"
    assert forks.all_reaped()


def test_the_kernel_s_account_refuses_shared_memory():
    """`fork_refusal` reads /proc/self/maps and /proc/self/task, which no Python object can
    hide from (a tensor held only by an autograd graph is invisible to the collector), in
    a fresh interpreter as the eval process is."""
    script = textwrap.dedent("""
        import torch
        from prism_challenge.sandbox.harness.task_process import fork_refusal
        torch.set_num_threads(1)
        print(fork_refusal())
        t = torch.zeros(4)
        t.share_memory_()
        print(fork_refusal())
        del t
        print(fork_refusal())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[0] == "None" and out[2] == "None", out
    assert "left memory shared between processes" in out[1] and "/dev/shm/torch_" in out[1]


@pytest.mark.parametrize("share, said_part", [
    # a shared anonymous mapping needs no file: the kernel's account refuses it before a fork
    ("import mmap\n    m.keep = mmap.mmap(-1, 4096)",
     "left memory shared between processes"),
    # torch's shared tensors are files in /dev/shm, which the eval sandbox cannot write
    ("m.keep = torch.zeros(4)\n    m.keep.share_memory_()", "Read-only file system"),
])
def test_the_eval_refuses_a_shared_memory_build_in_the_real_sandbox(run, share, said_part):
    """Training does not mind the sharing (the AST policy refuses both calls at the gate);
    the eval sandbox, whose task processes would all share the memory, ends before any
    task and says why."""
    tiny = bundle("tiny")
    arch = tiny["architecture.py"].decode()
    assert "return Tiny(ctx.vocab_size)" in arch
    shared = arch.replace("return Tiny(ctx.vocab_size)",
                          f"m = Tiny(ctx.vocab_size)\n    {share}\n    return m")
    record = run({**tiny, "architecture.py": shared.encode()})
    assert record.exit_reason == "ok"  # training was fine
    said = f"{record.eval.exit_reason} {record.eval.detail}"
    assert said_part in said, said
    assert record.eval.val_tokens == 0


def test_memory_shared_after_every_check_of_the_build_gains_nothing(runner, tiny_run,
                                                                    tmp_path):
    """A red team's learner shares its memory from a finaliser the eval process's own
    collection runs just before it forks (fixture `eval_shm_learner`: 2.4692 against the
    honest 2.5537, eligible, against a check of the build's objects; refused by the kernel's
    account read before every fork once /dev/shm was writable). The eval sandbox's /dev/shm
    cannot be written: the sharing fails inside the finaliser, whose error Python ignores,
    and the learner answers as the honest model."""
    honest = tiny_run[1]
    files = bundle("eval_shm_learner")
    record = runner.run(files, digest_of(files), tmp_path / "b")
    assert record.exit_reason == "ok" and record.eval.exit_reason == "ok", record.eval.detail
    assert record.eval.val_tokens == honest.eval.val_tokens > 0
    assert record.eval.val_bpb_trained == honest.eval.val_bpb_trained
    assert record.eval.val_bpb_twin == honest.eval.val_bpb_twin


def test_a_task_process_keeps_no_descriptor_it_inherited_but_stdio_and_what_it_was_given(
        tmp_path):
    """A pipe the eval process held (made by anything before the forks) would be a channel
    from one task to the next: each task process closes it before anything runs."""
    held_r, held_w = os.pipe()
    given_r, given_w = os.pipe()
    seen = tmp_path / "seen"

    def work(prepared):
        fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
        seen.write_text(" ".join(map(str, fds)))
        return DONE

    try:
        forks = Forks(lambda: None, work)
        forks.args = (*forks.args, (given_r,))
        assert run_task_processes(forks)[0] == DONE
    finally:
        for fd in (held_r, held_w, given_r, given_w):
            os.close(fd)
    fds = [int(n) for n in seen.read_text().split()]
    assert held_r not in fds and held_w not in fds and given_w not in fds
    assert given_r in fds and {0, 1, 2} <= set(fds)
    assert len(fds) <= 7  # stdio, the one kept, its two pipes, and the listing's own


def test_a_refused_fork_leaves_no_task_running_and_every_process_reaped(tmp_path):
    """`fork` raises when the eval process may no longer fork (fork_refusal): that happens
    before the next task starts, so no task process is left talking to the host."""
    log = tmp_path / "log"

    def work(prepared):
        with log.open("a") as f:
            f.write("start\n")
        return NEXT

    forks = Forks(lambda: None, work)

    def fork():
        if len(forks.pids) == 3:
            raise RuntimeError("refused")
        return forks()

    with pytest.raises(RuntimeError, match="refused"):
        run_task_processes(fork, spares=2)
    assert log.read_text().count("start") == 2  # the third was forked, never started
    assert forks.all_reaped() and len(forks.pids) == 3
