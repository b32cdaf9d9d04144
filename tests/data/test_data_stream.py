"""The reader: verification on open, fixed geometry across shard boundaries, exact budgets."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from prism_challenge.data import DataIntegrityError, Manifest, TokenStream, load_tokenizer


def _raw_stream(root, split):
    """The split's tokens straight from the shard files (what the reader must reproduce)."""
    m = json.loads((root / "MANIFEST.json").read_text())
    return np.concatenate(
        [np.fromfile(root / s["file"], dtype="<u2") for s in m["splits"][split]["shards"]]
    ).astype(np.int32)


def test_fixture_is_a_real_prepared_root(prepared_data):
    stream = TokenStream.open(prepared_data, "val")
    m = stream.manifest
    assert isinstance(m, Manifest)
    assert m.corpus == "local" and m.vocab_size == 512 and m.separator_id == 0
    assert m.sha256 == hashlib.sha256((prepared_data / "MANIFEST.json").read_bytes()).hexdigest()
    assert stream.n_tokens == m.splits["val"].n_tokens >= 10_000
    assert len(m.splits["train"].shards) >= 5  # rows cross shard boundaries


def test_byte_lengths_table(prepared_data):
    stream = TokenStream.open(prepared_data, "train")
    bl = stream.byte_lengths
    assert bl.dtype == np.int32 and bl.shape == (512,)
    assert bl[stream.manifest.separator_id] == 0
    assert (np.delete(bl, stream.manifest.separator_id) >= 1).all()
    tok = load_tokenizer(prepared_data)
    assert (bl[1:257] == 1).all()  # the byte alphabet
    for i in range(257, 512):  # merges: their decoded text, where it is whole characters
        text = tok.decode([i])
        if "\ufffd" not in text:
            assert bl[i] == len(text.encode("utf-8"))


