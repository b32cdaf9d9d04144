"""`prism submit` and scripts/submit.py end to end against a live node: the first submit and
the script in a process of their own, the other cases through typer's CliRunner in the
test's process (the same command, without a second start of the CLI and bittensor)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from cli_kit import prism_in_process
from fastapi.responses import PlainTextResponse
from sqlalchemy import select

from prism_challenge.storage import Status, transition
from prism_challenge.storage.tables import Score, Submission

ROOT = Path(__file__).resolve().parents[2]
NETUID = 7


def wallet_args(wallet, *, dotted: bool = False) -> list[str]:
    """btcli 11's flags, or (dotted) the bittensor 10 names they keep as aliases."""
    names = (("--wallet.name", "--wallet.hotkey", "--wallet.path") if dotted
             else ("--wallet", "--wallet-hotkey", "--wallet-path"))
    return [names[0], wallet.name, names[1], wallet.hotkey_str, names[2], wallet.path]


def clean_env(ledger: Path | None = None) -> dict[str, str]:
    """The environment without a developer's PRISM_*; the node's ledger when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    if ledger is not None:
        env["PRISM_CHAIN__LOCAL_LEDGER"] = str(ledger)
    return env


def prism_process(*args: str, ledger: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """`prism submit ARGS` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "prism_challenge.cli", "submit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(ledger),
        cwd=ROOT,
    )


def prism(*args: str, ledger: Path):
    """`prism submit ARGS` in this process (cli_kit)."""
    return prism_in_process("submit", *args, env={"PRISM_CHAIN__LOCAL_LEDGER": str(ledger)})


def submission_rows(store) -> list[Submission]:
    with store.session() as session:
        return list(session.scalars(select(Submission)).all())


def test_prism_submit_end_to_end(node, wallets, bundle_dir):
    path = bundle_dir("cli")
    done = prism_process(
        str(path), "--url", node.url, "--netuid", str(NETUID), *wallet_args(wallets["miner"]),
        ledger=node.ledger.path,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"bundle \w{16} committed at block 1 \(prism1:\w{64}\)", done.stdout)
    sid = int(re.search(r"accepted as submission (\d+)", done.stdout).group(1))
    (row,) = submission_rows(node.store)
    assert (row.id, row.hotkey, row.status, row.block) == (
        sid,
        wallets["miner"].hotkey.ss58_address,
        "received",
        1,
    )
    again = prism(
        str(path), "--url", node.url, "--netuid", str(NETUID),
        *wallet_args(wallets["miner"], dotted=True), ledger=node.ledger.path,
    )
    assert again.returncode == 0, again.stderr
    assert "already committed at block 1" in again.stdout  # no second commitment
    assert f"already submitted as submission {sid}" in again.stdout
    assert node.ledger.block == 1


def test_scripts_submit_is_the_same_command(node, wallets, bundle_dir):
    done = subprocess.run(
        [sys.executable, "scripts/submit.py", str(bundle_dir("script")), "--url", node.url,
         "--netuid", str(NETUID), *wallet_args(wallets["rival"])],
        capture_output=True, text=True, timeout=60, env=clean_env(node.ledger.path), cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r"accepted as submission \d+", done.stdout)
    assert len(submission_rows(node.store)) == 1


def test_bad_bundle_fails_before_upload(node, wallets, bundle_dir):
    path = bundle_dir("bad")
    (path / "training.py").write_text("def train(ctx:\n")
    done = prism(
        str(path), "--url", node.url, "--netuid", str(NETUID), *wallet_args(wallets["miner"]),
        ledger=node.ledger.path,
    )
    assert done.returncode == 2
    assert "BUNDLE_SYNTAX" in done.stderr and "training.py" in done.stderr
    assert node.counts() == (0, 0)
    assert node.ledger.block == 0  # nothing committed for a bundle that cannot be accepted


