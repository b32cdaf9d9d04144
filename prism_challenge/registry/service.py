"""`Registry`: the store-backed research registry the validator and the API talk to.

Every change is one ledger event, applied to the latest snapshot inside one transaction:
the event row, the new snapshot, the materialised hypotheses and any checkpoint are
written together or not at all. A refused event raises `LedgerError` and stores nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from prism_challenge.registry.axes import read_axes
from prism_challenge.registry.credit import credit_table, research_credits
from prism_challenge.registry.directives import render_program
from prism_challenge.registry.graph import theory_graph
from prism_challenge.registry.ledger import apply
from prism_challenge.registry.observation import Observation
from prism_challenge.registry.populations import assignment_for
from prism_challenge.registry.seeds import SEED_HYPOTHESES
from prism_challenge.registry.state import RegistryState, terms_of
from prism_challenge.storage.db import Store
from prism_challenge.storage.tables import (
    RegistryCheckpoint,
    RegistryEvent,
    RegistryHypothesis,
    RegistryJournal,
    RegistrySnapshot,
)

Event = tuple[str, str, dict]  # (unique key, kind, payload)


def registry_config(settings):
    """Accept the whole `Settings` or just its `registry` section."""
    return getattr(settings, "registry", settings)


def replay(events: list[tuple[str, dict]], cfg) -> RegistryState:
    """Fold (kind, payload) events from the empty state."""
    state = RegistryState()
    for kind, payload in events:
        apply(state, kind, payload, cfg)
    return state


class Registry:
    def __init__(self, store: Store, settings, *, seeds: list[dict] | None = None) -> None:
        self.store = store
        self.cfg = registry_config(settings)
        try:
            with store.session() as s:
                if s.execute(select(RegistryEvent.seq).limit(1)).first() is None:
                    state = RegistryState()
                    for i, seed in enumerate(SEED_HYPOTHESES if seeds is None else seeds):
                        payload = {"origin": "seed", **seed}
                        self._append(s, state, f"seed:{i}", "hypothesis", payload)
        except IntegrityError:  # another process seeded the same ledger first
            pass

    # -- writing -------------------------------------------------------------------------

    def observe(self, obs: Observation | dict) -> list[str]:
        """Fold one scored submission in; returns its axis flags. Idempotent per submission."""
        obs = Observation.model_validate(obs) if isinstance(obs, dict) else obs
        key = f"obs:{obs.submission_id}"
        with self.store.session() as s:
            existing = s.execute(select(RegistryEvent).where(RegistryEvent.key == key)).scalar()
            if existing is not None:
                return list(existing.payload["reading"]["flags"])
            state = self._load(s)
            reading = read_axes(state.schema(), obs.measured, obs.declared)
            payload = {
                "submission_id": obs.submission_id, "hotkey": obs.hotkey, "digest": obs.digest,
                "bpb": obs.bpb, "eligible": obs.eligible, "accepted_at": obs.accepted_at,
                **({"censored": True} if obs.censored else {}),
                **({"competition": obs.competition} if obs.competition else {}),
                "reading": reading.model_dump(),
            }
            self._append(s, state, key, "observation", payload, created_at=obs.accepted_at)
            return list(reading.flags)

    def add_hypothesis(self, payload: dict, *, key: str | None = None) -> str:
        """Append an already gated claim; returns its id. LedgerError when refused."""
        with self.store.session() as s:
            state = self._load(s)
            before = set(state.hypotheses)
            seq = len(state.hypotheses) + 1
            self._append(s, state, key or f"hyp:{seq}:{state.seq}", "hypothesis", payload)
            return (set(state.hypotheses) - before).pop()

    def propose_axis(self, payload: dict) -> None:
        """Record an LLM's new-axis proposal in a stall cycle (adopted on recurrence)."""
        with self.store.session() as s:
            state = self._load(s)
            name = payload.get("spec", {}).get("name")
            self._append(s, state, f"axis:{name}:{payload.get('cycle')}:{state.seq}",
                         "axis_proposal", payload)

    def record(self, plan: Callable[[RegistryState], list[Event]]) -> list[Event]:
        """Append the events `plan` derives from the current state, all or none, in one
        transaction; returns them ([] when another process appended one of the same keys
        first, e.g. the same research cycle)."""
        try:
            with self.store.session() as s:
                state = self._load(s)
                events = plan(state.model_copy(deep=True))
                for key, kind, payload in events:
                    self._append(s, state, key, kind, payload)
                return events
        except IntegrityError:
            return []

    def note(self, hypothesis: str, text: str) -> dict:
        """An operator's annotation of a hypothesis (LedgerError when refused); returns the
        journal entry it made."""
        with self.store.session() as s:
            state = self._load(s)
            self._append(s, state, f"note:{state.seq}", "note",
                         {"hypothesis": hypothesis, "text": text, "time": time.time()})
            return state.journal[-1]

    def _append(self, s: Session, state: RegistryState, key: str, kind: str, payload: dict,
                created_at: float | None = None) -> None:
        apply(state, kind, payload, self.cfg)  # raises before anything is written
        s.add(RegistryEvent(key=key, kind=kind, payload=payload,
                            created_at=time.time() if created_at is None else created_at))
        self._save(s, state)

    def _save(self, s: Session, state: RegistryState) -> None:
        _, digest, _ = render_program(state, self.cfg)
        snap = s.get(RegistrySnapshot, 1)
        blob = state.model_dump_json()
        if snap is None:
            s.add(RegistrySnapshot(id=1, seq=state.seq, state=blob, digest=digest))
        else:
            snap.seq, snap.state, snap.digest = state.seq, blob, digest
        s.execute(delete(RegistryHypothesis))
        for h in state.hypotheses.values():
            t = terms_of(h, self.cfg)
            mean, se = h.effect()
            s.add(RegistryHypothesis(
                id=h.id, kind=h.spec.kind, statement=h.statement, origin=h.origin,
                status=h.status, archived=h.archived, wins=h.wins, losses=h.losses,
                detail=_row(h, t, mean, se)))
        for c in state.checkpoints:
            if s.get(RegistryCheckpoint, c.at) is None:
                s.add(RegistryCheckpoint(at=c.at, entry=c.model_dump()))
        for e in state.journal:
            if s.get(RegistryJournal, e["n"]) is None:
                s.add(RegistryJournal(n=e["n"], kind=e["kind"], at=e["at"], entry=e))

    # -- reading -------------------------------------------------------------------------

    def _load(self, s: Session) -> RegistryState:
        return read_state(s, self.cfg) or RegistryState()

    @staticmethod
    def _events(s: Session) -> list[tuple[str, dict]]:
        rows = s.execute(select(RegistryEvent).order_by(RegistryEvent.seq)).scalars()
        return [(r.kind, r.payload) for r in rows]

    def state(self) -> RegistryState:
        with self.store.session() as s:
            return self._load(s)

    def replay(self) -> RegistryState:
        """Rebuild the state from the ledger alone (ignores the snapshot)."""
        with self.store.session() as s:
            return replay(self._events(s), self.cfg)

    def program(self) -> tuple[str, str, dict]:
        """(program.md, sha256 digest, JSON document)."""
        return render_program(self.state(), self.cfg)

    def program_for(self, hotkey: str, settings, block: int | None) -> tuple[str, str, dict]:
        """The brief of `hotkey`'s population (`settings`: the whole node `Settings`;
        `block`: the chain block, for the population epoch when online)."""
        state = self.state()
        return render_program(state, self.cfg, assignment_for(hotkey, state, settings, block))

    def hypotheses(self, *, include_archived: bool = True) -> list[dict]:
        state = self.state()
        out = []
        for h in state.hypotheses.values():
            if h.archived and not include_archived:
                continue
            mean, se = h.effect()
            out.append(_row(h, terms_of(h, self.cfg), mean, se))
        return out

    def theory_graph(self) -> dict:
        return theory_graph(self.state(), self.cfg)

    def checkpoints(self) -> list[dict]:
        with self.store.session() as s:
            rows = s.execute(select(RegistryCheckpoint).order_by(RegistryCheckpoint.at))
            return [r.entry for r in rows.scalars()]

    def stalled(self) -> tuple[bool, int]:
        """(progress has stalled, current stall cycle): when to ask the LLM for new axes."""
        state = self.state()
        return state.since_best >= self.cfg.stall_window, state.stall_cycle

    def research_credits(self) -> dict[str, float]:
        return research_credits(self.state())

    def credit_table(self) -> list[dict]:
        return credit_table(self.state(), self.cfg)

    def journal(self, *, offset: int = 0, limit: int = 20) -> tuple[int, list[dict]]:
        """(entries in all, `limit` entries from the `offset`-th newest, newest first)."""
        with self.store.session() as s:
            return journal_page(s, offset=offset, limit=limit)


