"""Each extra holds on its own: a `[miner]`-only install checks and scores a shipped example,
a `[validator]` install starts a node that answers and stops cleanly.

The environments are fresh virtualenvs outside the clone that hold the wheel and exactly
the extra's dependency closure (install_kit.make_env): a module that only `[validator]`
brings (openai, scipy, fastapi ...) cannot be imported by the `[miner]` install, so an
import that escaped its extra fails here. Sizes are the smallest that still train: the
session's prepared data and the TINY settings.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import httpx
import pytest
import yaml
from install_kit import TINY, make_env, run

from prism_challenge.validator.demo import free_port, make_wallets

# Present only through [validator]: a [miner] install that can import one of them is
# not a [miner]-only install.
VALIDATOR_ONLY = ("openai", "scipy", "fastapi", "uvicorn", "datasets", "pyarrow", "docker")


@pytest.mark.timeout(900)
def test_a_miner_only_install_checks_and_evaluates_a_shipped_example(wheel, prepared_data,
                                                                       tmp_path):
    venv = make_env(tmp_path / "miner", wheel, {"miner"})
    python, prism = str(venv / "bin" / "python"), str(venv / "bin" / "prism")
    probe = ("import importlib.util, json, prism_challenge; print(json.dumps(["
             f"prism_challenge.__file__, [m for m in {VALIDATOR_ONLY!r} "
             "if importlib.util.find_spec(m)]]))")
    where, importable = json.loads(run([python, "-c", probe], cwd=tmp_path).stdout)
    assert where.startswith(str(venv)), where  # the wheel, not the checkout
    assert importable == [], f"a [miner] install can import {importable}"

    work = tmp_path / "work"
    work.mkdir()
    run([prism, "examples", "copy", "baseline", "mine"], cwd=work)
    env = {**TINY, "PRISM_DATA__ROOT": str(prepared_data)}
    check = run([prism, "check", "mine"], cwd=work, env=env)
    assert "PASS" in check.stdout
    assert "smoke run of 64 rows" in check.stdout and "64/64 rows consumed" in check.stdout
    ev = run([prism, "eval", "mine", "--out", "out"], cwd=work, env=env, timeout=600)
    assert "ELIGIBLE: a validator would rank this run" in ev.stdout, ev.stdout
    score = json.loads((work / "out" / "score.json").read_text())
    assert score["score"]["eligible"] and score["verification"]["passed"]
    assert 0 < score["score"]["bpb"] < 9


def _health(url: str) -> int | None:
    try:
        return httpx.get(f"{url}/v1/health", timeout=2).status_code
    except httpx.HTTPError:
        return None


@pytest.mark.timeout(600)
def test_a_validator_install_starts_a_node_that_answers_and_stops(wheel, prepared_data,
                                                                   tmp_path):
    venv = make_env(tmp_path / "validator", wheel, {"validator"})
    make_wallets(tmp_path / "wallets", ["validator"])
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "wallet": {"name": "validator", "hotkey": "default", "path": str(tmp_path / "wallets")},
        "chain": {"local_ledger": str(tmp_path / "local-chain.db")},
        "storage": {"url": f"sqlite:///{tmp_path / 'prism.db'}"},
        "data": {"root": str(prepared_data)},
        "challenge": {"seq_len": 32, "token_budget": 32 * 96, "deadline_s": 60},
        "intake": {"port": port},
        "validator": {"work_dir": str(tmp_path / "runs"), "poll_s": 0.2, "epoch_s": 2},
        "llm": {"enabled": False},
    }))
    log = tmp_path / "validator.log"
    node = subprocess.Popen([str(venv / "bin" / "prism"), "validator", "--config", str(config)],
                            cwd=tmp_path, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while _health(url) != 200 and node.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _health(url) == 200, log.read_text()[-3000:]
        body = httpx.get(f"{url}/v1/health", timeout=5).json()
    finally:
        node.send_signal(signal.SIGTERM)
        code = node.wait(60)
    assert code == 0, log.read_text()[-3000:]
    assert body, body
