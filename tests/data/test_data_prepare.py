"""prepare-data end to end on small generated sources: determinism, splits, byte accounting,
refusals, resume and repair."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prism_challenge.data import (
    SPLITS,
    DataInputError,
    DataIntegrityError,
    TokenStream,
    load_tokenizer,
    prepare_data,
    read_manifest,
    verify_data,
)
from prism_challenge.data import prepare as prepare_mod
from prism_challenge.data import sources as sources_mod
from prism_challenge.data.prepare import split_and_key
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl

DOCS = english_like_documents(400, seed=3)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("src") / "docs.jsonl", DOCS)


@pytest.fixture(scope="module")
def built(tmp_path_factory, source):
    root = tmp_path_factory.mktemp("built") / "data"
    prepare_data(small_spec([source], shard_tokens=8192), root)
    return root


def _tree(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _documents(root, split):
    """The split's documents decoded back from its token stream."""
    stream = TokenStream.open(root, split)
    tok = load_tokenizer(root)
    tokens = stream.tokens(0, stream.n_tokens)
    sep = stream.manifest.separator_id
    assert tokens[-1] == sep
    cuts = np.flatnonzero(tokens == sep)
    docs, start = [], 0
    for end in cuts:
        docs.append(tokens[start:end])
        start = end + 1
    return [tok.decode(d.tolist(), skip_special_tokens=False) for d in docs], docs, stream


def test_same_inputs_give_byte_identical_output(tmp_path, source, built):
    # Another copy of the same input file, elsewhere: paths must not leak into the output.
    copy = shutil.copy(source, tmp_path / source.name)
    prepare_data(small_spec([copy], shard_tokens=8192), tmp_path / "again")
    assert (tmp_path / "again" / "MANIFEST.json").read_bytes() == (
        built / "MANIFEST.json"
    ).read_bytes()
    assert _tree(tmp_path / "again") == _tree(built)
    assert not (built / ".work").exists()


def test_splits_are_disjoint_complete_and_follow_the_hash_rule(built):
    by_text = {d["text"]: d["id"] for d in DOCS}
    seen: dict[str, str] = {}
    manifest = read_manifest(built)
    spec = manifest.spec.split
    for split in SPLITS:
        texts, _, _ = _documents(built, split)
        keys = []
        for text in texts:
            doc_id = by_text[text]  # decodes back to a source document, exactly
            assert doc_id not in seen, f"{doc_id} in {seen.get(doc_id)} and {split}"
            seen[doc_id] = split
            u, key = split_and_key(spec.salt.encode() + b"\x00", doc_id)
            want = "train" if u < spec.train else "val" if u < spec.train + spec.val else "test"
            assert want == split
            keys.append(key)
        assert keys == sorted(keys)  # the challenge's order
        assert manifest.splits[split].n_documents == len(texts)
    assert len(seen) == len(DOCS)


def test_byte_accounting_is_exact_per_document(built):
    total = 0
    for split in SPLITS:
        texts, docs, stream = _documents(built, split)
        for text, ids in zip(texts, docs, strict=True):
            assert int(stream.byte_lengths[ids].sum()) == len(text.encode("utf-8"))
        all_tokens = stream.tokens(0, stream.n_tokens)
        assert (
            int(stream.byte_lengths[all_tokens].sum()) == stream.manifest.splits[split].n_text_bytes
        )
        total += len(texts)
    assert total == len(DOCS)


def test_byte_accounting_with_leading_spaces_controls_and_separator_text(tmp_path):
    odd = [
        {"id": "a", "text": "  leading spaces, trailing  \n"},
        {"id": "b", "text": "\tTabs\r\nCRLF and a literal <|sep|> in the text"},
        {"id": "c", "text": "\x00nul \x7f del \u00a0nbsp \u200bzwsp é 日本 😀 e\u0301"},
        {"id": "d", "text": " "},
    ]
    rows = english_like_documents(300, seed=9) + odd
    src = write_jsonl(tmp_path / "odd.jsonl", rows)
    root = tmp_path / "data"
    prepare_data(small_spec([src], ratios=(0.9, 0.05, 0.05)), root)
    tok = load_tokenizer(root)
    stream = TokenStream.open(root, "train")
    sep = stream.manifest.separator_id
    for row in rows:
        ids = tok.encode(row["text"], add_special_tokens=False).ids
        assert sep not in ids  # text never encodes to the separator
        assert int(stream.byte_lengths[ids].sum()) == len(row["text"].encode("utf-8"))
        assert tok.decode(ids) == row["text"]


