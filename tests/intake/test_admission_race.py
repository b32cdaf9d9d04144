"""Two admissions from one hotkey at once: the rate limit holds on every store backend.

Admission A has inserted its row and not committed when admission B (another session, as a
second API worker would have) counts the hotkey's submissions. On SQLite B waits at BEGIN
for the write lock; on PostgreSQL (READ COMMITTED) B would count without A's row and both
would pass a limit of one, so admission serialises per hotkey there.
"""

from __future__ import annotations

import threading
import time

from bittensor.http_auth import Caller
from sqlalchemy import func, select

from prism_challenge.api.errors import ApiError
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.chain.subnet import Commitment, commitment_value
from prism_challenge.intake.admission import admit
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.storage.tables import Submission

NETUID = 7
HOTKEY = "5F9gD29BcQZbnAe8eGzyBmvLdyf166J48MN8VESXK16jHjuF"
POLICY = IntakePolicy(netuid=NETUID, max_body_bytes=2**18, freshness_s=300,
                      rate_limit_count=1, rate_limit_window_s=3600)


def _admit(session, bundle, tag: str, now: float):
    """Admit `bundle(tag)` as a verified caller whose latest commitment names it."""
    made = bundle(tag)
    caller = Caller(hotkey_ss58=HOTKEY, nonce_ns=int(now * 1e9), crypto_type=1)
    committed = Commitment(HOTKEY, commitment_value(HOTKEY, made.digest), 10, 0)
    return admit(session, caller=caller, load_bundle=lambda: made, commitment=committed,
                 metagraph=StaticMetagraph.of([HOTKEY]), policy=POLICY, now=now)


def test_concurrent_admissions_of_one_hotkey_respect_the_rate_limit(any_store, make_bundle):
    now = time.time()
    first = any_store._sessions()
    _admit(first, make_bundle, "a", now)  # inserted, not committed
    outcome: dict[str, str] = {}

    def second() -> None:
        try:
            with any_store.session() as session:
                _admit(session, make_bundle, "b", now + 0.001)
            outcome["b"] = "accepted"
        except ApiError as exc:
            outcome["b"] = exc.rule

    racer = threading.Thread(target=second)
    racer.start()
    racer.join(0.5)
    assert racer.is_alive()  # B waits for A instead of counting past A's row
    first.commit()
    first.close()
    racer.join(30)
    assert outcome == {"b": "RATE_LIMIT"}
    with any_store.session() as session:
        assert session.scalar(select(func.count()).select_from(Submission)) == 1
