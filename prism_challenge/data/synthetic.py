"""Small, deterministic English-like documents and a matching spec, for tests and benchmarks.

Not a corpus anyone scores on: it exists so that tests can run the real pipeline (local
jsonl source -> tokenizer -> shards -> MANIFEST) in a second or two.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from prism_challenge.data.spec import DataSpec, LocalSource, SplitSpec, TokenizerSpec

_WORDS = """
the of and to in is was that for it as with be on by this which are from or at an have
not but they one all their were has had been there can more when other also its would
into some time two only these first new may people could such many water over than then
them made most after years used each well between where years much world school system
study students learning teacher class history science energy cells plants animals light
river city country century language music health children body heat earth space number
water process change example important different because through during without against
early large small small long high great local human natural social common public simple
research question answer result evidence theory method model data value level growth form
""".split()
_EXTRA = ["café", "naïve", "résumé", "—", "über", "½", "Ω", "→", "日本", "😀"]


def english_like_documents(n_docs: int, seed: int = 0) -> list[dict[str, str]]:
    """`n_docs` FineWeb-Edu-schema rows ({"id", "text"}), ~700 bytes each on average."""
    rng = random.Random(seed)
    rows = []
    for i in range(n_docs):
        paragraphs = []
        for _ in range(rng.randint(1, 4)):
            sentences = []
            for _ in range(rng.randint(2, 6)):
                words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 16))]
                if rng.random() < 0.08:
                    words.insert(rng.randrange(len(words)), rng.choice(_EXTRA))
                if rng.random() < 0.1:
                    words.insert(rng.randrange(len(words)), str(rng.randint(2, 2024)))
                sentence = " ".join(words)
                sentences.append(sentence[0].upper() + sentence[1:] + rng.choice(".....?!"))
            paragraphs.append(" ".join(sentences))
        rows.append({"id": f"<urn:uuid:synthetic-{seed}-{i:06d}>", "text": "\n\n".join(paragraphs)})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def small_spec(
    inputs: list[str | Path],
    *,
    vocab_size: int = 512,
    ratios: tuple[float, float, float] = (0.8, 0.1, 0.1),
    shard_tokens: int = 16_384,
    name: str = "synthetic-test",
) -> DataSpec:
    """A local-source spec with small, test-sized parameters."""
    train, val, test = ratios
    return DataSpec(
        name=name,
        description="synthetic English-like test data",
        source=LocalSource(inputs=[str(p) for p in inputs]),
        split=SplitSpec(salt="prism-test", train=train, val=val, test=test),
        tokenizer=TokenizerSpec(vocab_size=vocab_size),
        shard_tokens=shard_tokens,
    )
