"""Property tests of the bundle readers: the wire encoding, zip archives, directories and
`prism.toml`. A miner controls every byte of these.

What must hold for any input: the reader returns a valid `Bundle` or raises `BundleError`
with a documented rule (never another exception: at the API that would be a 500); an
accepted wire body is the one canonical encoding of its files; reading never holds much more
than the size limits in memory, whatever sizes an archive declares.
"""

from __future__ import annotations

import io
import struct
import tempfile
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from fuzz_kit import ARCH, PROPERTY, TRAIN, budget, valid_files
from hypothesis import example, given
from hypothesis import strategies as st

from prism_challenge.bundle import (
    ALLOWED,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    MAX_SCRIPT_BYTES,
    Bundle,
    BundleError,
)
from prism_challenge.bundle.wire import MAGIC

RULES = {"BUNDLE_FILES", "BUNDLE_SIZE", "BUNDLE_UTF8", "BUNDLE_SYNTAX", "BUNDLE_TOML",
         "BUNDLE_META", "BUNDLE_WIRE", "BUNDLE_ZIP", "BUNDLE_DIR"}
NAMES = sorted(ALLOWED)


def read_or_refuse(reader, data):
    """The one outcome allowed: a Bundle, or a BundleError with a documented rule."""
    try:
        return reader(data)
    except BundleError as exc:
        assert exc.rule in RULES, exc.rule
        assert str(exc).strip()
        assert exc.file is None or isinstance(exc.file, str)
        return exc


def raw_wire(entries: list[tuple[bytes, bytes, int | None]]) -> bytes:
    """A wire body built without the encoder's care: any names, order and declared lengths."""
    parts = [MAGIC]
    for name, data, declared in entries:
        size = len(data) if declared is None else declared
        parts += [struct.pack(">H", len(name)), name, struct.pack(">I", size), data]
    return b"".join(parts)


_name = st.one_of(st.sampled_from(NAMES).map(str.encode), st.binary(max_size=24))
_data = st.one_of(st.binary(max_size=200), st.sampled_from([ARCH, TRAIN, b"name = 'x'\n"]))
_entry = st.tuples(_name, _data, st.one_of(st.none(), st.integers(0, 2**32 - 1)))


@st.composite
def mutated(draw, valid: bytes) -> bytes:
    """`valid` with bytes flipped, cut, inserted or spliced."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "truncate"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[at:]
    return bytes(data)


VALID_WIRE = Bundle({**valid_files("wire"), MANIFEST: b'name = "w"\n[axes]\nnorm = "rmsnorm"\n'})


@PROPERTY
@given(data=st.one_of(
    st.binary(max_size=512),
    st.binary(max_size=256).map(lambda tail: MAGIC + tail),
    st.lists(_entry, max_size=4).map(raw_wire),
    mutated(VALID_WIRE.to_wire()),
))
@example(data=raw_wire([(b"architecture.py", ARCH, None), (b"training.py", TRAIN, 2**32 - 1)]))
@example(data=raw_wire([(b"training.py", TRAIN, None), (b"architecture.py", ARCH, None)]))
def test_any_wire_body_is_a_canonical_bundle_or_a_bundle_error(data):
    outcome = read_or_refuse(Bundle.from_wire, data)
    if isinstance(outcome, Bundle):
        assert outcome.to_wire() == data  # strict: only the canonical encoding is accepted
        assert set(outcome.files) <= ALLOWED


@PROPERTY
@given(files=st.dictionaries(st.sampled_from(NAMES), _data, max_size=3))
def test_encoding_round_trips(files):
    outcome = read_or_refuse(Bundle, files)
    if isinstance(outcome, Bundle):
        again = Bundle.from_wire(outcome.to_wire())
        assert dict(again.files) == files and again.digest == outcome.digest


def zip_of(entries: list[tuple[str, bytes]], compression: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as archive:
        for name, data in entries:
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return buf.getvalue()


_zip_name = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES).map(lambda n: f"bundle/{n}"),
    st.sampled_from(["../architecture.py", "/training.py", "a/b/prism.toml", ".hidden",
                     "__MACOSX/._architecture.py", "bundle/", "README.md", "x\\training.py"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20),
)
_zips = st.builds(
    zip_of,
    st.lists(st.tuples(_zip_name, _data), max_size=5),
    st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2,
                     zipfile.ZIP_LZMA]),
)
VALID_ZIP = zip_of(sorted(valid_files("zip").items()), zipfile.ZIP_DEFLATED)


def nameless_member_zip() -> bytes:
    """A valid archive plus one member whose central record has an empty name."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, data in sorted(valid_files("nameless").items()):
            archive.writestr(name, data)
        archive.writestr("X", b"")
    raw = bytearray(buf.getvalue())
    at = raw.rindex(b"PK\x01\x02")  # the last central record, that of "X"
    raw[at + 28 : at + 34] = struct.pack("<HHH", 0, 0, 1)  # no name; "X" becomes its comment
    return bytes(raw)


@pytest.mark.filterwarnings("ignore:Duplicate name")  # archives with a repeated member
@PROPERTY
@given(data=st.one_of(st.binary(max_size=300), _zips, mutated(VALID_ZIP),
                      _zips.flatmap(mutated)))
@example(data=VALID_ZIP[1:])  # once a ValueError (negative seek) out of zipfile
@example(data=nameless_member_zip())  # once an IndexError out of ZipInfo.is_dir
def test_any_archive_is_a_bundle_or_a_bundle_error(data):
    outcome = read_or_refuse(Bundle.from_zip, data)
    if isinstance(outcome, Bundle):
        assert set(outcome.files) <= ALLOWED


