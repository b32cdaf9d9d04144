"""Property tests of the data plane's readers: data specs (`data_manifests/*.json`), the
MANIFEST of a prepared root, and the shard files it lists, on a real prepared root.

What must hold for any input: a spec is a `DataSpec` or a `DataInputError`; a MANIFEST is a
`Manifest` or a `DataIntegrityError`; `TokenStream.open` gives a stream whose geometry agrees
with its files, or a `DataIntegrityError`; a shard, byte-length table or tokenizer changed
in any way (a byte, a cut, an extension) is refused, never read.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from fuzz_kit import PROPERTY, budget
from hypothesis import example, given
from hypothesis import strategies as st

from prism_challenge.data import DataIntegrityError, Manifest, TokenStream
from prism_challenge.data.errors import DataInputError
from prism_challenge.data.spec import DataSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPEC = json.loads((ROOT / "data_manifests" / "demo.json").read_text())


def leaves(doc, path=()):
    """Every (path, value) of a JSON document's scalars, lists and objects."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from leaves(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from leaves(value, (*path, index))


def replaced(doc, path, value):
    doc = json.loads(json.dumps(doc))
    if not path:
        return value
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=10),
              st.sampled_from([-1, 0, 2**31, 10**30, "", "../x", "/etc/passwd", "a" * 5000,
                               "val", "uint32", "0" * 64])),
    lambda inner: st.one_of(st.lists(inner, max_size=2),
                            st.dictionaries(st.text(max_size=5), inner, max_size=2)),
    max_leaves=4,
)


def mutations_of(doc) -> st.SearchStrategy:
    paths = [path for path, _ in leaves(doc)]
    return st.builds(lambda path, value: replaced(doc, path, value),
                     st.sampled_from(paths), _json)


@pytest.fixture(scope="module")
def data_root(prepared_data, tmp_path_factory) -> Path:
    """A private copy of the session's prepared root (its MANIFEST is rewritten per example)."""
    root = tmp_path_factory.mktemp("fuzz-data") / "data"
    shutil.copytree(prepared_data, root)
    return root


def open_or_refuse(root: Path, split: str):
    try:
        return TokenStream.open(root, split)
    except DataIntegrityError as exc:
        assert str(exc).strip()
        return exc


@pytest.fixture(scope="module")
def manifest_doc(data_root) -> dict:
    return json.loads((data_root / "MANIFEST.json").read_text())


@budget(40)
@given(data=st.data())
def test_any_manifest_edit_opens_a_consistent_stream_or_is_refused(data_root, manifest_doc,
                                                                  data):
    edited = data.draw(mutations_of(manifest_doc))
    path = data_root / "MANIFEST.json"
    original = path.read_bytes()
    try:
        path.write_text(json.dumps(edited))
        outcome = open_or_refuse(data_root, "val")
    finally:
        path.write_bytes(original)
    if isinstance(outcome, TokenStream):
        assert 0 <= outcome.manifest.separator_id < outcome.byte_lengths.size
        assert outcome.byte_lengths[outcome.manifest.separator_id] == 0
        assert outcome.tokens(0, outcome.n_tokens).size == outcome.n_tokens


@pytest.mark.parametrize(("path", "value"), [
    (("separator_id",), 10**6),  # once an IndexError into the byte-length table
    (("separator_id",), -1),  # negative: numpy would wrap it to the last token
    (("splits", "val", "shards", 0, "file"), "a" * 5000),  # once an OSError (name too long)
])
def test_manifest_regressions_are_integrity_errors(data_root, manifest_doc, path, value):
    target = data_root / "MANIFEST.json"
    original = target.read_bytes()
    try:
        target.write_text(json.dumps(replaced(manifest_doc, path, value)))
        outcome = open_or_refuse(data_root, "val")
    finally:
        target.write_bytes(original)
    assert isinstance(outcome, DataIntegrityError), outcome


@PROPERTY
@given(raw=st.one_of(st.binary(max_size=200), _json.map(lambda d: json.dumps(d).encode())))
@example(raw=b"[" * 100_000)
@example(raw=b"9" * 5000)
def test_any_manifest_bytes_are_a_manifest_or_an_integrity_error(raw):
    try:
        Manifest.from_bytes(raw)
    except DataIntegrityError as exc:
        assert str(exc).startswith("MANIFEST.json: ")


def _files_of(root: Path) -> list[str]:
    doc = json.loads((root / "MANIFEST.json").read_text())
    shards = [s["file"] for s in doc["splits"]["val"]["shards"]]
    return [*shards, doc["byte_lengths"]["file"], doc["tokenizer"]["file"]]


@budget(30)
@given(data=st.data())
def test_a_listed_file_changed_in_any_way_is_refused(data_root, data):
    name = data.draw(st.sampled_from(_files_of(data_root)))
    target = data_root / name
    original = target.read_bytes()
    change = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
    at = data.draw(st.integers(0, len(original) - 1))
    if change == "flip":
        changed = bytearray(original)
        changed[at] ^= data.draw(st.integers(1, 255))
    elif change == "truncate":
        changed = original[:at]
    else:
        changed = original + data.draw(st.binary(min_size=1, max_size=8))
    try:
        target.write_bytes(bytes(changed))
        outcome = open_or_refuse(data_root, "val")
    finally:
        target.write_bytes(original)
    assert isinstance(outcome, DataIntegrityError), (name, change)
    assert "corrupted" in str(outcome) or "replaced" in str(outcome)


def spec_or_refuse(raw: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.json"
        path.write_bytes(raw)
        try:
            return load_spec(path)
        except DataInputError as exc:
            assert str(path) in str(exc)
            return exc


@PROPERTY
@given(raw=st.one_of(st.binary(max_size=200),
                     mutations_of(DEMO_SPEC).map(lambda d: json.dumps(d).encode())))
@example(raw=b"[" * 100_000)  # once a RecursionError out of json.loads
@example(raw=b"9" * 5000)  # once a ValueError (int digit limit)
def test_any_data_spec_is_a_spec_or_a_data_input_error(raw):
    outcome = spec_or_refuse(raw)
    if isinstance(outcome, DataSpec):
        split = outcome.split
        assert abs(split.train + split.val + split.test - 1) < 1e-9
        assert 258 <= outcome.tokenizer.vocab_size <= 65_536
