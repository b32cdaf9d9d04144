import pytest

from prism_challenge.scoring.leaderboard import (
    Entry,
    UnknownCorpus,
    build_leaderboard,
    contenders,
    grid,
    resolve_corpus,
)


def entry(sid, hotkey, bpb, *, delta=1.0, at=None, eligible=True, corpus="demo", scored=None,
          verification="passed", block=None, uid=None):
    return Entry(
        submission_id=sid, hotkey=hotkey, digest=f"{sid:064x}", accepted_at=float(at or sid),
        bpb=bpb, heldout_delta=delta, eligible=eligible, corpus=corpus,
        reason=None if eligible else "step0: smuggled", scored_at=float(scored or sid),
        verification=verification,
        block=block, uid=uid,
    )


def board(entries, *, eps=0.01, margin=0.0, **kw):
    return build_leaderboard(entries, epsilon=eps, margin=margin, **kw)


def ranked(b):
    return [(s.rank, s.entry.submission_id) for s in b.standings]


@pytest.mark.parametrize(
    ("bpb", "eps", "cell"), [(0.3, 0.1, 3.0), (1.234, 0.01, 123.0), (1.2399, 0.01, 123.0),
                             (1.24, 0.01, 124.0), (1.5, 0.0, 1.5)]
)
def test_epsilon_grid(bpb, eps, cell):
    assert grid(bpb, eps) == cell


def test_same_cell_larger_heldout_delta_wins():
    b = board([entry(1, "a", 1.234, delta=1.0), entry(2, "b", 1.231, delta=2.0)])
    assert ranked(b) == [(1, 2), (2, 1)]
    assert b.leader.submission_id == 2


def test_same_cell_same_delta_earliest_wins():
    b = board([entry(1, "a", 1.234, at=5), entry(2, "b", 1.231, at=3)])
    assert ranked(b) == [(1, 2), (2, 1)]
    assert b.leader.submission_id == 2


def test_earliest_is_the_commitment_block_then_uid_whatever_the_arrival():
    # Submission 1 reached this validator first, but 2 was committed first.
    early_arrival = entry(1, "a", 1.234, at=1, block=120, uid=0)
    early_commit = entry(2, "b", 1.231, at=9, block=100, uid=5)
    for order in ([early_arrival, early_commit], [early_commit, early_arrival]):
        b = board(order)
        assert ranked(b) == [(1, 2), (2, 1)] and b.leader.submission_id == 2
        assert [h.submission_id for h in b.history] == [2]  # replayed in commitment order
    same_block = [entry(3, "c", 1.234, at=1, block=100, uid=8),
                  entry(4, "d", 1.234, at=2, block=100, uid=3)]
    assert board(same_block).leader.submission_id == 4
    # A row without a commitment (from before commitments) never precedes one with it.
    assert board([entry(5, "e", 1.234, at=1), entry(6, "f", 1.234, at=2, block=10**6)]
                 ).leader.submission_id == 6


def test_lower_cell_wins_whatever_the_delta():
    b = board([entry(1, "a", 1.231, delta=9.0), entry(2, "b", 1.229, delta=0.1)])
    assert ranked(b) == [(1, 2), (2, 1)]


def test_dethrone_margin_is_relative_and_inclusive():
    leader = entry(1, "a", 2.0)
    exactly = board([leader, entry(2, "b", 1.99)], eps=0.0, margin=0.005)
    assert exactly.leader.submission_id == 2
    short = board([leader, entry(2, "b", 1.9901)], eps=0.0, margin=0.005)
    assert short.leader.submission_id == 1
    # b ranks first on the table, but the crown stays with a.
    assert ranked(short) == [(1, 2), (2, 1)]
    assert [s.leader for s in short.standings] == [False, True]


def test_a_tie_break_alone_cannot_dethrone_under_a_margin():
    b = board([entry(1, "a", 1.234, delta=1.0), entry(2, "b", 1.231, delta=2.0)], margin=0.005)
    assert b.leader.submission_id == 1


def test_replay_follows_accepted_order_and_records_history():
    entries = [entry(3, "c", 1.5, at=30), entry(1, "a", 2.0, at=10), entry(2, "b", 1.9, at=20)]
    b = board(entries, margin=0.01)
    assert b.leader.submission_id == 3
    assert [(h.submission_id, h.previous_submission_id) for h in b.history] == [
        (1, None), (2, 1), (3, 2)
    ]
    # The same scores accepted in another order crown someone else: b (1.9) arrives after
    # c (1.5) and cannot beat it.
    swapped = [entry(3, "c", 1.5, at=20), entry(1, "a", 2.0, at=10), entry(2, "b", 1.9, at=30)]
    assert [h.submission_id for h in board(swapped, margin=0.01).history] == [1, 3]


def test_each_hotkey_shows_its_best_eligible_submission_only():
    b = board([entry(1, "a", 2.0), entry(2, "a", 1.5), entry(3, "b", 1.7),
               entry(4, "a", 0.1, eligible=False)])
    assert ranked(b) == [(1, 2), (2, 3)]
    assert b.leader.submission_id == 2
    assert [e.submission_id for e in b.ineligible] == [4]
    assert b.ineligible[0].reason == "step0: smuggled"