def test_an_archive_path_that_is_a_directory_is_a_bundle_error(tmp_path):
    refused = read_or_refuse(Bundle.from_zip, tmp_path)  # once an IsADirectoryError
    assert refused.rule == "BUNDLE_ZIP" and "cannot be read" in str(refused)


def _bomb(declared: int | None, real: int) -> bytes:
    """One member of `real` zero bytes (it deflates to ~1/1000), whose header claims
    `declared` bytes when given (a lying header)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("architecture.py", b"\0" * real)
        archive.writestr("training.py", TRAIN)
    raw = buf.getvalue()
    if declared is not None:  # patch the uncompressed size in the local and central headers
        size = struct.pack("<I", real)
        raw = raw.replace(size, struct.pack("<I", declared))
    return raw


@pytest.mark.parametrize(("declared", "rule"), [
    (None, "BUNDLE_SIZE"),  # refused from the header, before inflating
    (100, "BUNDLE_ZIP"),  # the header lies: zipfile stops at 100 bytes and the CRC fails
])
def test_a_zip_bomb_is_refused_holding_at_most_the_limit_in_memory(declared, rule):
    bomb = _bomb(declared, 64 * 2**20)  # 64 MiB inflated, ~64 KiB on the wire
    tracemalloc.start()
    try:
        with pytest.raises(BundleError) as refused:
            Bundle.from_zip(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.rule == rule, refused.value
    assert peak < 4 * MAX_SCRIPT_BYTES + len(bomb) + 2**20, peak


def test_a_wire_length_of_4_gib_is_refused_before_reading():
    refused = read_or_refuse(Bundle.from_wire, raw_wire([(b"architecture.py", ARCH, 2**32 - 1)]))
    assert (refused.rule, refused.file) == ("BUNDLE_SIZE", "architecture.py")


@budget(25)
@given(entries=st.dictionaries(
    st.one_of(st.sampled_from(NAMES), st.sampled_from([".git", "__pycache__", "notes.txt"]),
              st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1,
                      max_size=12)),
    st.one_of(_data, st.none()),  # None: a sub-directory
    max_size=5,
))
def test_any_directory_is_a_bundle_or_a_bundle_error(entries):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, data in entries.items():
            if data is None:
                (root / name).mkdir()
            else:
                (root / name).write_bytes(data)
        outcome = read_or_refuse(Bundle.from_dir, root)
    if isinstance(outcome, Bundle):
        visible = {n for n in entries if not n.startswith(".") and n != "__pycache__"}
        assert set(outcome.files) == visible


# ---- prism.toml --------------------------------------------------------------------------

_toml_scalar = st.one_of(
    st.integers().map(str), st.floats().map(repr), st.booleans().map(lambda b: str(b).lower()),
    st.text(max_size=20).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    st.sampled_from(["1979-05-27", "inf", "nan", "0x7fffffffffffffff", "9" * 400, "9" * 5000]),
)
_toml_value = st.recursive(
    _toml_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda v: "[" + ", ".join(v) + "]"),
                            st.lists(inner, max_size=2).map(
                                lambda v: "{" + ", ".join(f"k{i} = {x}" for i, x in
                                                          enumerate(v)) + "}")),
    max_leaves=8,
)
_key = st.one_of(st.sampled_from(["name", "description", "axes", "norm", "layers", "lr"]),
                 st.from_regex(r"[a-z_]{1,8}", fullmatch=True))


@st.composite
def toml_documents(draw) -> str:
    top = [f"{draw(_key)} = {draw(_toml_value)}" for _ in range(draw(st.integers(0, 3)))]
    axes = [f"{draw(_key)} = {draw(_toml_value)}" for _ in range(draw(st.integers(0, 4)))]
    return "\n".join(top + (["[axes]", *axes] if draw(st.booleans()) else [])) + "\n"


DEEP = "x = " + "[" * 4000 + "]" * 4000 + "\n"
DEEP_INLINE = "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"


@PROPERTY
@given(text=st.one_of(toml_documents(), st.text(max_size=200)))
@example(text=DEEP)  # once a RecursionError out of tomllib (a 500 at the API)
@example(text=DEEP_INLINE)
@example(text="[axes]\nlayers = " + "9" * 5000 + "\n")  # once a ValueError (int digit limit)
@example(text="[axes]\nlayers = " + "9" * 400 + "\n")  # once an OverflowError in the registry
def test_any_prism_toml_is_meta_or_a_bundle_error(text):
    files = {**valid_files("toml"), MANIFEST: text.encode("utf-8", "surrogatepass")}
    outcome = read_or_refuse(Bundle, files)
    if isinstance(outcome, BundleError):
        assert outcome.rule in {"BUNDLE_TOML", "BUNDLE_META", "BUNDLE_UTF8", "BUNDLE_SIZE"}
        assert outcome.file == MANIFEST
        return
    meta = outcome.meta
    assert meta.name is None or 0 < len(meta.name) <= 200
    for value in meta.axes.values():
        assert isinstance(value, str | int | float | bool)
        if isinstance(value, int):
            assert -(2**63) <= value < 2**63


def test_a_prism_toml_at_the_size_limit_nested_to_the_limit_is_a_clean_refusal():
    text = "x = " + "[" * ((MAX_MANIFEST_BYTES - 8) // 2) + "]" * ((MAX_MANIFEST_BYTES - 8) // 2)
    refused = read_or_refuse(Bundle, {**valid_files(), MANIFEST: text.encode()})
    assert (refused.rule, refused.file) == ("BUNDLE_TOML", MANIFEST)
