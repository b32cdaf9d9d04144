"""How long the static gates take per bundle: AST policy, fingerprint, duplicate scan.

Measures `check_policy` and `fingerprint` on the honest corpus and on a bundle at the size
limit (each script ~64 KiB of model code), and the duplicate comparison of one bundle
against N stored fingerprints. Prints milliseconds; asserts nothing.
Run: .venv/bin/python benchmarks/gates_speed.py [N]
`--smoke` (the suite runs it): 20 stored fingerprints, one timing each; it stops when the
scan finds a duplicate among fingerprints of other bundles.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from prism_challenge.bundle import MAX_SCRIPT_BYTES
from prism_challenge.bundle.sources import read_dir
from prism_challenge.gates import check_policy, fingerprint
from prism_challenge.gates.duplicates import find_original, record_fingerprint
from prism_challenge.storage import Store
from prism_challenge.storage.tables import Submission

HONEST = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "honest"

SMOKE = "--smoke" in sys.argv  # one timing of each, 20 fingerprints


def ms(fn, repeat: int = 20) -> float:
    times = []
    for _ in range(1 if SMOKE else repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def max_size(files: dict[str, bytes]) -> dict[str, bytes]:
    """Each script grown to just under the size limit with renamed copies of its classes."""
    out = {}
    for name, data in files.items():
        if not name.endswith(".py"):
            out[name] = data
            continue
        text, i = data.decode(), 0
        body = text
        while True:
            extra = "\n\n" + text.replace("class ", f"class V{i}").replace(
                "def build_model", f"def build_model_{i}").replace("def train", f"def train_{i}")
            if len((body + extra).encode()) > MAX_SCRIPT_BYTES:
                break
            body, i = body + extra, i + 1
        out[name] = body.encode()
    return out


def main(n: int) -> None:
    bundles = {p.name: read_dir(p) for p in sorted(HONEST.iterdir()) if p.is_dir()}
    print(f"{'bundle':<22}{'bytes':>8}{'policy ms':>11}{'fingerprint ms':>16}")
    for name, files in bundles.items():
        size = sum(len(v) for v in files.values())
        print(f"{name:<22}{size:>8}{ms(lambda f=files: check_policy(f)):>11.2f}"
              f"{ms(lambda f=files: fingerprint(f)):>16.2f}")
    big = max_size(bundles["gpt"])
    size = sum(len(v) for v in big.values())
    found = check_policy(big)
    print(f"{'gpt at the size limit':<22}{size:>8}{ms(lambda: check_policy(big), 5):>11.2f}"
          f"{ms(lambda: fingerprint(big), 5):>16.2f}  ({len(found)} violations)")

    # The real query: a store holding n fingerprints of other hotkeys, none a match.
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        prints = [fingerprint(files) for files in bundles.values() if files is not bundles["gpt"]]
        with store.session() as s:
            for i in range(n):
                fp = prints[i % len(prints)]
                s.add(Submission(id=i + 1, digest=f"{i:064x}", hotkey=f"hk{i}", status="queued",
                                 attempts=0, accepted_at=float(i), updated_at=0.0, bundle=b""))
                s.flush()
                record_fingerprint(s, submission_id=i + 1, hotkey=f"hk{i}",
                                   digest=f"{i:064x}", accepted_at=float(i), fp=fp)
        probe = fingerprint(bundles["gpt"])

        def scan() -> None:
            with store.session() as s:
                assert find_original(s, submission_id=n + 1, hotkey="me", digest="x" * 64,
                                     accepted_at=float(n), fp=probe, threshold=0.85) is None

        print(f"duplicate scan of one bundle against {n} stored fingerprints: "
              f"{ms(scan, 3):.1f} ms")
        store.close()


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a != "--smoke"]
    main(int(numbers[0]) if numbers else 20 if "--smoke" in sys.argv else 1000)
