"""The research share's default source: the registry's hotkey -> credit (DESIGN §9).

Read only when `weights.research_share > 0`, so a winner-take-all node never opens (or
seeds) the registry's ledger just to compute weights.
"""

from __future__ import annotations

from prism_challenge.config.settings import Settings
from prism_challenge.storage import Store


def registry_credit(store: Store, settings: Settings) -> dict[str, float]:
    if settings.weights.research_share <= 0:
        return {}
    from prism_challenge.registry import Registry

    return Registry(store, settings).research_credits()