def test_missing_wallet_is_a_clear_error(node, wallets, bundle_dir, tmp_path):
    """No coldkey either: the coldkey is made first (new-hotkey alone would fail there)."""
    args = ["--wallet", "nobody", "--wallet-hotkey", "default", "--wallet-path", str(tmp_path)]
    done = prism(str(bundle_dir()), "--url", node.url, *args, ledger=node.ledger.path)
    assert done.returncode == 2
    assert " ".join(done.stderr.split()) == (
        f"error: no wallet 'nobody' under {tmp_path} (neither its coldkey nor its hotkey "
        f"'default'); create the coldkey first with `btcli wallet new-coldkey --wallet nobody "
        f"--wallet-path {tmp_path}`, then the hotkey with `btcli wallet new-hotkey --wallet "
        f"nobody --wallet-hotkey default --wallet-path {tmp_path}`")
    assert node.ledger.block == 0


def test_missing_hotkey_of_a_wallet_with_its_coldkey_names_new_hotkey(node, wallets, bundle_dir):
    wallet = wallets["miner"]
    args = ["--wallet", wallet.name, "--wallet-hotkey", "spare", "--wallet-path", wallet.path]
    done = prism(str(bundle_dir()), "--url", node.url, *args, ledger=node.ledger.path)
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert f"no hotkey 'spare' in wallet '{wallet.name}'" in said
    assert (f"`btcli wallet new-hotkey --wallet {wallet.name} --wallet-hotkey spare "
            f"--wallet-path {wallet.path}`") in said
    assert "new-coldkey" not in said


def test_refusal_is_printed_with_its_rule(node, wallets, bundle_dir):
    done = prism(
        str(bundle_dir()), "--url", node.url, "--netuid", str(NETUID),
        *wallet_args(wallets["stranger"]), ledger=node.ledger.path,
    )
    assert done.returncode == 1
    assert f"{node.url}: refused: 403 NOT_REGISTERED" in " ".join(done.stderr.split())
    assert node.counts() == (0, 0)


def test_without_url_and_no_published_validator_it_says_so(node, wallets, bundle_dir):
    done = prism(str(bundle_dir()), "--netuid", str(NETUID), *wallet_args(wallets["miner"]),
                 ledger=node.ledger.path)
    assert done.returncode == 1
    assert "no validator on netuid 7 has a permit and a published address" in " ".join(
        done.stderr.split())


def test_wait_follows_to_the_score_and_shows_the_brief(
    store, live_server, intake_app, wallets, bundle_dir, tmp_path
):
    brief = ("/v1/program.md", lambda: PlainTextResponse("# Brief\nTry deeper models."))
    url = live_server(intake_app([brief]))
    cmd = [sys.executable, "-m", "prism_challenge.cli", "submit", str(bundle_dir("wait")),
           "--url", url, "--netuid", str(NETUID), "--wait", "--poll", "0.1",
           *wallet_args(wallets["miner"])]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(tmp_path / "ledger.db"), cwd=ROOT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not submission_rows(store) and time.monotonic() < deadline:
            time.sleep(0.05)
        (row,) = submission_rows(store)
        with store.session() as session:
            transition(session, row.id, Status.QUEUED)
            transition(session, row.id, Status.RUNNING)
        time.sleep(0.3)
        with store.session() as session:
            transition(session, row.id, Status.SCORED)
            session.add(
                Score(submission_id=row.id, bpb=1.5, heldout_delta=0.25, eligible=True,
                      reason=None, corpus="demo", detail={}, created_at=time.time())
            )  # fmt: skip
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Try deeper models." in out
    assert f"submission {row.id}: scored; bpb 1.5000, held-out delta 0.2500" in out
    # Each change is printed once, in lifecycle order (the first poll may already see queued).
    seen = re.findall(rf"submission {row.id}: (\w+)", out)
    assert seen[-1] == "scored" and len(seen) == len(set(seen))
    assert seen == [s for s in ("received", "queued", "running", "scored") if s in seen]


def test_wait_exits_1_when_rejected(node, wallets, bundle_dir):
    cmd = [sys.executable, "-m", "prism_challenge.cli", "submit", str(bundle_dir("rej")),
           "--url", node.url, "--netuid", str(NETUID), "--wait", "--poll", "0.1",
           *wallet_args(wallets["miner"])]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(node.ledger.path), cwd=ROOT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not submission_rows(node.store) and time.monotonic() < deadline:
            time.sleep(0.05)
        (row,) = submission_rows(node.store)
        with node.store.session() as session:
            transition(session, row.id, Status.REJECTED, reason="AST policy: import socket")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert f"submission {row.id}: rejected (AST policy: import socket)" in out
