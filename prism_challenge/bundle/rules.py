"""What a bundle may contain (docs/submissions.md) and the checks on each file.

Each check raises `BundleError(rule, sentence, file=...)`, so a refusal always says which
file broke which rule. Limits are module constants: they are part of the protocol every
miner and validator must agree on, not a per-node setting.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping

from prism_challenge.bundle.errors import BundleError

ARCHITECTURE = "architecture.py"
TRAINING = "training.py"
MANIFEST = "prism.toml"
REQUIRED = (ARCHITECTURE, TRAINING)
ALLOWED = frozenset((*REQUIRED, MANIFEST))
MAX_SCRIPT_BYTES = 64 * 1024
MAX_MANIFEST_BYTES = 16 * 1024
# The three files at their limits plus the framing of the wire format.
MAX_WIRE_BYTES = 2 * MAX_SCRIPT_BYTES + MAX_MANIFEST_BYTES + 1024


def check_name(name: str) -> None:
    if name not in ALLOWED:
        raise BundleError(
            "BUNDLE_FILES",
            f"{name}: not allowed in a bundle; it may hold only "
            f"{ARCHITECTURE}, {TRAINING} and optionally {MANIFEST}",
            file=name,
        )


def check_file_set(names: set[str]) -> None:
    for name in sorted(names):
        check_name(name)
    for name in REQUIRED:
        if name not in names:
            raise BundleError("BUNDLE_FILES", f"{name}: missing; every bundle needs it", file=name)


def limit_of(name: str) -> int:
    return MAX_MANIFEST_BYTES if name == MANIFEST else MAX_SCRIPT_BYTES


def check_size(name: str, size: int) -> None:
    if size > limit_of(name):
        raise BundleError(
            "BUNDLE_SIZE",
            f"{name}: {size} bytes is over the limit of {limit_of(name)} bytes",
            file=name,
        )


def decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(
            "BUNDLE_UTF8", f"{name}: not UTF-8 text (bad byte at offset {exc.start})", file=name
        ) from None


def check_python(name: str, text: str) -> None:
    try:
        ast.parse(text, filename=name)
    except SyntaxError as exc:
        raise BundleError(
            "BUNDLE_SYNTAX", f"{name}: not valid Python: {exc.msg} (line {exc.lineno})", file=name
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        # Null bytes and pathological nesting are refused the same way as syntax errors.
        raise BundleError(
            "BUNDLE_SYNTAX", f"{name}: cannot be parsed as Python: {type(exc).__name__}", file=name
        ) from None


def check_files(files: Mapping[str, bytes]) -> None:
    """All the per-file rules, in a fixed order so that the same bundle fails the same way."""
    check_file_set(set(files))
    for name in sorted(files):
        check_size(name, len(files[name]))
    for name in sorted(files):
        text = decode(name, files[name])
        if name.endswith(".py"):
            check_python(name, text)
        else:
            parse_toml(name, text)


def parse_toml(name: str, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BundleError("BUNDLE_TOML", f"{name}: not valid TOML: {exc}", file=name) from None
    except (ValueError, RecursionError) as exc:
        # tomllib recurses per nesting level and builds ints of any length, so deeply nested
        # arrays or an integer past Python's digit limit escape it as these (16 KiB suffice).
        raise BundleError(
            "BUNDLE_TOML", f"{name}: cannot be parsed as TOML: {type(exc).__name__}", file=name
        ) from None
