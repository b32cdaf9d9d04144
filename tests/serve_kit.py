"""Serving the real app (create_app with every router) over a populated store, for the
dashboard and metrics tests; each folder's conftest.py imports `serve`."""

from __future__ import annotations

import pytest
from dashboard_store import HOTKEYS

from prism_challenge.api import ApiDeps
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.validator.app import create_app


@pytest.fixture
def serve(store, live_server, tmp_path):
    """`serve(**settings_sections) -> base_url` for `store`; HOTKEYS[:3] are uids 0-2, and
    the node is HOTKEYS[0] (a local ledger holds commitments)."""

    def start(target=None, **sections) -> str:
        sections.setdefault("dashboard", {"refresh_s": 0})
        settings = Settings(**sections)
        metagraph = StaticMetagraph.of(HOTKEYS[:3], block=42)
        deps = ApiDeps(settings=settings, store=target or store, metagraph=metagraph,
                       hotkey=HOTKEYS[0], subnet=LocalLedger(tmp_path / "ledger.db", metagraph))
        return live_server(create_app(deps))

    return start
