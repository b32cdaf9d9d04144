"""The held-out round: one secret decides the held-out plan for every run of a round.

A score must not depend on a draw. Every run measured in a round is scored on the same
held-out positions (so two runs of a round are a paired comparison, and the same bundle
scores the same twice), and anyone can recompute a past score once the round's secret is
revealed: the validator shows `commit` (sha256 of the secret) before and during the round
and the secret after it. The secret never enters a sandbox and the held-out rows are val
rows, never in the training stream, so a model cannot learn which positions are scored.

A round's secret is derived from a validator's master secret and the round's index
(HMAC-SHA256), so revealing one round's secret tells nothing about the next one's.
`LOCAL_ROUND` is the fixed, public round `prism eval` uses: two local evaluations of a
bundle are measured on the same positions. It is public, so it ranks nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class HeldOutRound:
    """A named round and its secret (32 bytes)."""

    label: str
    secret: bytes

    @property
    def commit(self) -> str:
        """sha256 of the secret, hex: published before the round, checked after the reveal."""
        return hashlib.sha256(self.secret).hexdigest()

    def rng(self, manifest_sha256: str, seq_len: int) -> np.random.Generator:
        """The generator that draws the round's plan on one data version and row length."""
        seed = hashlib.sha256(b"prism held-out plan\0" + self.secret + b"\0"
                              + manifest_sha256.encode() + b"\0" + str(seq_len).encode())
        return np.random.default_rng(int.from_bytes(seed.digest(), "big"))


def round_of(master: bytes, index: int) -> HeldOutRound:
    """Round `index` of a validator whose master secret is `master`."""
    if index < 0:
        raise ValueError(f"a round index is >= 0, got {index}")
    secret = hmac.new(master, f"prism held-out round {index}".encode(), "sha256").digest()
    return HeldOutRound(label=f"round-{index}", secret=secret)


def reveal(label: str, secret_hex: str, commit: str) -> HeldOutRound:
    """A revealed round, checked against the commit shown before it; ValueError if not."""
    try:
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        raise ValueError(f"the revealed secret of {label} is not hex; paste it as shown") from None
    got = HeldOutRound(label, secret)
    if got.commit != commit:
        raise ValueError(f"the revealed secret of {label} hashes to {got.commit[:16]}…, not the "
                         f"commit {commit[:16]}… shown before the round: do not trust its plan")
    return got


LOCAL_ROUND = HeldOutRound(
    "local-0", hashlib.sha256(b"prism local held-out round 0 (public: prism eval)").digest())


class RoundClock:
    """A validator's rounds: round k covers [k * round_s, (k + 1) * round_s) of Unix time.

    The master secret lives in one file (created once, mode 0600) beside the validator's run
    directory, so a restart keeps its rounds. Only a round that has ended may be revealed."""

    def __init__(self, master: bytes, round_s: float) -> None:
        if round_s <= 0:
            raise ValueError(f"a held-out round lasts > 0 s, got {round_s}")
        self.master, self.round_s = master, round_s

    @classmethod
    def open(cls, path: Path, round_s: float) -> RoundClock:
        """The clock over the master secret in `path`, creating it if it does not exist."""
        path = Path(path)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        master = path.read_bytes()
        if len(master) != 32:
            raise ValueError(f"{path} holds {len(master)} bytes, not a 32-byte held-out master "
                             "secret; restore it from a backup (or delete it to start anew)")
        return cls(master, round_s)

    def index(self, now: float | None = None) -> int:
        return int((time.time() if now is None else now) // self.round_s)

    def current(self, now: float | None = None) -> HeldOutRound:
        return round_of(self.master, self.index(now))

    def revealed(self, index: int, now: float | None = None) -> HeldOutRound:
        """Round `index`'s secret, once it is over; ValueError while it is still running."""
        if index >= self.index(now):
            raise ValueError(f"round {index} has not ended; its secret is revealed after it")
        return round_of(self.master, index)
