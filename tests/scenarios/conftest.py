"""Scenario tests: real processes (prism validator, prism submit) across packages, tiny budgets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml


@pytest.fixture
def tiny_config(tmp_path, prepared_data):
    """The node is wallet "validator" under tmp_path/wallets; its chain is a local ledger."""
    from prism_challenge.validator.demo import make_wallets

    make_wallets(tmp_path / "wallets", ["validator"])

    def write(**sections) -> Path:
        doc = {
            "wallet": {"name": "validator", "hotkey": "default",
                       "path": str(tmp_path / "wallets")},
            "chain": {"local_ledger": str(tmp_path / "local-chain.db")},
            "data": {"root": str(prepared_data)},
            "challenge": {"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 30},
            "scoring": {"heldout_positions": 256, "heldout_cuts_per_row": 4},
            "verification": {"snapshot_steps": 2},
            "sandbox": {"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
            "validator": {"poll_s": 0.2, "epoch_s": 2},
            "llm": {"enabled": False},
        }
        for name, values in sections.items():
            doc.setdefault(name, {}).update(values)
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    return write
