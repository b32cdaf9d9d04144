"""`GET /v1/leaderboard`: the standings as JSON, read from the store on every request."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.params import CorpusQuery
from prism_challenge.chain.metagraph import registered_among
from prism_challenge.sandbox.heldout_round import RoundClock
from prism_challenge.scoring.leaderboard import Leaderboard, build_leaderboard


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["scoring"])

    @router.get("/leaderboard", response_model=Leaderboard)
    def leaderboard(corpus: CorpusQuery = None) -> Leaderboard:
        """What ranks: with `agreement.enabled`, the shared-input aggregate of each run,
        among the hotkeys registered on the subnet (as the weights rank them); the best
        runs of hotkeys that left are listed apart (`departed`)."""
        sc = deps.settings.scoring
        with deps.store.session() as session:
            ranked = ranked_entries(session, deps.settings, deps.hotkey, now=deps.clock())
        entries = ranked.entries
        return build_leaderboard(entries, epsilon=sc.epsilon_bpb, margin=sc.dethrone_margin,
                                 z=sc.dethrone_z,
                                 corpus=ranked.corpus if corpus is None else corpus,
                                 hotkeys=registered_among(deps.metagraph,
                                                          {e.hotkey for e in entries}))

    @router.get("/heldout-round")
    def heldout_round() -> dict:
        """The running round's commit (sha256 of its secret) and the last round's revealed
        secret: anyone can check the reveal against the commit shown before and recompute
        the plan (sandbox/heldout_round.py)."""
        sc = deps.settings.scoring
        clock = RoundClock.open(Path(deps.settings.validator.work_dir).parent
                                / "heldout-master.key", sc.heldout_round_s)
        now = deps.clock()
        k = clock.index(now)
        current = clock.current(now)
        out: dict = {"round": current.label, "commit": current.commit,
                     "ends_at": (k + 1) * sc.heldout_round_s, "previous": None}
        if k > 0:
            prev = clock.revealed(k - 1, now)
            out["previous"] = {"round": prev.label, "commit": prev.commit,
                               "secret": prev.secret.hex()}
        return out

    return router
