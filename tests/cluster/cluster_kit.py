"""Helpers of the cluster tests: tiny settings, tiny bundles, workers run together."""

from __future__ import annotations

import threading
from pathlib import Path

from prism_challenge.bundle import Bundle
from prism_challenge.config import Settings

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "sandbox" / "tiny"


def tiny_settings(tmp_path: Path, data_root: Path, address: str = "auto", **sections
                  ) -> Settings:
    doc = {
        "data": {"root": str(data_root)},
        "challenge": {"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 30},
        "sandbox": {"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
        "scoring": {"heldout_positions": 256, "heldout_cuts_per_row": 4},
        "verification": {"snapshot_steps": 2},
        "validator": {"executor": "ray", "work_dir": str(tmp_path / "runs"), "poll_s": 0.2},
        "ray": {"address": address, "rescan_s": 0.5},
        "llm": {"enabled": False},
    }
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return Settings(**doc)


def tiny_bundle(lr: str = "1e-2") -> Bundle:
    files = {n: (TINY / n).read_bytes() for n in ("architecture.py", "training.py")}
    files["training.py"] = files["training.py"].replace(b"lr=1e-2", f"lr={lr}".encode())
    return Bundle(files)


def together(workers) -> list:
    """`run_once` on every worker at the same time (one thread each); their results."""
    results = [None] * len(workers)

    def go(i):
        results[i] = workers[i].run_once()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
