"""Duplicate gate: copies of another hotkey's bundle are refused; own iterations are not."""

from __future__ import annotations

from itertools import combinations

import pytest
from gates_helpers import (
    FIXTURES,
    KEY_ENV,
    bundle_from,
    bundle_of,
    make_settings,
    row_of,
    submit,
)

from prism_challenge.config import Settings
from prism_challenge.gates import GateStage, LlmReviewer, fingerprint
from prism_challenge.storage import Status

NOW = 2_000_000.0
HONEST = ["causal_conv", "gpt", "gpt_dropout", "grad_accum_bf16", "lstm", "mlp_mixer",
          "moe"]
THRESHOLD = Settings().gates.duplicate_threshold


def files_of(kind: str, name: str) -> dict[str, bytes]:
    return dict(bundle_of(kind, name).files)


def stage(store) -> GateStage:
    return GateStage(make_settings(enabled=False), store, reviewer=None)


def test_renamed_reordered_copy_is_similar_and_honest_bundles_are_not():
    gpt = fingerprint(files_of("honest", "gpt"))
    copy = fingerprint(files_of("attacks", "b7_renamed_copy_of_gpt"))
    assert (FIXTURES / "attacks" / "b7_renamed_copy_of_gpt" / "expected.txt").read_text() \
        .startswith("DUPLICATE-OF honest/gpt")
    assert gpt.exact != copy.exact  # the copy also changed sizes and hyper-parameters
    assert gpt.similarity(copy) >= 0.9 > THRESHOLD

    prints = {n: fingerprint(files_of("honest", n)) for n in HONEST}
    worst = max(prints[a].similarity(prints[b]) for a, b in combinations(HONEST, 2))
    assert worst < 0.4 < THRESHOLD


def test_comments_docstrings_formatting_and_literals_are_invisible():
    original = files_of("honest", "lstm")
    arch = original["architecture.py"].decode()
    tweaked = (
        "# a brand new model\n"
        + arch.replace('"""A tiny LSTM language model: embedding, two LSTM layers, a linear '
                       'read-out."""', '"""Something else entirely."""')
        .replace("HIDDEN = 64", "HIDDEN   =   128  # bigger")
        .replace("num_layers=2", "num_layers=3")
    )
    assert tweaked != arch
    copy = dict(original, **{"architecture.py": tweaked.encode()})
    assert fingerprint(copy).exact == fingerprint(original).exact
    assert fingerprint(copy).similarity(fingerprint(original)) == 1.0


def test_a_real_change_lowers_similarity():
    original = files_of("honest", "gpt")
    arch = original["architecture.py"].decode()
    changed = arch.replace(
        "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
        "        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])\n"
        "        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()\n"
        "        att = att.masked_fill(~mask, float('-inf')).softmax(dim=-1)\n"
        "        y = att @ v\n",
    )
    other = dict(original, **{"architecture.py": changed.encode()})
    similarity = fingerprint(other).similarity(fingerprint(original))
    # Same maths written out by hand: the shingles it touches change, the rest do not.
    assert 0.8 < similarity < 0.95


def test_copy_from_another_hotkey_is_refused_with_a_pointer(store):
    original = submit(store, bundle_of("honest", "gpt"), "hk-alice", NOW)
    copy = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-mallory", NOW + 5)
    outcomes = {o.submission_id: o for o in stage(store).process_due(NOW + 10)}
    assert outcomes[original].status == Status.QUEUED
    assert outcomes[copy].status == Status.REJECTED
    reason = row_of(store, copy).reason
    assert f"near-copy of submission {original} by hotkey hk-alice" in reason
    assert "original keeps precedence" in reason


def test_own_iterations_are_allowed(store):
    first = submit(store, bundle_of("honest", "gpt"), "hk-alice", NOW)
    second = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-alice", NOW + 5)
    outcomes = {o.submission_id: o.status for o in stage(store).process_due(NOW + 10)}
    assert outcomes == {first: Status.QUEUED, second: Status.QUEUED}


def test_distinct_honest_bundles_from_different_hotkeys_all_pass(store):
    ids = [submit(store, bundle_of("honest", n), f"hk-{n}", NOW + i)
           for i, n in enumerate(HONEST)]
    outcomes = {o.submission_id: o.status for o in stage(store).process_due(NOW + 10)}
    assert outcomes == dict.fromkeys(ids, Status.QUEUED)


def test_normalised_identical_copy_is_refused_as_identical(store):
    files = {k: v.decode() for k, v in files_of("honest", "lstm").items()}
    copy = dict(files, **{"training.py": "# mine now\n" + files["training.py"]})
    original = submit(store, bundle_from(files), "hk-a", NOW)
    dup = submit(store, bundle_from(copy), "hk-b", NOW + 1)
    stage(store).process_due(NOW + 2)
    assert row_of(store, original).status == "queued"
    assert "identical after normalisation" in row_of(store, dup).reason