@pytest.mark.parametrize("seq_len", [1, 7, 128, 1000])
def test_rows_follow_the_geometry_across_shards(prepared_data, seq_len):
    stream = TokenStream.open(prepared_data, "train")
    raw = _raw_stream(prepared_data, "train")
    assert stream.n_tokens == raw.size
    n = stream.n_rows(seq_len)
    assert n == (raw.size - 1) // seq_len
    for start, count in [(0, 1), (0, min(n, 50)), (n // 3, min(37, n - n // 3)), (n - 1, 1)]:
        rows = stream.rows(seq_len, start, count)
        assert rows.dtype == np.int32 and rows.shape == (count, seq_len + 1)
        for j in range(count):
            i = start + j
            np.testing.assert_array_equal(rows[j], raw[i * seq_len : i * seq_len + seq_len + 1])
    # The last full row ends inside the stream; one more does not fit.
    with pytest.raises(IndexError):
        stream.rows(seq_len, n, 1)


def test_every_shard_boundary_is_crossed_correctly(prepared_data):
    stream = TokenStream.open(prepared_data, "train")
    raw = _raw_stream(prepared_data, "train")
    boundaries = np.cumsum([s.n_tokens for s in stream.manifest.splits["train"].shards])[:-1]
    seq_len = 64
    for b in boundaries:
        row = int(b) // seq_len
        got = stream.rows(seq_len, max(0, row - 1), 3)
        first = max(0, row - 1) * seq_len
        for j in range(3):
            s = first + j * seq_len
            np.testing.assert_array_equal(got[j], raw[s : s + seq_len + 1])


def test_iter_rows_and_target_bytes(prepared_data):
    stream = TokenStream.open(prepared_data, "val")
    seq_len = 32
    batches = list(stream.iter_rows(seq_len, batch_rows=10, start_row=5, n_rows=43))
    assert [b.shape[0] for b in batches] == [10, 10, 10, 10, 3]
    np.testing.assert_array_equal(np.concatenate(batches), stream.rows(seq_len, 5, 43))
    rows = stream.rows(seq_len, 0, stream.n_rows(seq_len))
    tb = stream.target_bytes(rows)
    assert tb.shape == (rows.shape[0], seq_len)
    np.testing.assert_array_equal(tb == 0, rows[:, 1:] == stream.manifest.separator_id)


def test_budget_rows(prepared_data):
    stream = TokenStream.open(prepared_data, "train")
    assert stream.budget_rows(128, 128 * 100) == 100
    with pytest.raises(ValueError, match="not a positive multiple"):
        stream.budget_rows(128, 1000)
    with pytest.raises(ValueError, match="needs"):
        stream.budget_rows(128, 128 * (stream.n_rows(128) + 1))
    assert stream.budget_rows(128, 128 * stream.n_rows(128)) == stream.n_rows(128)


def test_all_splits_open_and_differ(prepared_data):
    heads = {s: TokenStream.open(prepared_data, s).tokens(0, 64) for s in ("train", "val", "test")}
    assert not np.array_equal(heads["train"], heads["val"])
    with pytest.raises(DataIntegrityError, match="unknown split"):
        TokenStream.open(prepared_data, "validation")


# ---- refusals ---------------------------------------------------------------------------


@pytest.fixture
def copy(prepared_data, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(prepared_data, root)
    return root


def test_corrupted_shard_is_refused(copy):
    m = TokenStream.open(copy, "train").manifest
    victim = copy / m.splits["train"].shards[2].file
    raw = bytearray(victim.read_bytes())
    raw[100] ^= 1
    victim.write_bytes(bytes(raw))
    with pytest.raises(DataIntegrityError, match=r"shard_00002.bin: sha256 .* corrupted"):
        TokenStream.open(copy, "train")
    TokenStream.open(copy, "val")  # the other splits are untouched


def test_missing_or_truncated_shard_is_refused(copy):
    m = TokenStream.open(copy, "test").manifest
    victim = copy / m.splits["test"].shards[0].file
    victim.write_bytes(victim.read_bytes()[:-2])
    with pytest.raises(DataIntegrityError, match="bytes, the MANIFEST says"):
        TokenStream.open(copy, "test")
    victim.unlink()
    with pytest.raises(DataIntegrityError, match="missing"):
        TokenStream.open(copy, "test")


def test_tampered_manifest_or_tokenizer_is_refused(copy):
    version = TokenStream.open(copy, "val").manifest.sha256
    TokenStream.open(copy, "val", expected_manifest_sha256=version)
    raw = json.loads((copy / "MANIFEST.json").read_text())
    raw["splits"]["val"]["n_tokens"] += 1
    (copy / "MANIFEST.json").write_text(json.dumps(raw, indent=2))
    with pytest.raises(DataIntegrityError, match="is not the expected"):
        TokenStream.open(copy, "val", expected_manifest_sha256=version)
    with pytest.raises(DataIntegrityError, match="do not add up"):
        TokenStream.open(copy, "val")
    (copy / "MANIFEST.json").write_text("{not json")
    with pytest.raises(DataIntegrityError, match="not a valid PRISM MANIFEST"):
        TokenStream.open(copy, "val")


def test_tampered_tokenizer_is_refused(copy):
    tok = copy / "tokenizer.json"
    tok.write_text(tok.read_text().replace('"vocab":{', '"vocab":{"zz":511,', 1))
    with pytest.raises(DataIntegrityError, match="tokenizer.json: sha256"):
        load_tokenizer(copy)
    with pytest.raises(DataIntegrityError, match="tokenizer.json: sha256"):
        TokenStream.open(copy, "train")


def test_paths_outside_the_root_are_refused(copy):
    raw = json.loads((copy / "MANIFEST.json").read_text())
    raw["splits"]["val"]["shards"][0]["file"] = "../../etc/passwd"
    (copy / "MANIFEST.json").write_text(json.dumps(raw, indent=2))
    with pytest.raises(DataIntegrityError, match="outside the data root"):
        TokenStream.open(copy, "val")


def test_no_data_is_a_clear_refusal(tmp_path):
    with pytest.raises(DataIntegrityError, match="no MANIFEST; prepare the data first"):
        TokenStream.open(tmp_path, "train")
