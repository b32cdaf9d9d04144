"""The reader: one split of a prepared data root as a verified, memory-mapped token stream.

Geometry belongs to the challenge: row i of a split at `seq_len` L is the tokens
[i*L, i*L + L + 1) of the split's stream (inputs = row[:-1], targets = row[1:]), so
consecutive rows overlap by one token and every token after the first is a target exactly
once. `rows()` slices any range of rows, across shard boundaries, with two vectorised copies.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from prism_challenge.data.errors import DataIntegrityError
from prism_challenge.data.manifest import Manifest, read_manifest, verify_file


class TokenStream:
    """A split of a data root, opened only if the MANIFEST and every shard of it verify."""

    def __init__(
        self,
        root: Path,
        split: str,
        manifest: Manifest,
        shards: list[np.ndarray],
        byte_lengths: np.ndarray,
    ) -> None:
        self.root = root
        self.split = split
        self.manifest = manifest
        self.byte_lengths = byte_lengths
        self._shards = shards
        sizes = np.array([s.size for s in shards], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(sizes)))
        self.n_tokens = int(self._starts[-1])

    @classmethod
    def open(
        cls, data_root: Path | str, split: str, *, expected_manifest_sha256: str | None = None
    ) -> TokenStream:
        """Verify and open `split` ("train" | "val" | "test") of `data_root`.

        Checks the MANIFEST (and, when given, that it is the expected data version), the
        tokenizer and byte-length table hashes, and the size and sha256 of every shard of the
        split. Raises `DataIntegrityError` on any mismatch.
        """
        root = Path(data_root)
        manifest = read_manifest(root, expected_manifest_sha256)
        try:
            info = manifest.split(split)
        except ValueError as exc:
            raise DataIntegrityError(f"{root}: {exc}") from None
        verify_file(root, manifest.tokenizer)
        blen_path = verify_file(root, manifest.byte_lengths, size=4 * manifest.vocab_size)
        byte_lengths = np.fromfile(blen_path, dtype="<i4").astype(np.int32)
        if byte_lengths[manifest.separator_id] != 0:
            raise DataIntegrityError(f"{blen_path}: the separator must have 0 bytes")
        byte_lengths.setflags(write=False)
        dtype = np.dtype("<u2" if manifest.token_dtype == "uint16" else "<u4")
        if sum(s.n_tokens for s in info.shards) != info.n_tokens:
            raise DataIntegrityError(f"{root}: {split} shard token counts do not add up")
        shards = []
        for shard in info.shards:
            path = verify_file(root, shard, size=shard.n_tokens * dtype.itemsize)
            shards.append(np.memmap(path, dtype=dtype, mode="r"))
        return cls(root, split, manifest, shards, byte_lengths)

    # ---- geometry ---------------------------------------------------------------------

    def n_rows(self, seq_len: int) -> int:
        """Full rows of `seq_len + 1` tokens available in this split."""
        _check_seq_len(seq_len)
        return max(0, (self.n_tokens - 1) // seq_len)

    def budget_rows(self, seq_len: int, token_budget: int) -> int:
        """Rows that consume exactly `token_budget` target tokens (`token_budget // seq_len`)."""
        _check_seq_len(seq_len)
        if token_budget <= 0 or token_budget % seq_len:
            raise ValueError(
                f"token budget {token_budget} is not a positive multiple of seq_len {seq_len}"
            )
        rows = token_budget // seq_len
        if rows > self.n_rows(seq_len):
            raise ValueError(
                f"the {self.split} split holds {self.n_tokens:,} tokens "
                f"({self.n_rows(seq_len):,} rows at seq_len {seq_len}); a budget of "
                f"{token_budget:,} tokens needs {rows:,} rows"
            )
        return rows

    # ---- reading ----------------------------------------------------------------------

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """int32 copy of the split's tokens [start, stop)."""
        if not 0 <= start <= stop <= self.n_tokens:
            raise IndexError(f"tokens [{start}, {stop}) outside [0, {self.n_tokens})")
        out = np.empty(stop - start, dtype=np.int32)
        first = int(np.searchsorted(self._starts, start, side="right") - 1)
        pos = start
        k = first
        while pos < stop:
            base = int(self._starts[k])
            end = min(stop, int(self._starts[k + 1]))
            out[pos - start : end - start] = self._shards[k][pos - base : end - base]
            pos = end
            k += 1
        return out

    def rows(self, seq_len: int, start_row: int, count: int) -> np.ndarray:
        """int32[count, seq_len + 1]: rows start_row .. start_row + count - 1."""
        n = self.n_rows(seq_len)
        if start_row < 0 or count < 0 or start_row + count > n:
            raise IndexError(
                f"rows [{start_row}, {start_row + count}) outside the {n} rows of {self.split} "
                f"at seq_len {seq_len}"
            )
        flat = self.tokens(start_row * seq_len, (start_row + count) * seq_len + 1)
        out = np.empty((count, seq_len + 1), dtype=np.int32)
        out[:, :seq_len] = flat[:-1].reshape(count, seq_len)
        out[:, seq_len] = flat[seq_len::seq_len]
        return out

    def rows_at(self, seq_len: int, indices: np.ndarray) -> np.ndarray:
        """int32[len(indices), seq_len + 1]: the rows with these indices, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        n = self.n_rows(seq_len)
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise IndexError(f"row indices outside the {n} rows of {self.split} at seq_len "
                             f"{seq_len}")
        out = np.empty((indices.size, seq_len + 1), dtype=np.int32)
        for i, row in enumerate(indices.tolist()):
            out[i] = self.tokens(row * seq_len, row * seq_len + seq_len + 1)
        return out

    def iter_rows(
        self, seq_len: int, batch_rows: int, start_row: int = 0, n_rows: int | None = None
    ) -> Iterator[np.ndarray]:
        """Batches of up to `batch_rows` rows, in order, from `start_row` (n_rows in all)."""
        end = self.n_rows(seq_len) if n_rows is None else start_row + n_rows
        row = start_row
        while row < end:
            count = min(batch_rows, end - row)
            yield self.rows(seq_len, row, count)
            row += count

    def target_bytes(self, rows: np.ndarray) -> np.ndarray:
        """UTF-8 bytes of each target token of `rows` (int32[count, seq_len]; separator: 0)."""
        return self.byte_lengths[rows[..., 1:]]

    def __repr__(self) -> str:
        return (
            f"TokenStream({str(self.root)!r}, {self.split!r}, corpus={self.manifest.corpus}, "
            f"n_tokens={self.n_tokens}, version={self.manifest.sha256[:12]})"
        )


def _check_seq_len(seq_len: int) -> None:
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