def test_precedence_follows_accepted_at_not_processing_order(store):
    # The copy was accepted earlier, so it is the original; the later one is refused.
    early = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-first", NOW)
    late = submit(store, bundle_of("honest", "gpt"), "hk-second", NOW + 1)
    gate = stage(store)
    assert gate.process_one(late, NOW + 2).status == Status.QUEUED  # nothing earlier known yet
    # ...but the earlier one is never blocked by a later one either.
    assert gate.process_one(early, NOW + 2).status == Status.QUEUED
    third = submit(store, bundle_of("honest", "gpt", prism_toml=b'name = "x"\n'),
                   "hk-third", NOW + 3)
    [outcome] = gate.process_due(NOW + 4)
    assert outcome.submission_id == third and outcome.status == Status.REJECTED
    assert f"submission {early} by hotkey hk-first" in outcome.reason


def test_precedence_is_the_commitment_block_then_uid_not_arrival(store):
    # The copy arrived first, but its commitment is later: it is the copy on any validator.
    copy = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-copier", NOW,
                  block=120, uid=1)
    original = submit(store, bundle_of("honest", "gpt"), "hk-author", NOW + 50, block=100,
                      uid=7)
    outcomes = stage(store).process_due(NOW + 60)
    assert [o.submission_id for o in outcomes] == [original, copy]  # gated in block order
    assert outcomes[0].status == Status.QUEUED
    assert outcomes[1].status == Status.REJECTED
    assert f"submission {original} by hotkey hk-author" in outcomes[1].reason
    # Within one block the uid decides.
    a = submit(store, bundle_of("honest", "lstm"), "hk-uid9", NOW + 70, block=130, uid=9)
    b = submit(store, bundle_of("honest", "lstm", prism_toml=b'name = "z"\n'), "hk-uid2",
               NOW + 71, block=130, uid=2)
    first, second = stage(store).process_due(NOW + 80)
    assert (first.submission_id, first.status) == (b, Status.QUEUED)
    assert (second.submission_id, second.status) == (a, Status.REJECTED)


def test_a_settling_earlier_commitment_holds_back_later_ones(store):
    # The author's upload is still settling (gates.settle_s) when the copier's is due.
    copy = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-copier", NOW,
                  block=120, not_before=NOW + 10)
    original = submit(store, bundle_of("honest", "gpt"), "hk-author", NOW + 5, block=100,
                      not_before=NOW + 15)
    gate = stage(store)
    assert gate.process_due(NOW + 12) == []  # the copy is due but waits for the original
    first, second = gate.process_due(NOW + 15)
    assert (first.submission_id, first.status) == (original, Status.QUEUED)
    assert (second.submission_id, second.status) == (copy, Status.REJECTED)


def test_bundle_rejected_by_the_llm_blocks_nobody(store, stub, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    settings = make_settings(base_url=stub.base_url)
    gate = GateStage(settings, store, reviewer=LlmReviewer(settings.llm))
    stub.respond = lambda body: ("json", {"decision": "reject", "reasons": ["bad"],
                                          "findings": []})
    first = submit(store, bundle_of("honest", "moe"), "hk-a", NOW)
    assert gate.process_one(first, NOW + 1).status == Status.REJECTED
    stub.respond = lambda body: ("json", {"decision": "allow", "reasons": [], "findings": []})
    second = submit(store, bundle_of("honest", "moe", prism_toml=b'name = "y"\n'),
                    "hk-b", NOW + 2)
    [outcome] = gate.process_due(NOW + 3)
    assert (outcome.submission_id, outcome.status) == (second, Status.QUEUED)


def test_held_original_already_blocks_later_copies(store, stub, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    settings = make_settings(base_url=stub.base_url)
    gate = GateStage(settings, store, reviewer=LlmReviewer(settings.llm))
    stub.respond = lambda body: ("status", 503)
    original = submit(store, bundle_of("honest", "gpt"), "hk-a", NOW)
    assert gate.process_one(original, NOW).status == Status.RECEIVED  # held
    copy = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-b", NOW + 1)
    assert gate.process_one(copy, NOW + 2).status == Status.REJECTED
    assert len(stub.requests) == 1  # the copy never reached the reviewer


@pytest.mark.parametrize("threshold", [0.5, 0.99])
def test_threshold_is_configurable(store, threshold):
    settings = Settings(llm={"enabled": False},
                        gates={"duplicate_threshold": threshold})
    original = submit(store, bundle_of("honest", "gpt"), "hk-a", NOW)
    copy = submit(store, bundle_of("attacks", "b7_renamed_copy_of_gpt"), "hk-b", NOW + 1)
    outcomes = {o.submission_id: o.status
                for o in GateStage(settings, store, None).process_due(NOW + 2)}
    expected = Status.REJECTED if threshold == 0.5 else Status.QUEUED
    assert outcomes == {original: Status.QUEUED, copy: expected}
