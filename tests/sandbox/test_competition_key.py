"""The competition key a score is stored, ranked and pooled under: the corpus name and a hash
of every term that moves a bpb, so runs under other terms are never compared."""

from __future__ import annotations

from record_kit import synthetic_record

from prism_challenge.sandbox.record import competition_key, corpus_name

TERMS = ("fineweb-edu", "ab" * 32, 294_912, 128, 150_000_000, 8)


def test_every_term_that_moves_a_bpb_changes_the_key():
    key = competition_key(*TERMS)
    assert key.startswith("fineweb-edu@") and len(key) <= 32 and corpus_name(key) == "fineweb-edu"
    assert competition_key(*TERMS) == key  # the same terms on every validator: the same key
    for i, other in enumerate(("demo", "cd" * 32, 589_824, 256, 100_000_000, 4)):
        changed = competition_key(*TERMS[:i], other, *TERMS[i + 1:])
        assert changed != key and len(changed) <= 32
    assert corpus_name("demo") == "demo"  # a key stored before keys: its bare name


def test_a_record_names_its_own_key():
    record = synthetic_record(steps=4)
    assert record.competition == competition_key(
        record.corpus, record.manifest_sha256, record.budget.tokens, record.seq_len,
        record.param_cap, record.lanes)
    other = record.model_copy(update={"budget": record.budget.model_copy(
        update={"tokens": record.budget.tokens * 2})})
    assert other.competition != record.competition
