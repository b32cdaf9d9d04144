"""The peer loop builds its PeerSync from the `agreement.*` settings."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.sync import MAX_ROWS_PER_PEER, PeerSync
from prism_challenge.config.settings import Settings
from prism_challenge.validator import node
from prism_challenge.validator.node import ValidatorNode


def _peer_sync_of(settings: Settings, monkeypatch) -> PeerSync:
    """Run the node's peer loop for one round and return the PeerSync it built."""
    stop = threading.Event()
    built: list[PeerSync] = []

    class Recording(PeerSync):
        def round(self, electorate, *, now=None):
            built.append(self)
            stop.set()
            return {}

    monkeypatch.setattr(node, "PeerSync", Recording)
    monkeypatch.setattr(node, "electorate", lambda chain, hotkey: [])
    this = SimpleNamespace(settings=settings, store=None, agreement=AgreementStatus(),
                           hotkey="5Fvalidator", chain=None, stop_event=stop)
    ValidatorNode._peer_loop(this)
    (sync,) = built
    return sync


def test_a_configured_max_rows_per_peer_reaches_the_peer_sync(monkeypatch):
    settings = Settings(agreement={"max_rows_per_peer": 1234, "fetch_bundles": False})
    assert _peer_sync_of(settings, monkeypatch).max_rows_per_peer == 1234


def test_the_default_max_rows_per_peer_is_the_agreement_bound(monkeypatch):
    settings = Settings(agreement={"fetch_bundles": False})
    assert _peer_sync_of(settings, monkeypatch).max_rows_per_peer == MAX_ROWS_PER_PEER
