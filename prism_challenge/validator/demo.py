"""The local end-to-end demo: a real validator process and real miners, on one machine.

Prepare the (demo) data if needed, make throwaway wallets (the validator's and the miners')
and a local metagraph, start `prism validator` as a subprocess, submit bundles with
`prism submit` subprocesses (each commits its bundle in the local ledger, then uploads it),
follow them to their scores, print the leaderboard and the dry-run weights plan, and stop
the validator with SIGTERM. The same driver is the end-to-end test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from prism_challenge.config.settings import Settings
from prism_challenge.storage import FINAL

CLI = [sys.executable, "-m", "prism_challenge.cli"]


class DemoError(RuntimeError):
    """The demo could not complete; the message says where and why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_wallets(root: Path, names: list[str]) -> dict[str, str]:
    """Create unencrypted throwaway wallets; returns name -> hotkey ss58 address."""
    import bittensor

    out = {}
    for name in names:
        wallet = bittensor.Wallet(name=name, hotkey="default", path=str(root))
        wallet.create_new_coldkey(use_password=False, overwrite=True, suppress=True)
        wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
        out[name] = wallet.hotkey.ss58_address
    return out


def ensure_data(settings: Settings, console: Console) -> None:
    from prism_challenge.data import load_spec, prepare_data

    root = Path(settings.data.root)
    if (root / "MANIFEST.json").is_file():
        console.print(f"data: using the prepared data in {root}", markup=False)
        return
    console.print(f"data: preparing {settings.data.manifest} into {root} (once)", markup=False)
    prepare_data(load_spec(settings.data.manifest), root, progress=True, console=console)