def test_vocab_size_and_ratios_are_parameters(tmp_path, source):
    root = tmp_path / "data"
    prepare_data(small_spec([source], vocab_size=300, ratios=(0.5, 0.3, 0.2)), root)
    m = read_manifest(root)
    assert m.vocab_size == 300 and m.tokenizer.vocab_size == 300
    assert TokenStream.open(root, "val").byte_lengths.shape == (300,)
    assert m.spec.split.val == 0.3
    assert m.splits["val"].n_documents > m.splits["test"].n_documents / 2


# ---- refusals ---------------------------------------------------------------------------


def _assert_nothing_written(out):
    assert not out.exists()


def test_missing_text_column_is_refused(tmp_path):
    src = write_jsonl(tmp_path / "bad.jsonl", [{"id": "1", "content": "hello"}])
    with pytest.raises(DataInputError, match="no `text` field"):
        prepare_data(small_spec([src]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")

    pq.write_table(pa.table({"id": ["1"], "body": ["hello"]}), tmp_path / "bad.parquet")
    with pytest.raises(DataInputError, match="no `text` column"):
        prepare_data(small_spec([tmp_path / "bad.parquet"]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_missing_id_is_refused(tmp_path):
    src = write_jsonl(tmp_path / "bad.jsonl", [{"text": "hello"}])
    with pytest.raises(DataInputError, match="no `id` field"):
        prepare_data(small_spec([src]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_invalid_utf8_is_refused_and_leaves_no_output(tmp_path, source):
    good = source.read_bytes()
    bad = tmp_path / "bad.jsonl"
    # Valid documents first, so the failure comes mid-way through the source.
    bad.write_bytes(good + b'{"id": "x", "text": "caf\xe9 au lait"}\n')
    with pytest.raises(DataInputError, match=r"bad.jsonl:401: not valid UTF-8"):
        prepare_data(small_spec([bad]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")

    # An escaped lone surrogate decodes in JSON but is not UTF-8 text either.
    bad.write_bytes(good + b'{"id": "x", "text": "half a pair \\ud800"}\n')
    with pytest.raises(DataInputError, match="not valid UTF-8"):
        prepare_data(small_spec([bad]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")

    # A parquet writer that stored raw bytes: our check, not the writer's claim.
    table = pa.table({"id": ["1", "2"], "text": pa.array([b"fine", b"\xff\xfe"], pa.binary())})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(DataInputError, match=r"bad.parquet: row 2: `text` is not valid UTF-8"):
        prepare_data(small_spec([tmp_path / "bad.parquet"]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_failure_in_an_existing_directory_leaves_it_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    src = write_jsonl(tmp_path / "bad.jsonl", [{"id": "1", "text": 5}])
    with pytest.raises(DataInputError, match="must be a string"):
        prepare_data(small_spec([src]), out)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_empty_sources_are_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataInputError, match="no non-empty documents"):
        prepare_data(small_spec([empty]), tmp_path / "out")
    blank = write_jsonl(tmp_path / "blank.jsonl", [{"id": str(i), "text": ""} for i in range(5)])
    with pytest.raises(DataInputError, match="no non-empty documents"):
        prepare_data(small_spec([blank]), tmp_path / "out")
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataInputError, match="no .* files in folder"):
        prepare_data(small_spec([tmp_path / "folder"]), tmp_path / "out")
    with pytest.raises(DataInputError, match="input not found"):
        prepare_data(small_spec([tmp_path / "nope.jsonl"]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_too_small_for_the_split_or_the_vocabulary_is_refused(tmp_path):
    few = write_jsonl(tmp_path / "few.jsonl", english_like_documents(3, seed=1))
    with pytest.raises(DataInputError, match="received no documents"):
        prepare_data(small_spec([few]), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")
    some = write_jsonl(tmp_path / "some.jsonl", english_like_documents(60, seed=1))
    with pytest.raises(DataInputError, match="learned only"):
        prepare_data(small_spec([some], vocab_size=20_000), tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_a_different_data_version_is_not_overwritten(tmp_path, built):
    out = tmp_path / "data"
    shutil.copytree(built, out)
    other = write_jsonl(tmp_path / "other.jsonl", english_like_documents(300, seed=5))
    before = _tree(out)
    with pytest.raises(DataInputError, match="already holds data version"):
        prepare_data(small_spec([other]), out)
    assert _tree(out) == before


# ---- resume, repair, verify -------------------------------------------------------------


class _Crash(RuntimeError):
    pass


def test_interrupted_run_resumes_and_keeps_verified_shards(tmp_path, source, built, monkeypatch):
    out = tmp_path / "data"
    real_write = prepare_mod.atomic_write
    shard_writes = []

    def crashing_write(path, data):
        if path.name.startswith("shard_"):
            if len(shard_writes) == 5:
                raise _Crash("power cut")
            shard_writes.append(path)
        real_write(path, data)

    monkeypatch.setattr(prepare_mod, "atomic_write", crashing_write)
    with pytest.raises(_Crash):
        prepare_data(small_spec([source], shard_tokens=8192), out)
    monkeypatch.setattr(prepare_mod, "atomic_write", real_write)
    assert not (out / "MANIFEST.json").exists()  # nothing a reader would accept
    with pytest.raises(DataIntegrityError, match="no MANIFEST"):
        TokenStream.open(out, "train")

    # Damage the fourth shard the crashed run wrote: it and everything after is redone.
    shard_writes[3].write_bytes(b"\0" * shard_writes[3].stat().st_size)
    report = prepare_data(small_spec([source], shard_tokens=8192), out)
    assert report.shards_kept == 3
    total = sum(len(s.shards) for s in report.manifest.splits.values())
    assert report.shards_written == total - 3
    assert (out / "MANIFEST.json").read_bytes() == (built / "MANIFEST.json").read_bytes()
    assert _tree(out) == _tree(built)


def test_interrupted_staging_resumes_after_its_checkpoint(tmp_path, source, built, monkeypatch):
    out = tmp_path / "data"
    monkeypatch.setattr(prepare_mod, "CHECKPOINT_BYTES", 20_000)
    real_iter = sources_mod.iter_records
    staged = []

    def crashing_iter(src):
        for n, rec in enumerate(real_iter(src)):
            if n == 250:
                raise _Crash("killed while reading the source")
            yield rec

    monkeypatch.setattr(sources_mod, "iter_records", crashing_iter)
    with pytest.raises(_Crash):
        prepare_data(small_spec([source], shard_tokens=8192), out)
    with np.load(out / ".work" / "index.npz") as saved:
        checkpointed = int(saved["rows"])
    assert 0 < checkpointed <= 250

    real_split = prepare_mod.split_and_key

    def counting_split(salt, doc_id):
        staged.append(doc_id)
        return real_split(salt, doc_id)

    monkeypatch.setattr(sources_mod, "iter_records", real_iter)
    monkeypatch.setattr(prepare_mod, "split_and_key", counting_split)
    report = prepare_data(small_spec([source], shard_tokens=8192), out)
    assert report.shards_kept == 0
    # Only the rows after the checkpoint were read into staging again.
    assert staged == [d["id"] for d in DOCS[checkpointed:]]
    assert (out / "MANIFEST.json").read_bytes() == (built / "MANIFEST.json").read_bytes()
    assert _tree(out) == _tree(built)


def test_rerun_of_a_complete_root_is_a_verified_no_op(built, source):
    before = _tree(built)
    report = prepare_data(small_spec([source], shard_tokens=8192), built)
    assert report.up_to_date
    assert _tree(built) == before


def test_corrupted_root_is_detected_by_verify_and_repaired_by_a_rerun(tmp_path, source, built):
    out = tmp_path / "data"
    shutil.copytree(built, out)
    victim = out / read_manifest(out).splits["val"].shards[0].file
    raw = bytearray(victim.read_bytes())
    raw[10] ^= 0xFF
    victim.write_bytes(bytes(raw))
    with pytest.raises(DataIntegrityError, match="sha256 .* does not match"):
        verify_data(out)
    report = prepare_data(small_spec([source], shard_tokens=8192), out)
    assert not report.up_to_date
    verify_data(out)
    assert _tree(out) == _tree(built)


def test_manifest_records_what_it_was_built_from(built, source):
    raw = (built / "MANIFEST.json").read_bytes()
    m = read_manifest(built)
    assert m.sha256 == hashlib.sha256(raw).hexdigest()
    assert m.corpus == "local" and not m.is_demo
    assert m.source["inputs"] == [
        {
            "name": "docs.jsonl",
            "bytes": source.stat().st_size,
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        }
    ]
    assert m.spec.source.inputs == []  # no machine-specific paths
    assert m.tokenizer_sha256 == hashlib.sha256((built / "tokenizer.json").read_bytes()).hexdigest()
    assert "sha256" in m.split_rule
    doc = json.loads(raw)
    assert all(len(s["sha256"]) == 64 for sp in doc["splits"].values() for s in sp["shards"])
    assert str(built) not in raw.decode() and str(source.parent) not in raw.decode()


def test_two_runs_on_one_root_are_refused(tmp_path, source):
    out = tmp_path / "data"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running prepare-data holds it
        with pytest.raises(DataInputError, match="another prepare-data is running"):
            prepare_data(small_spec([source]), out)
    finally:
        os.close(fd)
    assert list(out.iterdir()) == []
    prepare_data(small_spec([source]), out)  # free again
