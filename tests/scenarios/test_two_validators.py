"""Two `prism validator` processes on 127.0.0.1 sharing one local ledger (the local chain):
miners commit and submit without --url, both validators accept, a near-copy committed
later loses precedence on both (even when its upload arrives first), and a bundle whose
digest is not the one committed is refused by both."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import bittensor
import httpx
import pytest
import yaml
from cli_kit import prism_in_process
from validator_kit import ROOT, TINY, wait_for

from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.submit import SubmissionClient, SubmitError
from prism_challenge.validator.demo import free_port, make_wallets

CLI = [sys.executable, "-m", "prism_challenge.cli"]
MINERS = ["miner", "copier", "miner2", "copier2"]


def near_copy(src: Path, dst: Path, tag: str) -> Path:
    """Same code after normalisation (a comment and a literal differ): another digest."""
    dst.mkdir()
    arch = (src / "architecture.py").read_text().replace("dim: int = 32", "dim: int = 48")
    (dst / "architecture.py").write_text(f"# {tag}\n" + arch)
    (dst / "training.py").write_bytes((src / "training.py").read_bytes())
    return dst


def variant(src: Path, dst: Path, lr: str) -> Path:
    """A design of its own: a gate and a causal running mean after the mix (about 0.77
    similar to the tiny bundle, under gates.duplicate_threshold); `lr` sets its digest."""
    dst.mkdir()
    mix = "        x = x + self.mix(F.pad(x, (2, 0)))\n"
    (dst / "architecture.py").write_text((src / "architecture.py").read_text().replace(
        mix, mix + "        x = x * torch.sigmoid(x)\n"
        "        x = torch.cumsum(x, dim=2) / (1 + torch.arange(x.shape[2], device=x.device))\n"))
    (dst / "training.py").write_text((src / "training.py").read_text().replace("1e-2", lr))
    return dst


def status_of(url: str, sid: int) -> dict:
    return httpx.get(f"{url}/v1/submissions/{sid}", timeout=10).json()


def submitted(out: str) -> dict[str, int]:
    """url -> submission id, from `prism submit` output."""
    return {url: int(sid) for url, sid in
            re.findall(r"^(http://\S+): bundle \w+ accepted as submission (\d+)", out, re.M)}


@pytest.mark.timeout(600)
def test_two_validators_agree_on_commitments_and_precedence(tiny_config, tmp_path):
    wallets_dir = tmp_path / "wallets"
    hotkeys = make_wallets(wallets_dir, MINERS + ["validator_b"])
    (tmp_path / "metagraph.json").write_text(json.dumps({"hotkeys": [hotkeys[m]
                                                                     for m in MINERS]}))
    base = yaml.safe_load(tiny_config(
        chain={"allow_any_hotkey": False, "metagraph_file": str(tmp_path / "metagraph.json"),
               "commitment_wait_s": 1.0},
        gates={"settle_s": 8.0}).read_text())
    configs, urls, procs = [], [], []
    for name, wallet in (("a", "validator"), ("b", "validator_b")):
        port = free_port()
        doc = json.loads(json.dumps(base))
        doc["wallet"]["name"] = wallet
        doc["storage"] = {"url": f"sqlite:///{tmp_path / name / 'prism.db'}"}
        doc["intake"] = {"host": "127.0.0.1", "port": port}
        doc.setdefault("validator", {})["work_dir"] = str(tmp_path / name / "runs")
        (tmp_path / name).mkdir()
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        configs.append(path)
        urls.append(f"http://127.0.0.1:{port}")
        procs.append(subprocess.Popen([*CLI, "validator", "--config", str(path)], cwd=ROOT,
                                      stdout=(tmp_path / f"{name}.log").open("wb"),
                                      stderr=subprocess.STDOUT))
    ledger = LocalLedger(Path(base["chain"]["local_ledger"]))

    def prism_submit(bundle: Path, wallet: str):
        # in the test's process (tests/cli_kit.py): the validators are the processes here
        return prism_in_process("submit", str(bundle), "--wallet", wallet, "--wallet-path",
                                str(wallets_dir), "--config", str(configs[0]))

    try:
        for url in urls:
            wait_for(lambda u=url: _healthy(u), 180, f"{url}/v1/health")
        # Each validator published its intake address: miners need no --url.
        assert sorted(e.url for e in ledger.validators()) == sorted(urls)

        # 1. A miner commits and submits to every validator; both accept.
        original = TINY
        done = prism_submit(original, "miner")
        assert done.returncode == 0, done.stdout + done.stderr
        first = submitted(done.stdout)
        assert sorted(first) == sorted(urls), done.stdout
        block = int(re.search(r"committed at block (\d+)", done.stdout).group(1))
        for url, sid in first.items():
            assert status_of(url, sid)["block"] == block

        # 2. A near-copy, committed later, is accepted at intake by both, then loses
        #    precedence on both: rejected as a duplicate of the miner's submission.
        copy = near_copy(original, tmp_path / "copy", "mine now")
        done = prism_submit(copy, "copier")
        assert done.returncode == 0, done.stdout + done.stderr
        copies = submitted(done.stdout)
        for url in urls:
            view = wait_for(lambda u=url: _final_or_gated(u, copies[u]), 120, "the copy gated")
            assert view["status"] == "rejected", view
            assert f"near-copy of submission {first[url]}" in view["reason"]
            assert status_of(url, first[url])["status"] != "rejected"

        # 3. A bundle whose digest is not what the hotkey committed is refused by both.
        honest = Bundle.from_dir(variant(original, tmp_path / "honest", "3e-3"))
        other = Bundle.from_dir(variant(original, tmp_path / "other", "5e-3"))
        copier = bittensor.Wallet(name="copier", hotkey="default", path=str(wallets_dir))
        ledger.commit(copier, commitment_value(copier.hotkey.ss58_address, honest.digest))
        for url in urls:
            with SubmissionClient(url, signer=copier) as client, \
                    pytest.raises(SubmitError) as refused:
                client.submit(other)
            assert (refused.value.status, refused.value.rule) == (409, "COMMITMENT_MISMATCH")

        # 4. Arrival order decides nothing: miner2 commits first but uploads late; copier2
        #    commits a near-copy later and uploads first. Both validators hold new
        #    submissions for gates.settle_s and gate them in commitment order.
        design = variant(original, tmp_path / "design2", "2e-3")
        bundle2 = Bundle.from_dir(design)
        copy2 = Bundle.from_dir(near_copy(design, tmp_path / "copy2", "faster"))
        miner2, copier2 = (bittensor.Wallet(name=n, hotkey="default", path=str(wallets_dir))
                           for n in ("miner2", "copier2"))
        early = ledger.commit(miner2, commitment_value(miner2.hotkey.ss58_address,
                                                       bundle2.digest)).block
        ledger.commit(copier2, commitment_value(copier2.hotkey.ss58_address, copy2.digest))
        copies2, late = {}, {}
        for url in urls:
            with SubmissionClient(url, signer=copier2) as client:
                copies2[url] = client.submit(copy2).id
        for url in urls:
            with SubmissionClient(url, signer=miner2) as client:
                receipt = client.submit(bundle2)
            assert receipt.block == early < status_of(url, copies2[url])["block"]
            late[url] = receipt.id
        for url in urls:
            view = wait_for(lambda u=url: _final_or_gated(u, copies2[u]), 120, "copy2 gated")
            assert view["status"] == "rejected", view
            assert f"near-copy of submission {late[url]}" in view["reason"]
            assert status_of(url, late[url])["status"] != "rejected"
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _final_or_gated(url: str, sid: int) -> dict | None:
    view = status_of(url, sid)
    return view if view["status"] != "received" else None
