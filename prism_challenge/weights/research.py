"""The research share's default source: the registry's hotkey -> credit (docs/registry.md).

Read only when `weights.research_share > 0`, and read-only: the stored registry state is
read as it is, never seeded, so computing weights writes nothing.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from prism_challenge.config.settings import Settings
from prism_challenge.storage import Store


def session_credit(session: Session, settings: Settings) -> dict[str, float]:
    """The credit, read inside the caller's transaction (ValueError: a ledger the registry
    refuses to replay)."""
    if settings.weights.research_share <= 0:
        return {}
    from prism_challenge.registry.credit import research_credits
    from prism_challenge.registry.service import read_state

    state = read_state(session, settings.registry)
    return {} if state is None else research_credits(state)


def registry_credit(store: Store, settings: Settings) -> dict[str, float]:
    if settings.weights.research_share <= 0:
        return {}
    with store.session() as session:
        return session_credit(session, settings)
