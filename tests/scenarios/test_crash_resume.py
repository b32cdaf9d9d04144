"""Kill the validator with SIGKILL mid-training; a restart resumes and scores exactly once,
without spending the miner's attempt on the validator's crash. The restarted node is then
stopped by a SIGTERM that one of its worker threads receives (the kernel may hand a
process's signal to any thread), and still stops gracefully."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from cli_kit import prism_in_process
from validator_kit import ROOT, TINY, wait_for

from prism_challenge.validator.demo import free_port, make_wallets

CLI = [sys.executable, "-m", "prism_challenge.cli"]
_TGKILL = {"x86_64": 234, "aarch64": 131}  # the syscall's number


def sigterm_a_worker_thread(pid: int) -> None:
    """SIGTERM delivered to a thread of `pid` other than its main thread (tgkill)."""
    tid = max(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_TGKILL[platform.machine()], pid, tid, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def _start(config: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "validator", "--config", str(config)], cwd=ROOT,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _status(url: str, sid: int) -> str | None:
    try:
        return httpx.get(f"{url}/v1/submissions/{sid}", timeout=2).json()["status"]
    except httpx.HTTPError:
        return None


@pytest.mark.timeout(400)
def test_sigkill_while_training_then_restart_scores_exactly_once(tiny_config, tmp_path):
    port = free_port()
    work = tmp_path / "node"
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "architecture.py").write_bytes((TINY / "architecture.py").read_bytes())
    (slow / "training.py").write_text((TINY / "training.py").read_text().replace(
        "        opt.step()\n", "        opt.step()\n        _ = sum(range(200_000))\n"))
    config = tiny_config(storage={"url": f"sqlite:///{work / 'prism.db'}"},
                         intake={"port": port}, validator={"work_dir": str(work / "runs"),
                                                           "poll_s": 0.2, "epoch_s": 2})
    make_wallets(tmp_path / "wallets", ["miner"])
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "validator.log"
    first = _start(config, log)
    wait_for(lambda: _health(url), 120, "the API")
    sub = prism_in_process("submit", str(slow), "--url", url, "--wallet.name", "miner",
                           "--wallet.path", str(tmp_path / "wallets"), "--config", str(config))
    assert sub.returncode == 0, sub.stderr
    sid = int(sub.stdout.split("submission ")[1].split()[0])
    wait_for(lambda: _status(url, sid) == "running", 120, "running")
    sock = wait_for(lambda: next((work / "runs").glob("*/sock/feeder.sock"), None), 60, "feeder")
    # wait until batches flow (the training sandbox is up), then kill everything hard
    wait_for(lambda: (sock.parent.parent / "scratch" / "out").is_dir(), 60, "training")
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    db = sqlite3.connect(work / "prism.db")
    assert db.execute("select status, attempts from submissions where id=?", (sid,)
                      ).fetchone() == ("running", 1)
    assert db.execute("select count(*) from scores").fetchone() == (0,)

    second = _start(config, log)
    try:
        wait_for(lambda: _status(url, sid) == "scored", 240, "scored after restart")
    finally:
        sigterm_a_worker_thread(second.pid)
        try:  # the node's own stop is bounded by 60 s in all, then it logs what hung
            code = second.wait(90)
        except subprocess.TimeoutExpired:
            second.kill()
            code = None
        assert code == 0, log.read_text()[-4000:]
    assert db.execute("select status, attempts from submissions where id=?", (sid,)
                      ).fetchone() == ("scored", 1)
    assert db.execute("select count(*) from scores where submission_id=?", (sid,)
                      ).fetchone() == (1,)
    assert db.execute("select attempt from run_records where submission_id=?", (sid,)
                      ).fetchall() == [(1,)]
    # not on a terminal: one JSON object a line (the default --log-format auto)
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert any(ln["logger"] == "prism.validator" and ln["level"] == "info"
               and "1 submissions resumed" in ln["msg"] for ln in lines)
    msgs = [ln["msg"] for ln in lines]
    # after the signal only an epoch already under way may finish; nothing fails
    stop = msgs.index("received SIGTERM: stopping")
    assert msgs[-1] == "validator stopped"
    assert all(m.startswith("epoch:") for m in msgs[stop + 1:-1]), msgs[stop:]


def _health(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
