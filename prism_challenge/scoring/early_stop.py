"""The bar a new run must be able to clear, read from the validator's own store before the
run starts: the verified leader of the corpus it will be scored on, and that leader's run.

Only runs that come after the leader in precedence (commitment block, then uid: the order
the lead is replayed in, the same on every validator) are judged against it. A run that
precedes the leader is compared, in the replay, with whoever led before it, possibly a
weaker run, and the leader must then dethrone it; so it is never stopped, however late this
validator accepted it (an upload that came late, a bundle fetched from a peer).

Only registered hotkeys compete, as in the weights: a deregistered leader sets no bar (a run
stopped against it would be censored, and so lose to a leader that no longer counts).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.chain.metagraph import MetagraphView, registered_among
from prism_challenge.chain.precedence import precedence
from prism_challenge.config.settings import ScoringSettings
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.scoring.leaderboard import Entry, build_leaderboard, order_key
from prism_challenge.scoring.queries import load_entries
from prism_challenge.storage.tables import RunRecord as RunRecordRow
from prism_challenge.storage.tables import Submission


def leader_to_beat(session: Session, settings: ScoringSettings, corpus: str,
                   submission_id: int, metagraph: MetagraphView | None = None
                   ) -> tuple[Entry, RunRecord] | None:
    """The verified leader on `corpus` among the hotkeys `metagraph` has registered (all,
    without one) and its scored run record, when the submission comes after it in
    precedence; None when there is nothing to compare with."""
    if not settings.early_stop.enabled:
        return None
    sub = session.get(Submission, submission_id)
    entries = load_entries(session)
    leader = build_leaderboard(
        entries, epsilon=settings.epsilon_bpb, margin=settings.dethrone_margin,
        z=settings.dethrone_z, corpus=corpus,
        hotkeys=registered_among(metagraph, {e.hotkey for e in entries})).leader
    if sub is None or leader is None or leader.corpus != corpus or \
            order_key(leader) >= precedence(sub.block, sub.uid, sub.accepted_at, sub.id):
        return None
    row = session.scalars(select(RunRecordRow).where(RunRecordRow.submission_id ==
                                                     leader.submission_id)
                          .order_by(RunRecordRow.attempt.desc())).first()
    if row is None:
        return None
    return leader, RunRecord.stored(row)
