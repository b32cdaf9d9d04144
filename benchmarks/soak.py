"""Soak: a real local validator under steady submission load, SIGKILLed at random moments.

The load (this process) sends, at a steady pace: honest bundles, attack bundles (the policy
fixtures, refused by the gates after intake), garbage bodies (signed by a registered hotkey,
by an unregistered one, or badly signed) and duplicate uploads (the same bundle again from
its hotkey: an idempotent 200; from another hotkey: a 409). An upload whose answer is lost
(connection refused or reset while the validator is down) is retried, as a miner would.

A separate process (this file with `--supervise`) runs `prism validator`, SIGKILLs it at
uniformly random moments and restarts it, sampling its peak resident memory (VmHWM). After
`--duration` seconds the killing stops and the validator drains the queue; then the SQLite
store is checked:

- accepted: submissions the load got a receipt (201 or 200) for;
- scored once: accepted submissions settled exactly once (scored with one score row and
  one registry observation, or rejected/failed with none); the goal is `accepted`;
- lost: accepted but missing, not final after the drain, or scored without a score;
- double: more than one score row or registry observation for one submission;
- 5xx: answers of 500 or more to anything the load sent (uploads and status reads).

Run (about duration + drain minutes; nice it on a shared machine):
    nice -n 10 .venv/bin/python benchmarks/soak.py --duration 420 --drain 600
    .venv/bin/python benchmarks/soak.py --smoke [--data DIR]   # 8 s of load, kills 2-5 s apart
The last line is `soak: accepted N, scored once N, lost 0, double 0, 5xx 0, peak rss X MB,
kills K`. The smoke (one honest bundle of 3 steps, the rest refused before any sandbox)
stops with an error unless the validator was killed at least once and every accepted
submission settled exactly once with no 5xx.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import yaml

from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.storage import FINAL
from prism_challenge.submit import SubmissionClient, SubmitError
from prism_challenge.validator.demo import free_port, make_wallets

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "prism_challenge.cli"]
HONEST = ROOT / "tests" / "fixtures" / "sandbox" / "tiny"
ATTACKS = sorted(p for p in (ROOT / "tests" / "fixtures" / "attacks").glob("a*") if p.is_dir())
NETUID = 1


# ---- the one place the soak signs and uploads (the miner's client) -------------------------


class _RawBody:
    """Garbage that the client uploads as if it were a bundle's wire bytes."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def to_wire(self) -> bytes:
        return self._data


def commit(ledger: LocalLedger, wallet, bundle: Bundle) -> None:
    """Commit `bundle` for the wallet's hotkey first, as `prism submit` does (an identical
    latest commitment is reused): the validator accepts only the latest committed digest."""
    value = commitment_value(wallet.hotkey.ss58_address, bundle.digest)
    seen = ledger.latest_commitment(wallet.hotkey.ss58_address)
    if seen is None or seen.value != value:
        ledger.commit(wallet, value)


def upload(url: str, signer, body: Bundle | _RawBody) -> tuple[int | None, dict]:
    """(HTTP status or None when no answer came, receipt or refusal as a dict)."""
    with SubmissionClient(url, signer=signer, timeout_s=30) as client:
        try:
            receipt = client.submit(body)  # type: ignore[arg-type]
        except SubmitError as exc:
            return exc.status, {"rule": exc.rule, "detail": exc.detail}
    return (200 if receipt.idempotent else 201), receipt.model_dump()


# ---- the validator's supervisor: a separate process that kills and restarts it --------------