def journal_page(s: Session, *, offset: int, limit: int) -> tuple[int, list[dict]]:
    total = s.execute(select(func.count()).select_from(RegistryJournal)).scalar() or 0
    rows = s.execute(select(RegistryJournal.entry).order_by(RegistryJournal.n.desc())
                     .offset(offset).limit(limit)).scalars()
    return total, list(rows)


def read_state(s: Session, cfg) -> RegistryState | None:
    """The state as stored, without seeding an empty ledger (for read-only pages);
    None before the registry's first use."""
    snap = s.get(RegistrySnapshot, 1)
    count = s.execute(select(func.count()).select_from(RegistryEvent)).scalar()
    if not count:
        return None
    if snap is not None and snap.seq == count:
        return RegistryState.model_validate_json(snap.state)
    return replay(Registry._events(s), cfg)


def _row(h, t, mean, se) -> dict:
    return {
        "id": h.id, "kind": h.spec.kind, "statement": h.statement, "spec": h.spec.model_dump(),
        "origin": h.origin, "importance": h.importance, "parent": h.parent,
        "status": h.status, "archived": h.archived, "archive_reason": h.archive_reason,
        "wins": h.wins, "losses": h.losses, "ties": h.ties, "n": t.n,
        "posterior": {"a": 2 + h.wins, "b": 2 + h.losses, "mean": t.mean,
                      "ci90": list(t.ci90), "p_support": t.p_support,
                      "p_refute": t.p_refute, "rope": t.rope, "p_claim": t.p_claim},
        "effect": {"n": h.gain_n, "mean_gain_bpb": mean, "se": se},
        "canary_axis": h.canary_axis, "decided_at": h.decided_at,
    }
