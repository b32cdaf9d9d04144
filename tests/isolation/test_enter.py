"""A forked interpreter joins a real bubblewrap sandbox (isolation/enter.py) and then sees
exactly what the sandbox's own program sees: its uid, no capabilities, no network, none of
the host's files or processes. The interpreter that forked it stays where it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prism_challenge.isolation import bubblewrap
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.isolation.enter import EnterError, program_pid
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env

KIT = Path(__file__).with_name("enter_kit.py")


def _enter_and_report(pid: int) -> dict | str:
    """A fresh interpreter forks a child that joins `pid`'s sandbox and reports."""
    done = subprocess.run([sys.executable, str(KIT), str(pid), str(Path(__file__).resolve())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout.strip()
    return text if text.startswith("error") else json.loads(text)


@pytest.fixture
def sandbox(tmp_path):
    """A real bubblewrap sandbox with a run's mounts, running a waiter: (init pid, scratch)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "given.txt").write_text("the run's own file")
    etc = tmp_path / "etc"
    etc.mkdir()
    for name, text in (("hosts", bubblewrap.HOSTS), ("nsswitch.conf", bubblewrap.NSSWITCH),
                       ("passwd", bubblewrap.PASSWD), ("group", bubblewrap.GROUP)):
        (etc / name).write_text(text)
    spec = SandboxSpec(argv=("/bin/sh", "-c", "echo ready; exec sleep 120"),
                       mounts=(Mount(scratch, "/scratch", writable=True),), env=minimal_env(),
                       limits=Limits(120, 2**30, 64, 2**26, 4096), scratch=scratch)
    argv = BubblewrapBackend().command(spec, etc)
    info_r, info_w = os.pipe()
    argv[1:1] = ["--info-fd", str(info_w)]
    proc = subprocess.Popen(argv, pass_fds=(info_w,), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    os.close(info_w)
    with os.fdopen(info_r) as fh:
        init = json.loads(fh.read().split("}")[0] + "}")["child-pid"]
    assert proc.stdout.readline() == b"ready\n"
    yield init, proc
    proc.kill()
    proc.wait()


def test_an_entered_child_sees_only_the_sandbox_and_holds_no_privilege(sandbox):
    init, _ = sandbox
    facts = _enter_and_report(program_pid(init))
    assert isinstance(facts, dict), facts
    assert (facts["uid"], facts["gid"]) == (65534, 65534)
    assert facts["cap_eff"] == facts["cap_prm"] == facts["cap_bnd"] == "0" * 16
    assert facts["no_new_privs"] == "1"
    assert facts["network"] == "unreachable" and facts["usr"] == "read-only"
    assert facts["host_file"] is False  # this test file lies outside the sandbox's mounts
    assert facts["scratch"] == ["given.txt"] and facts["hostname"] == "sandbox"
    # bubblewrap's init, the waiter and the entered process: nothing of the host's
    assert facts["pids"] == [1, 2, 3] and facts["pid"] == 3


def test_a_sandbox_that_ended_cannot_be_entered(sandbox):
    init, proc = sandbox
    pid = program_pid(init)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    result = _enter_and_report(pid)
    assert isinstance(result, str) and result.startswith("error"), result


def test_program_pid_refuses_a_process_without_exactly_one_child():
    lonely = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(EnterError, match="0 children"):
            program_pid(lonely.pid)
    finally:
        lonely.kill()
        lonely.wait()