def _vm_hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def supervise(config: Path, control: Path, kill_min: float, kill_max: float, seed: int) -> None:
    """Keep `prism validator` running; SIGKILL it at random until `control/calm` exists;
    SIGTERM it once `control/stop` exists, then write `control/supervisor.json`.

    One kill in five lands during start-up (1-5 s after the start: recovery itself is
    interrupted); the others `kill_min`-`kill_max` s after the node answers, because start-up
    alone (imports, recovery) takes longer than that on a loaded 2-core machine."""
    rng = random.Random(seed)
    log = (control / "validator.log").open("ab")
    intake = yaml.safe_load(config.read_text())["intake"]
    url = f"http://{intake['host']}:{intake['port']}"

    def start() -> tuple[subprocess.Popen, float | None]:
        proc = subprocess.Popen([*CLI, "validator", "--config", str(config)], cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT)
        early = rng.random() < 0.2
        return proc, (time.monotonic() + rng.uniform(1, 5)) if early else None

    (proc, next_kill), kills, starts, unexpected, peak_kb = start(), 0, 1, 0, 0
    while not (control / "stop").exists():
        peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
        if proc.poll() is not None:
            unexpected += 1
            (proc, next_kill), starts = start(), starts + 1
        elif next_kill is None and _healthy(url):
            next_kill = time.monotonic() + rng.uniform(kill_min, kill_max)
        elif (next_kill is not None and time.monotonic() >= next_kill
              and not (control / "calm").exists()):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            time.sleep(rng.uniform(0.0, 2.0))  # sometimes the load finds nobody home
            (proc, next_kill), starts = start(), starts + 1
        time.sleep(0.2)
    peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    result = {"kills": kills, "starts": starts, "unexpected_exits": unexpected,
              "peak_rss_kb": peak_kb, "final_exit": code}
    (control / "supervisor.json").write_text(json.dumps(result))


# ---- the node and its load ----------------------------------------------------------------


