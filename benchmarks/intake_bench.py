"""What one submission costs the validator: bundle parse, signature check, full HTTP intake.

Uses a bundle at the size limits (two 64 KiB scripts + 16 KiB prism.toml), a real uvicorn
server on 127.0.0.1, a throw-away SQLite store, a local ledger holding the commitments and
real sr25519 keys (bittensor's http_auth). Prints measured times and rates; asserts
nothing. Run: .venv/bin/python benchmarks/intake_bench.py [N]
`--smoke` (the suite runs it): 3 uploads of each kind; any answer other than 201 / 401 / 403
stops it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import bittensor
import httpx
from bittensor import http_auth

from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.bundle import MAX_MANIFEST_BYTES, MAX_SCRIPT_BYTES, Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.config.settings import Settings
from prism_challenge.intake.signing import SUBMISSIONS_PATH, sign_submission
from prism_challenge.storage import Store
from prism_challenge.validator.app import create_app


def max_size_bundle(tag: int) -> Bundle:
    line = b"x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]\n"
    body = line * ((MAX_SCRIPT_BYTES - 64) // len(line))
    toml = b"# " + b"p" * (MAX_MANIFEST_BYTES - 64) + b'\nname = "bench"\n'
    return Bundle(
        {
            "architecture.py": body + f"# {tag}\n".encode(),
            "training.py": body,
            "prism.toml": toml,
        }
    )


class _Always:
    """A replay store that remembers nothing (the same headers are verified repeatedly)."""

    def check_and_store(self, hotkey_ss58: str, nonce_ns: int) -> bool:
        return True

SMOKE = "--smoke" in sys.argv  # one timing of each, 3 uploads of each kind


def timed(fn, repeat: int) -> float:
    repeat = 1 if SMOKE else repeat
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="prism-intake-bench-"))
    wallets = {}
    for name in ("bench", "outsider", "validator"):
        wallets[name] = bittensor.Wallet(name=name, hotkey="default", path=str(root / "wallets"))
        wallets[name].create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    wallet, outsider = wallets["bench"], wallets["outsider"]
    hotkey, receiver = wallet.hotkey, wallets["validator"].hotkey.ss58_address
    sample = max_size_bundle(0)
    wire = sample.to_wire()
    signed = sign_submission(wallet, wire, receiver=receiver)
    print(f"bundle at the limits: {len(wire)} wire bytes")
    parse_s = timed(lambda: Bundle.from_wire(wire), 50)
    verify_s = timed(lambda: http_auth.verify(
        signed, wire, method="POST", path=SUBMISSIONS_PATH, self_hotkey_ss58=receiver, max_age=3600,
        nonce_store=_Always()), 200)
    print(f"Bundle.from_wire (rules + ast.parse): {parse_s * 1e3:.2f} ms")
    print(f"http_auth.verify (sr25519):           {verify_s * 1e3:.2f} ms")

    settings = Settings(intake={"rate_limit_count": n + 10})
    store = Store(f"sqlite:///{root / 'prism.db'}")
    metagraph = StaticMetagraph.of([hotkey.ss58_address])
    ledger = LocalLedger(root / "ledger.db", metagraph)
    app = create_app(ApiDeps(settings=settings, store=store, metagraph=metagraph,
                             hotkey=receiver, subnet=ledger))
    bundles = [max_size_bundle(i + 1) for i in range(n)]
    bodies = [b.to_wire() for b in bundles]
    with ApiServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        accepted, refused, unregistered = [], [], []
        for bundle, body in zip(bundles, bodies, strict=True):
            ledger.commit(wallet, commitment_value(hotkey.ss58_address, bundle.digest))
            headers = sign_submission(wallet, body, receiver=receiver)
            start = time.perf_counter()
            response = http.post("/v1/submissions", content=body, headers=headers)
            accepted.append(time.perf_counter() - start)
            assert response.status_code == 201, response.text
        for _ in range(n):
            bad = {**sign_submission(wallet, wire, receiver=receiver),
                   "X-Bittensor-Signature": "0x" + "00" * 64}
            start = time.perf_counter()
            response = http.post("/v1/submissions", content=wire, headers=bad)
            refused.append(time.perf_counter() - start)
            assert response.status_code == 401
        for body in bodies:
            headers = sign_submission(outsider, body, receiver=receiver)
            start = time.perf_counter()
            response = http.post("/v1/submissions", content=body, headers=headers)
            unregistered.append(time.perf_counter() - start)
            assert response.status_code == 403, response.text
    store.close()
    for label, times in (
        ("accepted (201)", accepted),
        ("bad signature (401)", refused),
        ("unregistered (403)", unregistered),
    ):
        p95 = sorted(times)[int(0.95 * (len(times) - 1))]
        print(
            f"HTTP {label:20s} n={len(times)}: mean {statistics.mean(times) * 1e3:.1f} ms, "
            f"p95 {p95 * 1e3:.1f} ms, {len(times) / sum(times):.0f} req/s sequential"
        )


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a != "--smoke"]
    main(int(numbers[0]) if numbers else 3 if "--smoke" in sys.argv else 100)
