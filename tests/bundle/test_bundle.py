"""The bundle's file rules, digest and encodings (docs/submissions.md)."""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile

import pytest

from prism_challenge.bundle import MAX_MANIFEST_BYTES, MAX_SCRIPT_BYTES, Bundle, BundleError
from prism_challenge.bundle.wire import MAGIC, encode

ARCH = b"import torch\n\n\ndef build_model(ctx):\n    return torch.nn.Linear(4, 4)\n"
TRAIN = b"def train(ctx):\n    for batch in ctx.batches(8):\n        batch.loss.backward()\n"
TOML = b'name = "tiny"\ndescription = "a linear layer"\n[axes]\ndepth = 1\noptimizer = "sgd"\n'


def write_dir(path, files: dict[str, bytes]):
    path.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    return path


def refusal(fn, *args) -> BundleError:
    with pytest.raises(BundleError) as info:
        fn(*args)
    return info.value


def test_from_dir_reads_files_meta_and_digest(tmp_path):
    files = {"architecture.py": ARCH, "training.py": TRAIN, "prism.toml": TOML}
    bundle = Bundle.from_dir(write_dir(tmp_path / "b", files))
    assert dict(bundle.files) == files
    assert bundle.source("training.py") == TRAIN.decode()
    assert bundle.meta.name == "tiny"
    assert bundle.meta.description == "a linear layer"
    assert dict(bundle.meta.axes) == {"depth": 1, "optimizer": "sgd"}


def test_digest_is_sha256_of_the_documented_encoding():
    files = {"training.py": TRAIN, "architecture.py": ARCH}
    expected = MAGIC
    for name in sorted(files):
        expected += struct.pack(">H", len(name)) + name.encode()
        expected += struct.pack(">I", len(files[name])) + files[name]
    bundle = Bundle(files)
    assert bundle.to_wire() == expected
    assert bundle.digest == hashlib.sha256(expected).hexdigest()


def test_digest_ignores_insertion_order_but_not_a_single_byte():
    a = Bundle({"architecture.py": ARCH, "training.py": TRAIN})
    b = Bundle({"training.py": TRAIN, "architecture.py": ARCH})
    c = Bundle({"architecture.py": ARCH, "training.py": TRAIN + b" "})
    assert a.digest == b.digest
    assert a.digest != c.digest
    # The file boundary is part of the digest: moving bytes between files changes it.
    d = Bundle({"architecture.py": ARCH + b"#", "training.py": TRAIN})
    e = Bundle({"architecture.py": ARCH, "training.py": b"#\n" + TRAIN[:-1]})
    f = Bundle({"architecture.py": ARCH + b"#\n", "training.py": TRAIN[:-1]})
    assert len({d.digest, e.digest, f.digest}) == 3


def test_wire_round_trip_is_exact():
    bundle = Bundle({"architecture.py": ARCH, "training.py": TRAIN, "prism.toml": TOML})
    again = Bundle.from_wire(bundle.to_wire())
    assert again.to_wire() == bundle.to_wire()
    assert again.digest == bundle.digest
    assert again.meta == bundle.meta


def test_files_are_read_only():
    bundle = Bundle({"architecture.py": ARCH, "training.py": TRAIN})
    with pytest.raises(TypeError):
        bundle.files["training.py"] = b"x"  # type: ignore[index]


OK = {"architecture.py": ARCH, "training.py": TRAIN}


@pytest.mark.parametrize(
    ("files", "rule", "file"),
    [
        ({**OK, "utils.py": b"x = 1\n"}, "BUNDLE_FILES", "utils.py"),
        ({"architecture.py": ARCH}, "BUNDLE_FILES", "training.py"),
        ({**OK, "training.py": b"\xff\xfe"}, "BUNDLE_UTF8", "training.py"),
        ({**OK, "architecture.py": b"def f(:\n"}, "BUNDLE_SYNTAX", "architecture.py"),
        ({**OK, "architecture.py": b"x = 1\x00\n"}, "BUNDLE_SYNTAX", "architecture.py"),
        ({**OK, "prism.toml": b"name = \n"}, "BUNDLE_TOML", "prism.toml"),
        ({**OK, "prism.toml": b"name = 3\n"}, "BUNDLE_META", "prism.toml"),
        ({**OK, "prism.toml": b"nmae = 'x'\n"}, "BUNDLE_META", "prism.toml"),
        ({**OK, "prism.toml": b"[axes]\nd = [1, 2]\n"}, "BUNDLE_META", "prism.toml"),
        ({**OK, "prism.toml": b"[axes]\nlr = nan\n"}, "BUNDLE_META", "prism.toml"),
    ],
)
def test_rule_violations_name_the_file_and_the_rule(files, rule, file):
    error = refusal(Bundle, files)
    assert (error.rule, error.file) == (rule, file)
    assert file in str(error)