def test_ineligible_submissions_never_lead():
    b = board([entry(1, "a", 0.5, eligible=False)])
    assert b.leader is None and b.standings == [] and b.history == []


def test_corpora_are_never_mixed_and_default_to_latest_scored():
    entries = [entry(1, "a", 1.0, corpus="demo", scored=1),
               entry(2, "b", 3.0, corpus="fineweb-edu", scored=5)]
    assert board(entries).corpus == "fineweb-edu"
    assert board(entries).leader.submission_id == 2
    demo = board(entries, corpus="demo")
    assert demo.corpus == "demo" and ranked(demo) == [(1, 1)]
    assert board([]).corpus is None and board([]).leader is None


def test_hotkey_filter_removes_a_deregistered_leader_from_the_replay():
    entries = [entry(1, "a", 2.0), entry(2, "b", 1.0), entry(3, "c", 1.5)]
    assert board(entries, margin=0.01).leader.hotkey == "b"
    without_b = board(entries, margin=0.01, hotkeys={"a", "c"})
    assert without_b.leader.hotkey == "c"
    assert [s.entry.hotkey for s in without_b.standings] == ["c", "a"]


def test_only_a_verified_entry_can_lead():
    b = board([entry(1, "a", 2.0), entry(2, "b", 1.0, verification="none"),
               entry(3, "c", 0.5, verification="running")])
    assert b.leader.submission_id == 1
    assert ranked(b) == [(1, 3), (2, 2), (3, 1)]  # still shown, best first
    assert board([entry(1, "a", 2.0, verification="failed")]).leader is None


def test_contenders_are_unverified_entries_that_would_take_the_lead():
    entries = [entry(1, "a", 2.0), entry(2, "b", 1.99, verification="none"),
               entry(3, "c", 1.0, verification="none"), entry(4, "d", 1.5, verification="none"),
               entry(5, "e", 0.5, verification="queued"),
               entry(6, "f", 0.1, verification="none", eligible=False)]
    found = contenders(entries, epsilon=0.01, margin=0.01)
    assert [e.submission_id for e in found] == [3, 4]  # 2 does not beat 1 by the margin
    assert [e.submission_id for e in contenders(
        [entry(7, "g", 3.0, verification="none"), entry(8, "h", 2.0, verification="none")],
        epsilon=0.01, margin=0.01)] == [8, 7]  # no verified leader: every eligible entry


def test_a_deregistered_leader_sets_no_bar_and_a_deregistered_run_takes_no_replay():
    """Contenders are chosen among the registered hotkeys, as the weights' leader is."""
    entries = [entry(1, "gone", 1.0), entry(2, "b", 1.5, verification="none"),
               entry(3, "c", 1.2, verification="none"),
               entry(4, "gone", 0.9, verification="none")]
    assert [e.submission_id for e in contenders(entries, epsilon=0.01, margin=0.01)] == [4]
    registered = contenders(entries, epsilon=0.01, margin=0.01, hotkeys={"b", "c"})
    assert [e.submission_id for e in registered] == [3, 2]


def test_a_censored_run_never_ranks_leads_or_contends_and_is_listed_apart():
    """Stopped early, its bpb is only a lower bound: even a verified, low one is not a score."""
    leader = entry(1, "a", 2.0)
    stopped = entry(2, "b", 1.0, verification="none").model_copy(update={"censored": True})
    verified = stopped.model_copy(update={"submission_id": 3, "verification": "passed"})
    b = board([leader, stopped, verified], margin=0.01)
    assert b.leader.submission_id == 1 and ranked(b) == [(1, 1)]
    assert [e.submission_id for e in b.censored] == [3]  # the hotkey's latest
    assert contenders([leader, stopped], epsilon=0.01, margin=0.01) == []
    bad = stopped.model_copy(update={"submission_id": 4, "eligible": False})
    assert [e.submission_id for e in board([leader, bad]).ineligible] == [4]
    assert board([leader, bad]).censored == []


def test_a_corpus_name_asks_for_its_latest_competition_key():
    entries = [entry(1, "a", 1.0, corpus="demo@aaaa"), entry(2, "b", 1.1, corpus="demo@bbbb"),
               entry(3, "c", 1.2, corpus="fineweb-edu@cccc")]
    assert board(entries).corpus == "fineweb-edu@cccc"  # the latest scored
    assert board(entries, corpus="demo").corpus == "demo@bbbb"
    assert board(entries, corpus="demo@aaaa").leader.submission_id == 1
    unknown = board(entries, corpus="nothing")
    assert (unknown.corpus, unknown.standings) == ("nothing", [])
    with pytest.raises(UnknownCorpus, match="demo@aaaa, demo@bbbb, fineweb-edu@cccc"):
        resolve_corpus(entries, "nothing", strict=True)
