"""Real sr25519 hotkey addresses (deterministic seeds) and scored entries for weight plans."""

from __future__ import annotations

from bittensor.sp_core import Keypair

from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry

HOTKEYS = [Keypair.create_from_seed(bytes([i + 1]) * 32).ss58_address for i in range(6)]


def entry(sid: int, hotkey: str, bpb: float, *, eligible: bool = True) -> Entry:
    return Entry(
        submission_id=sid, hotkey=hotkey, digest=f"{sid:064x}", accepted_at=float(sid),
        bpb=bpb, heldout_delta=1.0, eligible=eligible, corpus="demo", scored_at=float(sid),
        reason=None if eligible else "causality: leak", verification="passed",
    )


def make_settings(**weights) -> Settings:
    return Settings(weights=weights) if weights else Settings()
