"""The research loop: the validator thread that runs a research cycle whenever one is due.

It checks at once when the node starts (a cycle that fell due while the node was down runs
then) and every `validator.poll_s` after that. A failed cycle is retried no sooner than the
backoff: `llm.backoff_s`, doubling with every failure in a row, at most `llm.max_backoff_s`.
"""

from __future__ import annotations

import logging
import threading
import time

from prism_challenge.registry.cycle import run_cycle
from prism_challenge.registry.proposals import make_client

log = logging.getLogger("prism.registry")


def backoff_s(llm, streak: int) -> float:
    """Seconds before retrying after `streak` failed cycles in a row."""
    return min(llm.max_backoff_s, llm.backoff_s * 2.0 ** min(max(streak - 1, 0), 60))


class ResearchLoop:
    def __init__(self, registry, llm, *, poll_s: float, client=None) -> None:
        self.registry = registry
        self.llm = llm
        self.poll_s = poll_s
        self.client = client if client is not None else make_client(llm)

    @classmethod
    def from_settings(cls, settings, registry) -> ResearchLoop | None:
        """None when the node runs without proposals (no LLM, or `cycle_scored: 0`)."""
        if not settings.llm.enabled or settings.registry.cycle_scored <= 0:
            log.info("research cycles are off (llm.enabled false or registry.cycle_scored 0)")
            return None
        return cls(registry, settings.llm, poll_s=settings.validator.poll_s)

    def run(self, stop: threading.Event) -> None:
        trigger, retry_at = "startup", 0.0
        while not stop.is_set():
            if time.monotonic() >= retry_at:
                result = run_cycle(self.registry, self.client, self.llm, trigger=trigger)
                trigger = "scored"
                if result is not None and result.error is not None:
                    delay = backoff_s(self.llm, result.failure_streak)
                    retry_at = time.monotonic() + delay
                    log.info("research cycle: retrying in %.0f s", delay)
            stop.wait(self.poll_s)
