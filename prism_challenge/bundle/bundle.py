"""`Bundle`: a checked, immutable submission (docs/submissions.md), the one place its
digest is made.

Every constructor funnels into `Bundle(files)`, which runs all the rules, so holding a
`Bundle` means holding a valid one. The digest is sha256 of the canonical wire encoding,
which is also the HTTP body `prism submit` uploads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from prism_challenge.bundle import sources, wire
from prism_challenge.bundle.meta import BundleMeta, parse_meta
from prism_challenge.bundle.rules import MANIFEST, check_files, parse_toml


class Bundle:
    """The two scripts (+ optional prism.toml) of a submission, validated, with their digest."""

    __slots__ = ("_files", "_wire", "_digest", "_meta")

    def __init__(self, files: Mapping[str, bytes]) -> None:
        snapshot = {name: bytes(data) for name, data in files.items()}
        check_files(snapshot)
        self._files = MappingProxyType(snapshot)
        self._wire = wire.encode(snapshot)
        self._digest = wire.digest_of(self._wire)
        if MANIFEST in snapshot:
            self._meta = parse_meta(parse_toml(MANIFEST, snapshot[MANIFEST].decode("utf-8")))
        else:
            self._meta = BundleMeta()

    @classmethod
    def from_dir(cls, path: Path | str) -> Bundle:
        return cls(sources.read_dir(Path(path)))

    @classmethod
    def from_zip(cls, source: Path | str | bytes) -> Bundle:
        return cls(sources.read_zip(source))

    @classmethod
    def from_wire(cls, data: bytes) -> Bundle:
        return cls(wire.decode(data))

    @property
    def files(self) -> Mapping[str, bytes]:
        return self._files

    @property
    def digest(self) -> str:
        return self._digest

    @property
    def meta(self) -> BundleMeta:
        return self._meta

    def source(self, name: str) -> str:
        """The UTF-8 text of one of the bundle's files (KeyError if it has no such file)."""
        return self._files[name].decode("utf-8")

    def to_wire(self) -> bytes:
        return self._wire

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bundle) and other._digest == self._digest

    def __hash__(self) -> int:
        return hash(self._digest)

    def __repr__(self) -> str:
        return f"Bundle({self._digest[:12]}, files={sorted(self._files)})"
