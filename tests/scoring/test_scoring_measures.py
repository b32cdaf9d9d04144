import math

import pytest
from scoring_records import NATS, entries, make_record, with_eval

from prism_challenge.sandbox.record import BatchEntry, Budget, Consumed
from prism_challenge.scoring import measures
from prism_challenge.scoring.measures import ScoringError

LN2 = math.log(2)


def test_prequential_charges_unconsumed_tokens_over_budget_bytes():
    # (3820 nats / ln 2 + 200 unconsumed * 8 bits) / 2000 budget bytes
    expected = (3820 / LN2 + 1600) / 2000
    assert measures.prequential_bpb(make_record()) == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx(3.5555475, abs=1e-6)
    assert measures.unconsumed_tokens(make_record()) == 200


def test_prequential_without_unconsumed_tokens_is_plain_bits_per_byte():
    rec = make_record(
        budget=Budget(rows=8, tokens=800, scored_tokens=800, bytes=1600),
        exit_reason="ok",
    )
    assert measures.prequential_bpb(rec) == pytest.approx(3820 / LN2 / 1600, abs=1e-9)


def test_uniform_bpb_is_log2_vocab_over_bytes_per_token():
    assert measures.uniform_bpb(make_record()) == pytest.approx(1000 * 8 / 2000, abs=1e-12)


def test_stopping_early_never_pays_when_losses_beat_uniform():
    full = make_record()
    # Drop the last batch: its 800 nats (< 200 * ln 256 = 1109 nats) become 200 charged tokens.
    early = make_record(
        batches=entries(full)[:3],
        consumed=Consumed(rows=6, scored_tokens=600, bytes=1200, nats=3020.0),
    )
    assert measures.prequential_bpb(early) == pytest.approx((3020 / LN2 + 400 * 8) / 2000)
    assert measures.prequential_bpb(early) > measures.prequential_bpb(full)


@pytest.mark.parametrize(
    ("fraction", "nats", "nbytes"),
    [(0.25, 800.0, 400), (0.3, 1700.0, 800), (0.5, 1700.0, 800), (0.51, 2700.0, 1200),
     (1.0, 3820.0, 1600), (0.01, 800.0, 400)],
)
def test_tail_is_shortest_suffix_with_the_fraction_of_tokens(fraction, nats, nbytes):
    assert measures.tail_bpb(make_record(), fraction) == pytest.approx(
        nats / LN2 / nbytes, abs=1e-9
    )


def test_tail_follows_stream_order_not_list_order():
    rec = make_record()
    shuffled = make_record(batches=list(reversed(entries(rec))))
    assert measures.tail_bpb(shuffled, 0.25) == pytest.approx(800 / LN2 / 400, abs=1e-9)


def test_heldout_delta_and_gap():
    rec = make_record()
    assert measures.heldout_delta(rec) == pytest.approx(8.1 - 3.0, abs=1e-12)
    # one window per batch: the best window is the last (800 nats over 400 bytes)
    assert measures.memorisation_gap(rec, 4, 200) == pytest.approx(3.0 - 800 / LN2 / 400,
                                                                    abs=1e-9)
    # one window over the whole stream: a much smaller gap
    assert measures.memorisation_gap(rec, 4, 10_000) == pytest.approx(
        3.0 - sum(NATS) / LN2 / 1600, abs=1e-9)
    assert measures.heldout_delta(with_eval(rec, val_bpb_twin=None)) is None
    assert measures.memorisation_gap(make_record(eval=None), 4, 200) is None


def test_windows_follow_the_stream_order_and_respect_min_tokens():
    rec = make_record()
    per_batch = [n / LN2 / 400 for n in NATS]
    assert measures.window_bpbs(rec, 4, 200) == pytest.approx(per_batch, abs=1e-9)
    assert measures.window_bpbs(rec, 2, 1) == pytest.approx(
        [2120 / LN2 / 800, 1700 / LN2 / 800], abs=1e-9)
    assert measures.window_bpbs(rec, 10, 400) == pytest.approx(
        [2120 / LN2 / 800, 1700 / LN2 / 800], abs=1e-9)  # 800 tokens / 400 per window
    shuffled = make_record(batches=list(reversed(entries(rec))))
    assert measures.window_bpbs(shuffled, 4, 200) == pytest.approx(per_batch, abs=1e-9)


def test_step0_loss_is_first_step_over_all_ranks():
    rec = make_record()
    assert measures.step0_nats_per_token(rec) == pytest.approx(5.6, abs=1e-12)
    two_ranks = make_record(
        batches=[
            BatchEntry(step=0, rank=0, offset_row=0, rows=1, tokens=100, bytes=200, nats=500, t=0),
            BatchEntry(step=0, rank=1, offset_row=1, rows=1, tokens=300, bytes=600, nats=1900, t=0),
            BatchEntry(step=1, rank=0, offset_row=2, rows=1, tokens=400, bytes=800, nats=10, t=1),
        ],
        consumed=Consumed(rows=3, scored_tokens=800, bytes=1600, nats=2410.0),
    )
    assert measures.step0_nats_per_token(two_ranks) == pytest.approx(2400 / 400, abs=1e-12)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"budget": Budget(rows=0, tokens=0, scored_tokens=0, bytes=0)}, "no scored tokens"),
        ({"budget": Budget(rows=4, tokens=700, scored_tokens=700, bytes=2000)}, "exceeds"),
        ({"consumed": Consumed(rows=8, scored_tokens=801, bytes=1600, nats=3820.0)}, "sum to"),
        ({"consumed": Consumed(rows=8, scored_tokens=800, bytes=1600, nats=3000.0)}, "nats"),
    ],
)
def test_inconsistent_records_are_refused(changes, message):
    with pytest.raises(ScoringError, match=message):
        measures.prequential_bpb(make_record(**changes))