def test_syntax_error_says_the_line():
    error = refusal(Bundle, {"architecture.py": b"x = 1\ny = (\n", "training.py": TRAIN})
    assert "line" in str(error) and error.rule == "BUNDLE_SYNTAX"


def test_size_limits_are_inclusive():
    at_limit = b"#" * (MAX_SCRIPT_BYTES - 1) + b"\n"
    assert (
        len(Bundle({"architecture.py": at_limit, "training.py": TRAIN}).files["architecture.py"])
        == MAX_SCRIPT_BYTES
    )
    error = refusal(Bundle, {"architecture.py": at_limit + b"\n", "training.py": TRAIN})
    assert (error.rule, error.file) == ("BUNDLE_SIZE", "architecture.py")
    assert str(MAX_SCRIPT_BYTES) in str(error)
    toml = b"#" * MAX_MANIFEST_BYTES + b"\n"
    error = refusal(Bundle, {"architecture.py": ARCH, "training.py": TRAIN, "prism.toml": toml})
    assert (error.rule, error.file) == ("BUNDLE_SIZE", "prism.toml")


def test_from_dir_skips_tool_litter_and_refuses_anything_else(tmp_path):
    path = write_dir(
        tmp_path / "b", {"architecture.py": ARCH, "training.py": TRAIN, ".DS_Store": b"x"}
    )
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "training.cpython-311.pyc").write_bytes(b"\0")
    assert sorted(Bundle.from_dir(path).files) == ["architecture.py", "training.py"]
    (path / "data").mkdir()
    error = refusal(Bundle.from_dir, path)
    assert (error.rule, error.file) == ("BUNDLE_FILES", "data")
    assert refusal(Bundle.from_dir, tmp_path / "missing").rule == "BUNDLE_DIR"


def test_from_dir_refuses_an_oversize_file_from_its_size(tmp_path):
    path = write_dir(
        tmp_path / "b", {"architecture.py": ARCH, "training.py": b"#" * (MAX_SCRIPT_BYTES + 1)}
    )
    error = refusal(Bundle.from_dir, path)
    assert (error.rule, error.file) == ("BUNDLE_SIZE", "training.py")


def zipped(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_from_zip_accepts_flat_and_single_folder_archives(tmp_path):
    flat = Bundle.from_zip(zipped({"architecture.py": ARCH, "training.py": TRAIN}))
    nested = zipped({"mine/architecture.py": ARCH, "mine/training.py": TRAIN, "mine/.hidden": b""})
    (tmp_path / "b.zip").write_bytes(nested)
    assert Bundle.from_zip(tmp_path / "b.zip").digest == flat.digest


def test_from_zip_refusals():
    deep = zipped({"architecture.py": ARCH, "training.py": TRAIN, "pkg/util.py": b""})
    assert refusal(Bundle.from_zip, deep).file == "pkg/util.py"
    # A highly compressible member over the limit is refused from its header, not inflated.
    bomb = zipped({"architecture.py": ARCH, "training.py": b"#" * (50 * MAX_SCRIPT_BYTES)})
    assert len(bomb) < MAX_SCRIPT_BYTES
    error = refusal(Bundle.from_zip, bomb)
    assert (error.rule, error.file) == ("BUNDLE_SIZE", "training.py")
    assert refusal(Bundle.from_zip, b"not a zip").rule == "BUNDLE_ZIP"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda w: w[:-3],  # truncated
        lambda w: b"X" + w[1:],  # wrong magic
        lambda w: w + b"\x00",  # trailing byte
    ],
)
def test_from_wire_refuses_malformed_encodings(mangle):
    wire = Bundle({"architecture.py": ARCH, "training.py": TRAIN}).to_wire()
    assert refusal(Bundle.from_wire, mangle(wire)).rule == "BUNDLE_WIRE"


def test_from_wire_refuses_non_canonical_order_and_repeats():
    def record(name: str, data: bytes) -> bytes:
        return struct.pack(">H", len(name)) + name.encode() + struct.pack(">I", len(data)) + data

    unsorted = MAGIC + record("training.py", TRAIN) + record("architecture.py", ARCH)
    repeated = MAGIC + record("architecture.py", ARCH) + record("architecture.py", ARCH)
    assert refusal(Bundle.from_wire, unsorted).rule == "BUNDLE_WIRE"
    assert refusal(Bundle.from_wire, repeated).rule == "BUNDLE_WIRE"
    unknown = encode({"architecture.py": ARCH, "evil.py": b"", "training.py": TRAIN})
    error = refusal(Bundle.from_wire, unknown)
    assert (error.rule, error.file) == ("BUNDLE_FILES", "evil.py")
