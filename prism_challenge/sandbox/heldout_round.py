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
from dataclasses import dataclass

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
