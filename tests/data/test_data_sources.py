"""The three sources: local parquet/jsonl, FineWeb-Edu through `datasets` streaming, demo."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prism_challenge.data import (
    DataInputError,
    DemoSource,
    FineWebSource,
    TokenStream,
    load_spec,
    prepare_data,
    read_manifest,
)
from prism_challenge.data.synthetic import english_like_documents, small_spec

DOCS = english_like_documents(300, seed=11)


def _fineweb_table(rows):
    """Rows with the FineWeb-Edu columns (text, id, dump, url, ..., int_score)."""
    n = len(rows)
    return pa.table(
        {
            "text": [r["text"] for r in rows],
            "id": [r["id"] for r in rows],
            "dump": ["CC-MAIN-2024-10"] * n,
            "url": [f"https://example.org/{i}" for i in range(n)],
            "file_path": ["s3://commoncrawl/x.warc.gz"] * n,
            "language": ["en"] * n,
            "language_score": [0.97] * n,
            "token_count": [len(r["text"]) // 4 for r in rows],
            "score": [3.2] * n,
            "int_score": [3] * n,
        }
    )


def _shards(root):
    m = read_manifest(root)
    return {k: [s.sha256 for s in v.shards] for k, v in m.splits.items()}, m


def test_parquet_folder_jsonl_and_gzip_give_the_same_data(tmp_path):
    (tmp_path / "pq").mkdir()
    pq.write_table(_fineweb_table(DOCS[:150]), tmp_path / "pq" / "000_00000.parquet")
    pq.write_table(_fineweb_table(DOCS[150:]), tmp_path / "pq" / "001_00000.parquet")
    with gzip.open(tmp_path / "docs.jsonl.gz", "wt", encoding="utf-8") as fh:
        for r in DOCS:
            fh.write(json.dumps(r) + "\n")
    prepare_data(small_spec([tmp_path / "pq"]), tmp_path / "a")
    prepare_data(small_spec([tmp_path / "docs.jsonl.gz"]), tmp_path / "b")
    shards_a, ma = _shards(tmp_path / "a")
    shards_b, mb = _shards(tmp_path / "b")
    assert shards_a == shards_b  # same documents, same tokens, whatever the container
    assert [i["name"] for i in ma.source["inputs"]] == ["000_00000.parquet", "001_00000.parquet"]


def _hub_mirror(tmp_path, rows):
    """A local folder laid out like the hub repo HuggingFaceFW/fineweb-edu (same configs)."""
    repo = tmp_path / "fineweb-edu"
    (repo / "sample" / "10BT").mkdir(parents=True)
    (repo / "README.md").write_text(
        "---\nconfigs:\n- config_name: sample-10BT\n  data_files:\n  - split: train\n"
        "    path: sample/10BT/*\n---\n# local mirror for tests\n"
    )
    pq.write_table(_fineweb_table(rows[:200]), repo / "sample" / "10BT" / "000_00000.parquet")
    pq.write_table(_fineweb_table(rows[200:]), repo / "sample" / "10BT" / "001_00000.parquet")
    return repo


def test_fineweb_source_streams_through_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = _hub_mirror(tmp_path, DOCS)
    pinned = load_spec("data_manifests/fineweb-edu-sample-10BT.json")
    # The production spec's source, pointed at the local mirror; the small test settings.
    source = pinned.source.model_copy(update={"dataset": str(repo)})
    spec = small_spec([]).with_source(source)
    root = tmp_path / "hub"
    prepare_data(spec, root)
    hub_shards, m = _shards(root)
    assert m.corpus == "fineweb-edu"
    assert m.source["revision"] == pinned.source.revision
    assert m.source["config"] == "sample-10BT" and m.source["rows_read"] == len(DOCS)
    # The same documents as local files give the very same token shards.
    prepare_data(small_spec([repo / "sample" / "10BT"]), tmp_path / "local")
    assert _shards(tmp_path / "local")[0] == hub_shards


def test_fineweb_source_refuses_a_dataset_without_text(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = _hub_mirror(tmp_path, DOCS)
    for f in (repo / "sample" / "10BT").glob("*.parquet"):
        pq.write_table(_fineweb_table(DOCS[:5]).drop_columns(["text"]), f)
    spec = small_spec([]).with_source(FineWebSource(dataset=str(repo), revision="0" * 40))
    with pytest.raises(DataInputError, match="no `text` column"):
        prepare_data(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_pinned_manifests_are_valid():
    demo = load_spec("data_manifests/demo.json")
    assert demo.corpus == "demo" and "DEMO" in demo.description
    assert demo.tokenizer.vocab_size == 4096  # the demo profile (docs/data.md)
    assert demo.source.min_text_bytes >= 10_000_000
    prod = load_spec("data_manifests/fineweb-edu-sample-10BT.json")
    assert prod.corpus == "fineweb-edu" and prod.tokenizer.vocab_size == 32768
    assert prod.source.dataset == "HuggingFaceFW/fineweb-edu"
    assert prod.source.config == "sample-10BT"
    assert len(prod.source.revision) == 40 and int(prod.source.revision, 16) >= 0


def test_demo_source_is_built_offline_and_labelled(tmp_path):
    # The real demo builder on two small installed distributions (the full demo manifest
    # takes ~30 s; see docs/data.md for its measured build).
    source = DemoSource(distributions=["typer", "rich"], min_text_bytes=50_000)
    spec = small_spec([], ratios=(0.8, 0.1, 0.1)).with_source(source)
    a = prepare_data(spec, tmp_path / "a").manifest
    b = prepare_data(spec, tmp_path / "b").manifest
    assert a.sha256 == b.sha256  # deterministic
    assert a.corpus == "demo" and a.is_demo and "DEMO" in a.label
    assert a.source["label"] == "DEMO"
    assert [d["name"] for d in a.source["distributions"]] == ["typer", "rich"]
    stream = TokenStream.open(tmp_path / "a", "train")
    assert stream.manifest.is_demo and stream.n_tokens > 10_000


def test_demo_source_refuses_when_too_small_or_missing(tmp_path):
    spec = small_spec([]).with_source(DemoSource(distributions=["typer"]))
    with pytest.raises(DataInputError, match="demo corpus: only"):
        prepare_data(spec, tmp_path / "out")
    spec = small_spec([]).with_source(DemoSource(distributions=["no-such-dist-xyz"]))
    with pytest.raises(DataInputError, match="not installed"):
        prepare_data(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()
