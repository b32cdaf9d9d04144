"""The data a local run reads: the train split, and a val split or a stand-in for it.

On a validator the val split is the secret the eval sandbox scores on. A miner who prepared
the demo corpus has one; a miner handed only the train shards does not. Then the rows of the
train split *after* the token budget stand in for it: the run never sees them, so they are
held out in the same sense, and the report says which of the two was used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism_challenge.config.settings import Settings
from prism_challenge.data import DataIntegrityError, TokenStream, read_manifest
from prism_challenge.data.manifest import MANIFEST_NAME


class DataRootMissing(FileNotFoundError):
    """No prepared data at the root; the message names the command that prepares it."""


class DataMismatch(ValueError):
    """The prepared data cannot serve the configured geometry and budget."""


def prepare_command(root: Path) -> str:
    return f"prism prepare-data --source demo --out {root}"


class HeldOutRows:
    """The train split's rows from `first_row` on, with the reader interface the runner uses."""

    def __init__(self, train: TokenStream, seq_len: int, first_row: int) -> None:
        self.train = train
        self.first_row = first_row
        self.seq_len = seq_len
        self.manifest = train.manifest
        self.byte_lengths = train.byte_lengths

    def n_rows(self, seq_len: int) -> int:
        self._same_geometry(seq_len)
        return max(0, self.train.n_rows(seq_len) - self.first_row)

    def rows(self, seq_len: int, start_row: int, count: int) -> np.ndarray:
        self._same_geometry(seq_len)
        if start_row < 0 or count < 0 or start_row + count > self.n_rows(seq_len):
            raise IndexError(f"held-out rows [{start_row}, {start_row + count}) out of range")
        return self.train.rows(seq_len, self.first_row + start_row, count)

    def rows_at(self, seq_len: int, indices: np.ndarray) -> np.ndarray:
        self._same_geometry(seq_len)
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.n_rows(seq_len)):
            raise IndexError(f"held-out row indices outside the {self.n_rows(seq_len)} rows")
        return self.train.rows_at(seq_len, indices + self.first_row)

    def _same_geometry(self, seq_len: int) -> None:
        if seq_len != self.seq_len:
            raise ValueError(f"held-out rows were cut at seq_len {self.seq_len}, not {seq_len}")


@dataclass(frozen=True)
class LocalData:
    train: TokenStream
    val: TokenStream | HeldOutRows
    val_source: str  # one line for the report: which rows the held-out numbers come from

    @property
    def corpus(self) -> str:
        return self.train.manifest.corpus


def _val_absent(root: Path) -> bool:
    """True when the data has no val split at all (not listed, or none of its shards there)."""
    manifest = read_manifest(root)
    if "val" not in manifest.splits:
        return True
    return not any((root / s.file).exists() for s in manifest.splits["val"].shards)


def open_local_data(data_root: Path, settings: Settings) -> LocalData:
    """Open and hash-verify what a local run reads.

    Raises `DataRootMissing` when nothing is prepared at `data_root`, `DataIntegrityError`
    when what is there does not verify, and `DataMismatch` when the configured budget does
    not fit the data.
    """
    root = Path(data_root)
    if not (root / MANIFEST_NAME).is_file():
        raise DataRootMissing(
            f"no prepared data at {root} (no {MANIFEST_NAME}); prepare the demo corpus with:\n"
            f"  {prepare_command(root)}"
        )
    train = TokenStream.open(root, "train")
    c = settings.challenge
    try:
        budget_rows = train.budget_rows(c.seq_len, c.token_budget)
    except ValueError as exc:
        raise DataMismatch(str(exc)) from None
    try:
        val = TokenStream.open(root, "val", expected_manifest_sha256=train.manifest.sha256)
        return LocalData(train, val, f"the val split ({val.n_tokens:,} tokens)")
    except DataIntegrityError:
        if not _val_absent(root):
            raise
    held = HeldOutRows(train, c.seq_len, budget_rows)
    if held.n_rows(c.seq_len) < 1:
        raise DataMismatch(
            f"{root} has no val split and the train split has no rows past the token budget "
            f"({budget_rows:,} rows) to hold out; lower challenge.token_budget"
        )
    last = budget_rows + held.n_rows(c.seq_len)
    return LocalData(train, held,
                     f"held-out train rows {budget_rows:,}..{last:,} (this data has no val split)")
