"""The challenge tokenizer: byte-level BPE (`tokenizers`) and its per-token byte-length table.

Byte-level BPE maps each of the 256 byte values to one printable character, so every token
string is a sequence of such characters and its UTF-8 byte length is simply its character
count. No normalizer, no prefix space, no post-processor: the tokens of a text cover its
bytes exactly once, so for every document sum(byte_len[t] for t in tokens) equals
len(text.encode("utf-8")). The separator is a special token with 0 bytes that encoding text
never produces (`encode_special_tokens`): only the challenge inserts it between documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from prism_challenge.data.errors import DataInputError, DataIntegrityError
from prism_challenge.data.manifest import read_manifest, verify_file
from prism_challenge.data.spec import TokenizerSpec

_ALPHABET = frozenset(pre_tokenizers.ByteLevel.alphabet())
LIBRARY = f"tokenizers {tokenizers.__version__}"


def new_tokenizer() -> Tokenizer:
    # ignore_merges: a pre-token that is itself in the vocabulary becomes that one token
    # without replaying the merges (faster; byte accounting is the same either way).
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=True
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=True)
    return tok


def train_tokenizer(texts: Iterable[str], spec: TokenizerSpec, length: int | None = None):
    """Train on `texts` (an iterator of batches is fine too) and return the tokenizer.

    The separator is special token 0; ids 1..256 are the byte alphabet; merges follow.
    """
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=spec.min_frequency,
        special_tokens=[spec.separator],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=length)
    got = tok.get_vocab_size()
    if got != spec.vocab_size:
        raise DataInputError(
            f"the tokenizer learned only {got} of the {spec.vocab_size} tokens asked for: the "
            "train split is too small (add text, lower tokenizer.vocab_size or min_frequency)"
        )
    tok.encode_special_tokens = True
    return tok


def byte_lengths(tok: Tokenizer, separator_id: int) -> np.ndarray:
    """int32[vocab_size]: UTF-8 bytes each token stands for (the separator: 0)."""
    n = tok.get_vocab_size()
    out = np.zeros(n, dtype=np.int32)
    for i in range(n):
        if i == separator_id:
            continue
        piece = tok.id_to_token(i)
        if piece is None or not piece or not set(piece) <= _ALPHABET:
            raise DataIntegrityError(f"token {i} ({piece!r}) is not a byte-level BPE token")
        out[i] = len(piece)
    return out


def iter_encoded(tok: Tokenizer, texts: list[str]) -> Iterator[list[int]]:
    """Token ids of each text (batch API, parallel in Rust; offsets are not computed)."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    for enc in encode(texts, add_special_tokens=False):
        yield enc.ids


def tokenizer_from_bytes(raw: bytes) -> Tokenizer:
    tok = Tokenizer.from_str(raw.decode("utf-8"))
    tok.encode_special_tokens = True  # not serialised: text never encodes to the separator
    return tok


def load_tokenizer(data_root: Path | str) -> Tokenizer:
    """The challenge tokenizer of a prepared data root, refused unless its sha256 verifies."""
    root = Path(data_root)
    manifest = read_manifest(root)
    path = verify_file(root, manifest.tokenizer)
    tok = tokenizer_from_bytes(path.read_bytes())
    if tok.get_vocab_size() != manifest.vocab_size:
        raise DataIntegrityError(f"{path}: vocabulary size differs from the MANIFEST")
    return tok
