"""Data specs: the pinned recipes under `data_manifests/` that `prepare-data` follows.

A spec says where documents come from (FineWeb-Edu at a pinned revision, local files with
the FineWeb-Edu schema, or the offline demo corpus), how they are split and ordered, how the
challenge tokenizer is trained and how shards are cut. The MANIFEST of a prepared data root
embeds the spec it was built from, so the data version carries its own recipe.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from prism_challenge.data.errors import DataInputError
from prism_challenge.shared_files import resolve_manifest

SPEC_FORMAT = "prism-data-spec/1"
SPLITS = ("train", "val", "test")
Corpus = Literal["demo", "fineweb-edu", "local"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FineWebSource(_Model):
    """`datasets` streaming of a hub dataset at a pinned revision (production)."""

    kind: Literal["fineweb-edu"] = "fineweb-edu"
    dataset: str = "HuggingFaceFW/fineweb-edu"
    config: str = "sample-10BT"
    split: str = "train"
    revision: str = Field(min_length=1)


class LocalSource(_Model):
    """Local parquet / jsonl files with the FineWeb-Edu schema (`text`, `id`, ...)."""

    kind: Literal["local"] = "local"
    inputs: list[str] = Field(default_factory=list)


class DemoSource(_Model):
    """The offline demo corpus: docstrings of installed Python distributions.

    For development only: every MANIFEST built from it says `corpus: demo`.
    """

    kind: Literal["demo"] = "demo"
    distributions: list[str] = Field(min_length=1)
    exclude_dirs: list[str] = Field(default_factory=lambda: ["tests", "test", "testing"])
    min_docstring_chars: int = Field(40, ge=1)
    max_document_bytes: int = Field(65_536, ge=1024)
    min_text_bytes: int = Field(10_000_000, ge=1)


Source = Annotated[FineWebSource | LocalSource | DemoSource, Field(discriminator="kind")]


class SplitSpec(_Model):
    """Documents go to train / val / test by a hash of their id; ratios sum to 1."""

    salt: str = Field(min_length=1)
    train: float = Field(gt=0, lt=1)
    val: float = Field(gt=0, lt=1)
    test: float = Field(gt=0, lt=1)

    @model_validator(mode="after")
    def _ratios_sum_to_one(self) -> SplitSpec:
        if not math.isclose(self.train + self.val + self.test, 1.0, abs_tol=1e-9):
            raise ValueError("train + val + test must sum to 1")
        return self


class TokenizerSpec(_Model):
    """Byte-level BPE trained with `tokenizers` on (a prefix of) the train split."""

    vocab_size: int = Field(ge=258, le=65_536)  # 256 bytes + separator + >= 1 merge
    min_frequency: int = Field(2, ge=1)
    separator: str = Field("<|sep|>", min_length=1)
    # Train on at most this many bytes of train text (in the challenge's order); null = all.
    train_sample_bytes: int | None = Field(None, ge=1)


class LimitsSpec(_Model):
    """Stop reading the source once either limit is reached (source order); null = no limit."""

    max_documents: int | None = Field(None, ge=1)
    max_text_bytes: int | None = Field(None, ge=1)


class DataSpec(_Model):
    format: Literal["prism-data-spec/1"] = SPEC_FORMAT
    name: str = Field(min_length=1)
    description: str = ""
    source: Source
    split: SplitSpec
    tokenizer: TokenizerSpec
    shard_tokens: int = Field(1 << 20, ge=1024)
    limits: LimitsSpec = LimitsSpec()

    @property
    def corpus(self) -> Corpus:
        return self.source.kind

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def with_source(self, source: FineWebSource | LocalSource | DemoSource) -> DataSpec:
        return self.model_copy(update={"source": source})


def load_spec(path: Path | str) -> DataSpec:
    """Read and validate a data spec; every failure is a `DataInputError` naming the file."""
    path = resolve_manifest(path)
    if not path.is_file():
        raise DataInputError(f"{path}: data manifest not found")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataInputError(f"{path}: not a JSON document: {exc}") from None
    except (RecursionError, ValueError) as exc:  # deep nesting; an int past the digit limit
        raise DataInputError(f"{path}: not a usable JSON document: {type(exc).__name__}") from None
    try:
        return DataSpec.model_validate(document)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise DataInputError(f"{path}: invalid data manifest: {reasons}") from None