@dataclass
class Demo:
    settings: Settings
    work: Path
    bundles: list[Path]
    console: Console
    timeout_s: float = 900.0

    def config(self, hotkeys: dict[str, str], port: int) -> Path:
        """The validator's config: the operator's settings + a fresh local node in `work`."""
        doc = self.settings.model_dump(mode="json")
        doc["storage"]["url"] = f"sqlite:///{self.work / 'prism.db'}"
        doc["chain"].update(mode="local", allow_any_hotkey=False,
                            metagraph_file=str(self.work / "metagraph.json"),
                            local_ledger=str(self.work / "local-chain.db"))
        doc["wallet"] = {"name": "validator", "hotkey": "default",
                         "path": str(self.work / "wallets")}
        doc["validator"].update(work_dir=str(self.work / "runs"),
                                poll_s=min(doc["validator"]["poll_s"], 0.5))
        doc["intake"].update(host="127.0.0.1", port=port)
        doc["weights"]["burn_uid"] = 0
        if not os.environ.get(self.settings.llm.api_key_env):
            doc["llm"]["enabled"] = False  # no key here: the explicit, visible choice
        (self.work / "metagraph.json").write_text(json.dumps(
            {"hotkeys": list(hotkeys.values()), "block": 0}))
        path = self.work / "config.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def run(self) -> dict[int, dict]:
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "prism.db").unlink(missing_ok=True)
        (self.work / "local-chain.db").unlink(missing_ok=True)
        ensure_data(self.settings, self.console)
        names = ["burn"] + [f"miner{i}" for i in range(len(self.bundles))]
        hotkeys = make_wallets(self.work / "wallets", names)
        make_wallets(self.work / "wallets", ["validator"])
        port = free_port()
        config = self.config(hotkeys, port)
        url = f"http://127.0.0.1:{port}"
        log = (self.work / "validator.log").open("wb")
        self.console.print(f"validator: starting on {url} (log: {self.work / 'validator.log'})",
                           markup=False)
        validator = subprocess.Popen([*CLI, "validator", "--config", str(config)],
                                     stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy(url, validator)
            ids = {}
            for i, bundle in enumerate(self.bundles):
                ids[self._submit(bundle, f"miner{i}", url, config)] = bundle
            results = self._follow(url, ids, validator)
            self._report(url, config, results)
        finally:
            validator.send_signal(signal.SIGTERM)
            try:
                code = validator.wait(60)
            except subprocess.TimeoutExpired:
                validator.kill()
                code = validator.wait()
            log.close()
        self.console.print(f"validator: stopped (exit status {code})")
        if code != 0:
            raise DemoError(f"the validator exited with status {code}; see "
                            f"{self.work / 'validator.log'}")
        return results

    def _wait_healthy(self, url: str, validator: subprocess.Popen) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if validator.poll() is not None:
                tail = (self.work / "validator.log").read_text(errors="replace")[-3000:]
                raise DemoError(f"the validator exited at start-up:\n{tail}")
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise DemoError("the validator did not answer /v1/health within 120 s")

    def _submit(self, bundle: Path, wallet: str, url: str, config: Path) -> int:
        out = subprocess.run(
            [*CLI, "submit", str(bundle), "--url", url, "--wallet.name", wallet,
             "--wallet.hotkey", "default", "--wallet.path", str(self.work / "wallets"),
             "--config", str(config)], capture_output=True, text=True, timeout=120)
        self.console.print(out.stdout.rstrip(), highlight=False, markup=False)
        if out.returncode != 0:
            raise DemoError(f"prism submit {bundle} failed: {out.stderr.strip()}")
        found = re.search(r"submission (\d+)", out.stdout)
        if found is None:
            raise DemoError(f"prism submit printed no submission id: {out.stdout!r}")
        return int(found.group(1))

    def _follow(self, url: str, ids: dict[int, Path], validator) -> dict[int, dict]:
        deadline = time.monotonic() + self.timeout_s
        seen: dict[int, str] = {}
        with self.console.status("waiting for scores") as status:
            while time.monotonic() < deadline:
                if validator.poll() is not None:
                    raise DemoError("the validator died; see its log")
                views = {sid: httpx.get(f"{url}/v1/submissions/{sid}", timeout=10).json()
                         for sid in ids}
                for sid, view in views.items():
                    state = view["status"] + (f", replay {view['verification']['status']}"
                                              if view.get("verification") else "")
                    if seen.get(sid) != state:
                        seen[sid] = state
                        self.console.print(f"submission {sid} ({ids[sid].name}): {state}",
                                           markup=False)
                status.update(" | ".join(f"#{sid} {v['status']}" for sid, v in views.items()))
                if all(v["status"] in FINAL and not _replaying(v) for v in views.values()):
                    return views
                time.sleep(1)
        raise DemoError(f"submissions not final after {self.timeout_s:.0f} s: {seen}")

    def _report(self, url: str, config: Path, results: dict[int, dict]) -> None:
        """The leaderboard (a leader's replay passed), then `prism weights`."""
        board = httpx.get(f"{url}/v1/leaderboard", timeout=10).json()
        table = Table(title=f"leaderboard (corpus: {board.get('corpus')})")
        for col in ("rank", "submission", "hotkey", "bpb", "held-out delta", "note"):
            table.add_column(col)
        for standing in board.get("standings", []):
            e = standing["entry"]
            note = ("leader " if standing["leader"] else "") + (
                "unreviewed" if e.get("unreviewed") else "")
            table.add_row(str(standing["rank"]), str(e["submission_id"]), e["hotkey"][:12],
                          f"{e['bpb']:.4f}", f"{e['heldout_delta']:.4f}", note.strip())
        for e in board.get("departed", []):
            table.add_row("-", str(e["submission_id"]), e["hotkey"][:12], f"{e['bpb']:.4f}",
                          f"{e['heldout_delta']:.4f}", "left the subnet: not ranked")
        for e in board.get("ineligible", []):
            table.add_row("-", str(e["submission_id"]), e["hotkey"][:12], f"{e['bpb']:.4f}",
                          f"{e['heldout_delta']:.4f}", Text(f"ineligible: {e.get('reason')}"))
        self.console.print(table)
        for sid, view in results.items():
            if view["status"] != "scored":
                self.console.print(f"submission {sid}: {view['status']}: {view.get('reason')}",
                                   markup=False)
        out = subprocess.run([*CLI, "weights", "--config", str(config)], capture_output=True,
                             text=True, timeout=120)
        self.console.print(out.stdout.rstrip(), highlight=False, markup=False)


def _replaying(view: dict) -> bool:
    """A contender replay is still to come or under way."""
    check = view.get("verification")
    return check is not None and check["status"] in ("queued", "running")
