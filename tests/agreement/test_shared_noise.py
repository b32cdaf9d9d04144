"""The dethrone rule's noise term is shared: a validator that holds a challenger only through
its peers' signed measurements dethrones exactly as the validators that scored it do.

Validators a and b (stake 2 each) scored the leader X and the challenger Y; c (stake 1)
scored X only and holds Y as a queued submission. Y's bpb (0.990) beats X's (1.000) by more
than the 0.5% margin; whether it beats it by more than `dethrone_z` standard errors of the
paired difference depends on the stream parts, which c learns only from the signed pages.
"""

from __future__ import annotations

import pytest
from agreement_kit import add_scored, digest_of, electorate_of

from prism_challenge.agreement.aggregate import Measurement, median_parts
from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.scoring.leaderboard import paired_se
from prism_challenge.storage.tables import Submission
from prism_challenge.weights.plan import load_plan

STAKES = {"a": 2.0, "b": 2.0, "c": 1.0}
WINDOWS = 32


def parts(total: float, jitter: float) -> list[float]:
    """`total` spread over WINDOWS stretches, every other one moved by +-jitter."""
    return [total / WINDOWS + (jitter if i % 2 else -jitter) for i in range(WINDOWS)]


def leader_of(node):
    with node.store.session() as s:
        plan = load_plan(s, node.metagraph, node.settings, hotkey=node.hotkey)
    return plan.leader.hotkey if plan.leader else None


@pytest.mark.parametrize("jitter, y_leads", [(0.001, False), (0.0, True)],
                         ids=["within-noise", "clearly-better"])
def test_a_validator_that_holds_the_challenger_only_from_peers_dethrones_like_they_do(
        nodes, wallets, live_server, jitter, y_leads):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    x_parts, y_parts = parts(1.000, 0.0), parts(0.990, jitter)
    se = paired_se(y_parts, x_parts)
    assert se is not None and (2 * se > 0.005) is not y_leads  # 0.990 vs 0.995 - 2 SE
    trio = [nodes[n] for n in ("a", "b", "c")]
    for node in trio:
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000, parts=x_parts)
        if node.name != "c":
            add_scored(node.store, name="Y", miner=m2, block=2, bpb=0.990, parts=y_parts)
        node.serve(live_server)
    with trio[2].store.session() as s:
        s.add(Submission(digest=digest_of("Y"), hotkey=m2, status="queued", attempts=0,
                         accepted_at=1.0, block=2, uid=5, updated_at=1.0, reviewed="passed",
                         name="Y", bundle=b"x"))
    for node in trio:
        stored, status = node.sync(electorate_of(node, [o for o in trio if o is not node],
                                                 STAKES))
        assert status.refused() == 0
    with trio[2].store.session() as s:
        ranked = ranked_entries(s, trio[2].settings, trio[2].hotkey)
    y = next(e for e in ranked.entries if e.hotkey == m2)
    want = m2 if y_leads else m1
    assert {n.name: leader_of(n) for n in trio} == {"a": want, "b": want, "c": want}
    assert ranked.shared and y.verification == "passed" and y.bpb == 0.990
    assert y.stream_parts == pytest.approx(y_parts, abs=0)  # from a's and b's pages


def test_the_shared_parts_are_a_stretchwise_median_a_minority_cannot_move():
    honest = tuple(parts(0.990, 0.001))
    held = [Measurement("a", 0.99, 0.5, True, 1.0, stream_parts=honest),
            Measurement("b", 0.99, 0.5, True, 1.0, stream_parts=honest),
            Measurement("liar", 0.99, 0.5, True, 1.0, stream_parts=tuple([9.0] * WINDOWS))]
    stakes = {"a": 2.0, "b": 2.0, "liar": 3.0}
    assert median_parts(held, stakes) == list(honest)
    # a shape held by no more than half the stake is not used: margin alone, everywhere
    short = [held[0], Measurement("liar", 0.99, 0.5, True, 1.0, stream_parts=(0.3,) * 3)]
    assert median_parts(short, {"a": 2.0, "liar": 2.0}) is None
    no_parts = Measurement("c", 0.99, 0.5, True, 1.0)  # a peer serving no parts
    assert median_parts(held[:2] + [no_parts], stakes | {"c": 1.0}) == list(honest)
    assert median_parts([Measurement("c", 0.99, 0.5, True, 1.0)], {"c": 1.0}) is None
