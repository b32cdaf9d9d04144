"""The offline DEMO corpus: English docstrings of the Python distributions the project installs.

Present on every machine that ran `make setup`, needs no network, and is built
deterministically: distributions in the spec's order, each one's `.py` files in sorted path
order (files under the spec's `exclude_dirs` skipped), docstrings in source order, parsed
with `ast` (nothing is imported). Doctest prompt lines are dropped, docstrings shorter than
`min_docstring_chars` are skipped and exact repeats are kept once. One document per source
file (`dist:path#k`), cut at docstring boundaries into pieces of at most
`max_document_bytes`. The same installed versions give the same corpus; the MANIFEST
records the versions, and `corpus: demo` marks everything built from it as a demo.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from multiprocessing import get_context
from pathlib import Path

from prism_challenge.data.errors import DataInputError
from prism_challenge.data.sources import Record
from prism_challenge.data.spec import DemoSource

_DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _distribution(name: str) -> metadata.Distribution:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise DataInputError(
            f"demo corpus: distribution {name!r} is not installed (run `make setup`)"
        ) from None


def distribution_versions(names: list[str]) -> list[dict[str, str]]:
    return [{"name": n, "version": _distribution(n).version} for n in names]


def _source_files(name: str, exclude_dirs: set[str]) -> list[tuple[str, str]]:
    """(id prefix, absolute path) of the distribution's .py files, in sorted path order."""
    dist = _distribution(name)
    out = []
    for rel in sorted(str(f) for f in (dist.files or []) if str(f).endswith(".py")):
        parts = Path(rel).parts
        if parts[0] == ".." or exclude_dirs.intersection(parts[:-1]):
            continue
        path = Path(dist.locate_file(rel))
        if path.is_file():
            out.append((f"{name}:{Path(rel).as_posix()}", str(path)))
    return out


def _clean(doc: str) -> str:
    lines = []
    for line in doc.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(">>>") or stripped.startswith("... ") or stripped == "...":
            continue
        lines.append(line.rstrip())
    return "\n".join(lines).strip()


def docstrings_of(path: str, min_chars: int) -> list[str]:
    """Docstrings of one source file in source order (module, classes, functions, nested)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (SyntaxError, ValueError, UnicodeDecodeError, OSError, RecursionError):
        return []
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Module, *_DEF_NODES)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                doc = _clean(doc)
                if len(doc) >= min_chars:
                    found.append(doc)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                visit(child)

    visit(tree)
    return found


def _parse_all(paths: list[str], min_chars: int) -> Iterator[list[str]]:
    workers = min(os.cpu_count() or 1, 8)
    if workers < 2 or len(paths) < 200:
        for p in paths:
            yield docstrings_of(p, min_chars)
        return
    # fork: the workers only parse Python files (spawn would re-import the caller's __main__).
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        yield from pool.map(docstrings_of, paths, [min_chars] * len(paths), chunksize=32)


def iter_demo(source: DemoSource) -> Iterator[Record]:
    exclude = set(source.exclude_dirs)
    files: list[tuple[str, str]] = []
    for name in source.distributions:
        files.extend(_source_files(name, exclude))
    seen: set[bytes] = set()
    for (doc_prefix, _), docs in zip(
        files, _parse_all([p for _, p in files], source.min_docstring_chars), strict=True
    ):
        piece: list[bytes] = []
        size = 0
        k = 0
        for doc in docs:
            try:
                data = doc.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates from escapes: not text
                continue
            digest = hashlib.blake2b(data, digest_size=16).digest()
            if digest in seen:
                continue
            seen.add(digest)
            if piece and size + 2 + len(data) > source.max_document_bytes:
                yield Record(f"{doc_prefix}#{k}", b"\n\n".join(piece))
                piece, size, k = [], 0, k + 1
            piece.append(data)
            size += len(data) + 2
        if piece:
            yield Record(f"{doc_prefix}#{k}", b"\n\n".join(piece))
