"""The MANIFEST of a prepared data root: what was built, from what, and the sha256 of every file.

Layout of a data root (every path below is relative to it and listed in MANIFEST.json):

    MANIFEST.json          this model, as indented JSON (its own sha256 = the data version)
    tokenizer.json         the challenge tokenizer (`tokenizers` format)
    token_bytes.bin        int32[vocab_size]: UTF-8 bytes of each token (separator: 0)
    {train,val,test}/shard_XXXXX.bin
                           the split's token stream (documents in the challenge's order, each
                           followed by the separator), cut into fixed-size little-endian
                           uint16 (vocab <= 65,536) chunks; memory-mappable as they are

The MANIFEST carries no timestamps or absolute paths: the same inputs give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from prism_challenge.data.errors import DataIntegrityError
from prism_challenge.data.spec import SPLITS, Corpus, DataSpec

MANIFEST_FORMAT = "prism-data/1"
MANIFEST_NAME = "MANIFEST.json"
TOKENIZER_NAME = "tokenizer.json"
BYTE_LENGTHS_NAME = "token_bytes.bin"
DEMO_LABEL = (
    "DEMO corpus (docstrings of installed Python packages): for development only; "
    "scores on it are not comparable with FineWeb-Edu scores"
)

SPLIT_RULE = (
    "h = sha256(utf8(salt + '\\x00' + id)); u = uint64_be(h[0:8]) / 2**64; "
    "train if u < train, val if u < train + val, else test"
)
ORDER_RULE = (
    "within a split, documents sorted by (uint64_be(h[8:16]), position in the source); "
    "each document's tokens are followed by the separator"
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileRef(_Model):
    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ShardInfo(FileRef):
    n_tokens: int = Field(ge=1)


class SplitInfo(_Model):
    n_documents: int = Field(ge=1)
    n_text_bytes: int = Field(ge=0)
    n_tokens: int = Field(ge=1)
    shards: list[ShardInfo] = Field(min_length=1)


class TokenizerInfo(FileRef):
    kind: Literal["byte-level BPE"] = "byte-level BPE"
    library: str
    vocab_size: int = Field(ge=1)
    separator: str
    separator_id: int = Field(ge=0)
    min_frequency: int
    trained_on_documents: int
    trained_on_bytes: int


class Manifest(_Model):
    """A prepared data version. `sha256` (not a field) is the hash of the MANIFEST file itself."""

    format: Literal["prism-data/1"] = MANIFEST_FORMAT
    corpus: Corpus
    label: str
    name: str
    source: dict[str, Any]
    spec: DataSpec
    spec_sha256: str
    split_rule: str
    order_rule: str
    vocab_size: int = Field(ge=1)
    separator_id: int = Field(ge=0)
    tokenizer_sha256: str
    tokenizer: TokenizerInfo
    byte_lengths: FileRef
    token_dtype: Literal["uint16", "uint32"]
    shard_tokens: int
    splits: dict[str, SplitInfo]
    plan_sha256: str

    _sha256: str = PrivateAttr("")

    @property
    def sha256(self) -> str:
        """sha256 of the MANIFEST file this was read from (identifies the data version)."""
        return self._sha256

    @property
    def is_demo(self) -> bool:
        return self.corpus == "demo"

    def split(self, name: str) -> SplitInfo:
        if name not in self.splits:
            raise ValueError(f"unknown split {name!r}; this data has {sorted(self.splits)}")
        return self.splits[name]

    def dump_bytes(self) -> bytes:
        return (json.dumps(self.model_dump(mode="json"), indent=2) + "\n").encode()

    @classmethod
    def from_bytes(cls, raw: bytes, where: str = MANIFEST_NAME) -> Manifest:
        try:
            manifest = cls.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise DataIntegrityError(
                f"{where}: not a valid PRISM MANIFEST ({loc}: {first['msg']})"
            ) from None
        if set(manifest.splits) != set(SPLITS):
            raise DataIntegrityError(f"{where}: splits must be {list(SPLITS)}")
        if manifest.separator_id >= manifest.vocab_size:
            raise DataIntegrityError(
                f"{where}: separator_id {manifest.separator_id} is outside the vocabulary "
                f"of {manifest.vocab_size} tokens"
            )
        manifest._sha256 = hashlib.sha256(raw).hexdigest()
        return manifest


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def safe_member(root: Path, name: str) -> Path:
    """`root / name` for a MANIFEST-relative path; refuses absolute paths and `..`."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise DataIntegrityError(f"MANIFEST names a path outside the data root: {name!r}")
    return root.joinpath(*rel.parts)


def read_manifest(root: Path, expected_sha256: str | None = None) -> Manifest:
    path = Path(root) / MANIFEST_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataIntegrityError(
            f"{path}: no MANIFEST; prepare the data first (prism prepare-data --out {root})"
        ) from None
    manifest = Manifest.from_bytes(raw, str(path))
    if expected_sha256 is not None and manifest.sha256 != expected_sha256:
        raise DataIntegrityError(
            f"{path}: data version {manifest.sha256[:16]}… is not the expected "
            f"{expected_sha256[:16]}…"
        )
    return manifest


def verify_file(root: Path, ref: FileRef, size: int | None = None) -> Path:
    """Check one MANIFEST-listed file (size when given, then sha256); return its path."""
    path = safe_member(root, ref.file)
    try:
        if not path.is_file():
            raise DataIntegrityError(f"{path}: missing (listed in the MANIFEST)")
        if size is not None and path.stat().st_size != size:
            raise DataIntegrityError(
                f"{path}: {path.stat().st_size} bytes, the MANIFEST says {size}: corrupted"
            )
        found = sha256_file(path)
    except OSError as exc:  # a name too long for the file system, no permission, I/O
        raise DataIntegrityError(f"{ref.file[:80]!r}: cannot be read: {exc.strerror}") from None
    if found != ref.sha256:
        raise DataIntegrityError(
            f"{path}: sha256 {found[:16]}… does not match the MANIFEST ({ref.sha256[:16]}…): "
            "corrupted or replaced"
        )
    return path


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