def prepare_node(work: Path, port: int, hotkeys: dict[str, str], steps: int = 12,
                 data: Path | None = None) -> Path:
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl

    if data is None:
        source = write_jsonl(work / "source" / "docs.jsonl", english_like_documents(850, seed=0))
        data = work / "data"
        prepare_data(small_spec([source]), data)
    registered = [h for name, h in hotkeys.items() if name not in ("stranger", "validator")]
    (work / "metagraph.json").write_text(json.dumps({"hotkeys": registered, "block": 1}))
    doc = {
        "chain": {"netuid": NETUID, "mode": "local", "allow_any_hotkey": False,
                  "metagraph_file": str(work / "metagraph.json"),
                  "local_ledger": str(work / "local-chain.db")},
        "wallet": {"name": "validator", "hotkey": "default", "path": str(work / "wallets")},
        "storage": {"url": f"sqlite:///{work / 'prism.db'}"},
        "data": {"root": str(data.resolve())},
        "challenge": {"seq_len": 32, "token_budget": 32 * 8 * steps, "deadline_s": 30},
        "scoring": {"heldout_positions": 256, "heldout_cuts_per_row": 4},
        "sandbox": {"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
        "validator": {"poll_s": 0.2, "epoch_s": 5, "work_dir": str(work / "runs")},
        "intake": {"host": "127.0.0.1", "port": port, "rate_limit_count": 10_000},
        "llm": {"enabled": False},
    }
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def bundle_of(source: Path, tag: str) -> Bundle:
    """The two scripts of `source`, made distinct by a trailing comment."""
    return Bundle({"architecture.py": (source / "architecture.py").read_bytes(),
                   "training.py": (source / "training.py").read_bytes()
                   + f"\n# soak {tag}\n".encode()})


class Load:
    """Steady uploads of every kind; retries the ones whose answer was lost."""

    def __init__(self, url: str, wallets: dict, ledger: LocalLedger,
                 rng: random.Random) -> None:
        self.url, self.wallets, self.ledger, self.rng = url, wallets, ledger, rng
        self.accepted: dict[int, str] = {}  # submission id -> kind
        self.mine: dict[str, tuple[str, Bundle]] = {}  # digest -> (hotkey name, bundle)
        self.retry: list[tuple[str, str, Bundle]] = []
        self.answers: Counter[str] = Counter()
        self.server_errors = 0
        self.serial = 0

    def _send(self, kind: str, who: str, body: Bundle | _RawBody) -> None:
        if isinstance(body, Bundle):
            commit(self.ledger, self.wallets[who], body)
        status, answer = upload(self.url, self.wallets[who], body)
        label = f"{kind}:{status}:{answer.get('rule', '')}" if status != 201 else f"{kind}:201"
        self.answers[label] += 1
        if status is None or status >= 500:
            self.server_errors += status is not None
            if isinstance(body, Bundle) and kind in ("honest", "attack"):
                self.retry.append((kind, who, body))  # no answer: try again, as a miner would
            return
        if status in (200, 201) and isinstance(body, Bundle):
            self.accepted.setdefault(answer["id"], kind)
            self.mine.setdefault(body.digest, (who, body))

    def new(self, kind: str) -> None:
        self.serial += 1
        if kind == "honest":  # one hotkey: the duplicate gate ignores a miner's own lineage
            self._send(kind, "honest", bundle_of(HONEST, f"{self.serial}"))
        elif kind == "attack":
            self._send(kind, "attacker", bundle_of(self.rng.choice(ATTACKS), f"{self.serial}"))
        elif kind == "garbage":
            data = self.rng.randbytes(self.rng.randint(0, 4096))
            self._send(kind, self.rng.choice(["honest", "stranger"]), _RawBody(data))
        elif kind == "duplicate" and self.mine:
            who, bundle = self.mine[self.rng.choice(sorted(self.mine))]
            self._send(kind, self.rng.choice([who, "copier"]), bundle)

    def retry_lost(self) -> None:
        pending, self.retry = self.retry, []
        for kind, who, body in pending:
            self._send(kind, who, body)

    def poll_status(self) -> None:
        """Read a few submissions' status (reads must never 5xx either)."""
        for sid in self.rng.sample(sorted(self.accepted), min(3, len(self.accepted))):
            try:
                status = httpx.get(f"{self.url}/v1/submissions/{sid}", timeout=10).status_code
            except httpx.HTTPError:
                continue
            self.server_errors += status >= 500


def wait_healthy(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the validator did not answer {url}/v1/health in {timeout_s:.0f} s")


def run_load(load: Load, duration_s: float, pace_s: float, honest_every_s: float) -> None:
    end = time.monotonic() + duration_s
    next_honest = time.monotonic()
    while time.monotonic() < end:
        if time.monotonic() >= next_honest:
            load.new("honest")
            next_honest = time.monotonic() + honest_every_s
        load.new(load.rng.choices(["attack", "garbage", "duplicate"], [2, 3, 3])[0])
        load.retry_lost()
        load.poll_status()
        time.sleep(pace_s)


def settled(db: Path, ids: list[int]) -> bool:
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT id, status FROM submissions").fetchall())
    return all(rows.get(sid) in {s.value for s in FINAL} for sid in ids)


def audit(db: Path, accepted: dict[int, str]) -> dict:
    """Count from the store what happened to every accepted submission."""
    with sqlite3.connect(db) as conn:
        status = dict(conn.execute("SELECT id, status FROM submissions").fetchall())
        scores = Counter(sid for (sid,) in conn.execute("SELECT submission_id FROM scores"))
        observed = Counter(int(key.split(":")[1]) for (key,) in conn.execute(
            "SELECT key FROM registry_events WHERE key LIKE 'obs:%'"))
    final = {s.value for s in FINAL}
    outcome: Counter[str] = Counter()
    once = lost = double = 0
    for sid, kind in accepted.items():
        st = status.get(sid)
        outcome[f"{kind}->{st}"] += 1
        if scores[sid] > 1 or observed[sid] > 1 or (st != "scored" and scores[sid]):
            double += 1
        elif st not in final or (st == "scored" and scores[sid] != 1):
            lost += 1
        else:
            once += 1
    unacknowledged = sorted(set(status) - set(accepted))
    return {"once": once, "lost": lost, "double": double, "outcomes": dict(outcome),
            "unacknowledged": unacknowledged}


def orphans(work: Path) -> int:
    """Processes still running with the soak's work directory on their command line."""
    count = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(work).encode() in (proc / "cmdline").read_bytes():
                count += 1
        except OSError:
            continue
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=420, help="seconds of load + kills")
    parser.add_argument("--drain", type=float, default=600, help="max seconds to settle")
    parser.add_argument("--kill-min", type=float, default=15)
    parser.add_argument("--kill-max", type=float, default=60)
    parser.add_argument("--pace", type=float, default=2.0, help="seconds between uploads")
    parser.add_argument("--honest-every", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=None,
                        help="a prepared data folder; default: a synthetic corpus built here")
    parser.add_argument("--smoke", action="store_true",
                        help="8 s of load, kills 2-5 s after start, one honest bundle of 3 "
                             "steps; fails unless every accepted submission settled once")
    parser.add_argument("--supervise", nargs=2, metavar=("CONFIG", "CONTROL"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    steps = 12
    if args.smoke:
        # 8 s of load: the first kill comes 2-5 s after the node answers, so at least one
        steps, args.duration, args.drain = 3, 8, 300  # 24 rows: a step may take 11
        args.kill_min, args.kill_max, args.pace, args.honest_every = 2, 5, 1.0, 1e9
    if args.supervise:
        supervise(Path(args.supervise[0]), Path(args.supervise[1]), args.kill_min,
                  args.kill_max, args.seed)
        return

    work = Path(tempfile.mkdtemp(prefix="prism-soak-"))
    names = ["honest", "attacker", "copier", "stranger"]
    hotkeys = make_wallets(work / "wallets", [*names, "validator"])
    import bittensor

    wallets = {n: bittensor.Wallet(name=n, hotkey="default", path=str(work / "wallets"))
               for n in names}
    port = free_port()
    config = prepare_node(work, port, hotkeys, steps, args.data)
    url = f"http://127.0.0.1:{port}"
    print(f"soak: work dir {work}, validator {url}, load {args.duration:.0f} s, kills every "
          f"{args.kill_min:.0f}-{args.kill_max:.0f} s", flush=True)
    supervisor = subprocess.Popen(
        [sys.executable, __file__, "--supervise", str(config), str(work),
         "--kill-min", str(args.kill_min), "--kill-max", str(args.kill_max),
         "--seed", str(args.seed)], cwd=ROOT)
    started = time.monotonic()
    wait_healthy(url, 180)
    load = Load(url, wallets, LocalLedger(work / "local-chain.db"), random.Random(args.seed))
    run_load(load, args.duration, args.pace, args.honest_every)
    (work / "calm").touch()  # no more kills; let the queue drain
    print(f"soak: load done after {time.monotonic() - started:.0f} s; draining", flush=True)
    deadline = time.monotonic() + args.drain
    while time.monotonic() < deadline:
        load.retry_lost()
        if not load.retry and settled(work / "prism.db", sorted(load.accepted)):
            break
        time.sleep(2)
    drained_s = time.monotonic() - started
    (work / "stop").touch()
    supervisor.wait(300)
    sup = json.loads((work / "supervisor.json").read_text())
    found = audit(work / "prism.db", load.accepted)
    left = orphans(work)
    print(f"soak: {drained_s:.0f} s in all; validator killed {sup['kills']} times, started "
          f"{sup['starts']} times, {sup['unexpected_exits']} unexpected exits, final exit "
          f"status {sup['final_exit']}; {left} processes left behind")
    print("soak: answers " + ", ".join(f"{k} x{v}" for k, v in sorted(load.answers.items())))
    print("soak: outcomes " + ", ".join(f"{k} x{v}" for k, v in sorted(found["outcomes"].items())))
    print(f"soak: rows without a receipt {len(found['unacknowledged'])}, uploads still "
          f"unanswered {len(load.retry)}")
    print(f"soak: accepted {len(load.accepted)}, scored once {found['once']}, lost "
          f"{found['lost']}, double {found['double']}, 5xx "
          f"{load.server_errors}, peak rss {sup['peak_rss_kb'] / 1024:.0f} MB, kills "
          f"{sup['kills']}")
    if args.smoke:
        kinds = set(load.accepted.values())
        broken = (found["once"] != len(load.accepted) or found["lost"] or found["double"]
                  or load.server_errors or not sup["kills"] or "honest" not in kinds
                  or found["outcomes"].get("honest->scored", 0) < 1 or load.retry or left)
        if broken:
            sys.exit("soak smoke: the validator lost, doubled or failed a submission, left "
                     "processes behind, was never killed, or scored no honest bundle")


if __name__ == "__main__":
    main()
