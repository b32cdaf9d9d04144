"""The limits intake enforces, read once from settings into a small immutable value."""

from __future__ import annotations

from dataclasses import dataclass

from prism_challenge.config.settings import Settings


@dataclass(frozen=True)
class IntakePolicy:
    netuid: int
    max_body_bytes: int
    freshness_s: float
    rate_limit_count: int
    rate_limit_window_s: float
    commitment_wait_s: float = 0.0  # how long a bundle waits for its commitment to appear
    commitment_poll_s: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> IntakePolicy:
        return cls(
            netuid=settings.chain.netuid,
            max_body_bytes=settings.intake.max_body_bytes,
            freshness_s=settings.intake.freshness_s,
            rate_limit_count=settings.intake.rate_limit_count,
            rate_limit_window_s=settings.intake.rate_limit_window_s,
            commitment_wait_s=settings.chain.commitment_wait_s,
        )

    @property
    def nonce_ttl_s(self) -> float:
        """How long a nonce must be remembered: a request signed up to `freshness_s` in the
        future of when it was first seen stays fresh for another `freshness_s` after that."""
        return 2 * self.freshness_s
