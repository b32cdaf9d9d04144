"""What one submission costs the validator: bundle parse, signature check, full HTTP intake.

Uses a bundle at the size limits (two 64 KiB scripts + 16 KiB prism.toml), a real uvicorn
server on 127.0.0.1, a throw-away SQLite store and real sr25519 keys. Prints measured times
and rates; asserts nothing. Run: .venv/bin/python benchmarks/intake_bench.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import bittensor
import httpx

from prism_challenge.api import ApiDeps, ApiServer, create_app
from prism_challenge.bundle import MAX_MANIFEST_BYTES, MAX_SCRIPT_BYTES, Bundle
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.intake.signing import sign_request, verify_signature
from prism_challenge.storage import Store


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


def timed(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="prism-intake-bench-"))
    wallet = bittensor.Wallet(name="bench", hotkey="default", path=str(root / "wallets"))
    wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    hotkey = wallet.hotkey
    outsider = bittensor.Wallet(name="outsider", hotkey="default", path=str(root / "wallets"))
    outsider.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    sample = max_size_bundle(0)
    wire = sample.to_wire()
    signed = sign_request(hotkey, netuid=1, body=wire, timestamp=time.time())
    message = signed.message(wire)
    print(f"bundle at the limits: {len(wire)} wire bytes")
    parse_s = timed(lambda: Bundle.from_wire(wire), 50)
    verify_s = timed(lambda: verify_signature(hotkey.ss58_address, message, signed.signature), 200)
    print(f"Bundle.from_wire (rules + ast.parse): {parse_s * 1e3:.2f} ms")
    print(f"sr25519 verify:                       {verify_s * 1e3:.2f} ms")

    settings = Settings(intake={"rate_limit_count": n + 10})
    store = Store(f"sqlite:///{root / 'prism.db'}")
    app = create_app(
        ApiDeps(settings=settings, store=store, metagraph=StaticMetagraph.of([hotkey.ss58_address]))
    )
    bodies = [max_size_bundle(i + 1).to_wire() for i in range(n)]
    with ApiServer(app) as server, httpx.Client(base_url=server.url) as http:
        accepted, refused, unregistered = [], [], []
        for body in bodies:
            headers = sign_request(hotkey, netuid=1, body=body, timestamp=time.time()).as_http()
            start = time.perf_counter()
            response = http.post("/v1/submissions", content=body, headers=headers)
            accepted.append(time.perf_counter() - start)
            assert response.status_code == 201, response.text
        bad = {**signed.as_http(), "X-Prism-Signature": "0x" + "00" * 64}
        for _ in range(n):
            start = time.perf_counter()
            response = http.post("/v1/submissions", content=wire, headers=bad)
            refused.append(time.perf_counter() - start)
            assert response.status_code == 401
        for body in bodies:
            headers = sign_request(
                outsider.hotkey, netuid=1, body=body, timestamp=time.time()
            ).as_http()
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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
