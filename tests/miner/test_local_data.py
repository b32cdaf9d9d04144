"""What a local run reads: the val split, or train rows past the budget when there is none."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from miner_kit import SEQ_LEN

from prism_challenge.config import Settings
from prism_challenge.data import DataIntegrityError, TokenStream
from prism_challenge.miner import (
    DataMismatch,
    DataRootMissing,
    HeldOutRows,
    open_local_data,
    smoke_settings,
)


def _settings(rows: int = 96) -> Settings:
    return Settings(challenge={"seq_len": SEQ_LEN, "token_budget": rows * SEQ_LEN})


def _without_val(src, dest):
    root = shutil.copytree(src, dest)
    manifest = json.loads((root / "MANIFEST.json").read_text())
    for shard in manifest["splits"]["val"]["shards"]:
        (root / shard["file"]).unlink()
    return root


def test_val_split_is_used_when_present(prepared_data):
    data = open_local_data(prepared_data, _settings())
    assert data.val.split == "val" and data.val_source.startswith("the val split")
    assert data.corpus == data.train.manifest.corpus


def test_train_rows_past_the_budget_stand_in_for_a_missing_val_split(prepared_data, tmp_path):
    root = _without_val(prepared_data, tmp_path / "data")
    data = open_local_data(root, _settings(96))
    assert isinstance(data.val, HeldOutRows)
    assert "held-out train rows 96.." in data.val_source and "no val split" in data.val_source
    train = TokenStream.open(root, "train")
    assert data.val.n_rows(SEQ_LEN) == train.n_rows(SEQ_LEN) - 96
    np.testing.assert_array_equal(data.val.rows(SEQ_LEN, 0, 3), train.rows(SEQ_LEN, 96, 3))
    assert data.val.byte_lengths is train.byte_lengths or np.array_equal(
        data.val.byte_lengths, train.byte_lengths)
    with pytest.raises(IndexError):
        data.val.rows(SEQ_LEN, data.val.n_rows(SEQ_LEN), 1)
    with pytest.raises(ValueError, match="seq_len"):
        data.val.rows(SEQ_LEN * 2, 0, 1)


def test_a_corrupt_val_split_is_refused_not_replaced(prepared_data, tmp_path):
    root = shutil.copytree(prepared_data, tmp_path / "data")
    manifest = json.loads((root / "MANIFEST.json").read_text())
    shard = root / manifest["splits"]["val"]["shards"][0]["file"]
    raw = bytearray(shard.read_bytes())
    raw[0] ^= 1
    shard.write_bytes(bytes(raw))
    with pytest.raises(DataIntegrityError, match="does not match"):
        open_local_data(root, _settings())


def test_missing_root_names_the_command_that_prepares_it(tmp_path):
    with pytest.raises(DataRootMissing) as err:
        open_local_data(tmp_path / "nowhere", _settings())
    assert f"prism prepare-data --source demo --out {tmp_path / 'nowhere'}" in str(err.value)


def test_budget_larger_than_the_data_is_a_clear_mismatch(prepared_data, tmp_path):
    with pytest.raises(DataMismatch, match="needs"):
        open_local_data(prepared_data, _settings(10**6))
    train_rows = TokenStream.open(prepared_data, "train").n_rows(SEQ_LEN)
    root = _without_val(prepared_data, tmp_path / "data")
    with pytest.raises(DataMismatch, match="no rows past the token budget"):
        open_local_data(root, _settings(train_rows))


def test_smoke_settings_cap_the_budget_and_keep_everything_else():
    s = Settings(challenge={"seq_len": 32, "token_budget": 32 * 1000, "deadline_s": 77})
    smoke = smoke_settings(s, rows=64)
    assert smoke.challenge.token_budget == 64 * 32
    assert smoke.scoring.heldout_positions == 128
    assert smoke.challenge.deadline_s == 77 and smoke.sandbox == s.sandbox
    small = Settings(challenge={"seq_len": 32, "token_budget": 32 * 10})
    assert smoke_settings(small, rows=64).challenge.token_budget == 32 * 10
