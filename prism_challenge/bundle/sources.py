"""Reading a bundle's files from where a miner keeps them: a directory or a zip archive.

Both readers check sizes before reading a byte of content (a 4 GiB file or a zip bomb is
refused from its metadata) and skip what editors and tools leave behind: hidden entries,
`__pycache__`, and macOS `__MACOSX` folders. Anything else that is not one of the bundle's
files is refused by name rather than silently dropped, so a miner never uploads something
other than what they think.
"""

from __future__ import annotations

import io
import lzma
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from prism_challenge.bundle.errors import BundleError
from prism_challenge.bundle.rules import check_file_set, check_name, check_size, limit_of

MAX_ZIP_ENTRIES = 64
_JUNK_DIRS = frozenset({"__pycache__", "__MACOSX"})


def _is_junk(parts: tuple[str, ...]) -> bool:
    return any(part.startswith(".") or part in _JUNK_DIRS for part in parts)


def read_dir(path: Path) -> dict[str, bytes]:
    path = Path(path)
    if not path.is_dir():
        raise BundleError("BUNDLE_DIR", f"{path}: not a directory (a bundle is a directory)")
    files: dict[str, bytes] = {}
    for entry in sorted(path.iterdir()):
        if _is_junk((entry.name,)):
            continue
        if not entry.is_file():
            raise BundleError(
                "BUNDLE_FILES",
                f"{entry.name}: a bundle directory may hold only files, not sub-directories",
                file=entry.name,
            )
        check_name(entry.name)
        check_size(entry.name, entry.stat().st_size)
        files[entry.name] = entry.read_bytes()
    check_file_set(set(files))
    return files


def _strip_common_root(names: list[str]) -> dict[str, str]:
    """Map archive names to bundle names; one shared top folder (`zip -r b.zip b/`) is dropped."""
    parts = {name: PurePosixPath(name).parts for name in names}
    roots = {p[0] for p in parts.values() if len(p) > 1}
    if len(roots) == 1 and all(len(p) == 2 for p in parts.values()):
        return {name: p[1] for name, p in parts.items()}
    return {name: "/".join(p) for name, p in parts.items()}


def _members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The archive's files, without folders and tool junk; a nameless member is refused."""
    if any(not info.filename for info in archive.infolist()):
        raise BundleError("BUNDLE_ZIP", "the archive holds a member without a name")
    return [
        info
        for info in archive.infolist()
        if not info.is_dir() and not _is_junk(PurePosixPath(info.filename).parts)
    ]


def read_zip(source: Path | str | bytes) -> dict[str, bytes]:
    handle = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    try:
        with zipfile.ZipFile(handle) as archive:
            infos = _members(archive)
            if len(infos) > MAX_ZIP_ENTRIES:
                raise BundleError("BUNDLE_ZIP", f"the archive holds {len(infos)} files")
            mapping = _strip_common_root([info.filename for info in infos])
            bundle_names = list(mapping.values())
            if len(set(bundle_names)) != len(bundle_names):
                raise BundleError("BUNDLE_ZIP", "the archive holds the same file name twice")
            check_file_set(set(bundle_names))
            files: dict[str, bytes] = {}
            for info in infos:
                name = mapping[info.filename]
                check_size(name, info.file_size)
                with archive.open(info) as member:
                    data = member.read(limit_of(name) + 1)
                check_size(name, len(data))  # the header's size may lie
                files[name] = data
            return files
    except BundleError:
        raise
    except FileNotFoundError:
        raise BundleError("BUNDLE_ZIP", f"{source}: file not found") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise BundleError("BUNDLE_ZIP", f"{source}: cannot be read: {exc.strerror}") from None
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        lzma.LZMAError,
        EOFError,
        NotImplementedError,
        RuntimeError,
        OSError,
        ValueError,
    ) as exc:
        # RuntimeError: encrypted members; NotImplementedError: unknown compression;
        # zlib / lzma errors, EOFError, OSError (bz2): corrupted or truncated member data;
        # ValueError: offsets that point outside the archive, names that are not UTF-8.
        raise BundleError("BUNDLE_ZIP", f"not a readable zip archive: {exc}") from None
