"""Where documents come from: one iterator of (id, text) per source kind, in source order.

- `fineweb-edu`: `datasets.load_dataset(dataset, name=config, split=split, revision=revision,
  streaming=True)`; rows go through the same checks as local files.
- `local`: parquet / jsonl(.gz) files (or folders of them) with the FineWeb-Edu schema.
- `demo`: docstrings of installed distributions (see `demo_corpus`).

Every source refuses bad input with a `DataInputError` that names the file and row: a
missing `text` or `id` column, a text that is not valid UTF-8, a non-string value.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prism_challenge.data.errors import DataInputError, SourceUnavailable
from prism_challenge.data.manifest import sha256_file
from prism_challenge.data.spec import DemoSource, FineWebSource, LocalSource

LOCAL_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json", ".json.gz")


@dataclass(frozen=True, slots=True)
class Record:
    id: str
    data: bytes  # the text, UTF-8 encoded (validated)


def check_record(row: Any, where: str) -> Record:
    """Validate one FineWeb-Edu-schema row (a mapping with `text` and `id`)."""
    if not isinstance(row, dict):
        raise DataInputError(f"{where}: a row must be an object with `text` and `id`")
    if "text" not in row:
        raise DataInputError(f"{where}: no `text` field (FineWeb-Edu schema: text, id, ...)")
    if "id" not in row or row["id"] is None:
        raise DataInputError(f"{where}: no `id` field (FineWeb-Edu schema: text, id, ...)")
    doc_id = row["id"]
    if not isinstance(doc_id, str | int) or isinstance(doc_id, bool):
        raise DataInputError(f"{where}: `id` must be a string or an integer")
    return Record(str(doc_id), utf8_text(row["text"], where))


def utf8_text(text: Any, where: str) -> bytes:
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataInputError(
                f"{where}: `text` is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        return bytes(text)
    if not isinstance(text, str):
        raise DataInputError(f"{where}: `text` must be a string, not {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataInputError(
            f"{where}: `text` is not valid UTF-8 (unpaired surrogate at {exc.start})"
        ) from None


# ---- local files ------------------------------------------------------------------------


def expand_inputs(inputs: list[str | Path]) -> list[Path]:
    """Files as given; folders become their supported files in sorted order."""
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(LOCAL_SUFFIXES)
            )
            if not found:
                raise DataInputError(f"{path}: no {', '.join(LOCAL_SUFFIXES)} files in folder")
            files.extend(found)
        elif path.is_file():
            if not path.name.endswith(LOCAL_SUFFIXES):
                raise DataInputError(
                    f"{path}: unsupported file type (use {', '.join(LOCAL_SUFFIXES)})"
                )
            files.append(path)
        else:
            raise DataInputError(f"{path}: input not found")
    if not files:
        raise DataInputError("no input files: give --input with parquet or jsonl files")
    return files


def describe_inputs(files: list[Path]) -> list[dict[str, Any]]:
    """Name (not path: the MANIFEST must not depend on where the files sit), size, sha256."""
    return [{"name": f.name, "bytes": f.stat().st_size, "sha256": sha256_file(f)} for f in files]


def _iter_jsonl(path: Path) -> Iterator[Record]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            where = f"{path.name}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataInputError(
                    f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataInputError(f"{where}: not a JSON object: {exc.msg}") from None
            yield check_record(row, where)


def _iter_parquet(path: Path) -> Iterator[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataInputError(f"{path.name}: not a readable parquet file: {exc}") from None
    names = pf.schema_arrow.names
    for column in ("text", "id"):
        if column not in names:
            raise DataInputError(
                f"{path.name}: no `{column}` column (FineWeb-Edu schema: text, id, ...); "
                f"found {names}"
            )
    text_type = pf.schema_arrow.field("text").type
    if not (
        pa.types.is_string(text_type)
        or pa.types.is_large_string(text_type)
        or pa.types.is_binary(text_type)
        or pa.types.is_large_binary(text_type)
    ):
        raise DataInputError(f"{path.name}: `text` column has type {text_type}, not string")
    row = 0
    for batch in pf.iter_batches(columns=["id", "text"], batch_size=4096):
        ids = batch.column("id").to_pylist()
        # As raw bytes: the UTF-8 check is ours, whatever the writer claimed.
        text_col = batch.column("text")
        if pa.types.is_large_string(text_col.type):
            text_col = text_col.cast(pa.large_binary())
        elif pa.types.is_string(text_col.type):
            text_col = text_col.cast(pa.binary())
        for doc_id, text in zip(ids, text_col.to_pylist(), strict=True):
            row += 1
            yield check_record({"id": doc_id, "text": text}, f"{path.name}: row {row}")


def iter_local(files: list[Path]) -> Iterator[Record]:
    for path in files:
        if path.name.endswith(".parquet"):
            yield from _iter_parquet(path)
        else:
            yield from _iter_jsonl(path)


# ---- FineWeb-Edu (hub streaming) --------------------------------------------------------


def open_hub_stream(source: FineWebSource):
    """The `datasets` streaming call (network). Kept apart so tests can point `dataset` at a
    local folder laid out like the hub repo (same configs, same parquet schema)."""
    import datasets

    return datasets.load_dataset(
        source.dataset,
        name=source.config,
        split=source.split,
        revision=source.revision,
        streaming=True,
    )


def _unavailable(source: FineWebSource, exc: BaseException) -> SourceUnavailable:
    why = " ".join(str(exc).split())[:300] or type(exc).__name__
    return SourceUnavailable(
        f"source unavailable: {source.dataset} ({source.config}, revision "
        f"{source.revision[:12]}) could not be read: {why}; check the network (and HF_ENDPOINT, "
        "HF_HUB_OFFLINE), then run the same command again, or prepare a local copy with "
        "--source local --input FILES; nothing was written")


def iter_hub(source: FineWebSource) -> Iterator[Record]:
    """The hub's rows; a network failure (opening the stream or during it) is
    `SourceUnavailable`, so the caller removes what it staged and says so in one line."""
    try:
        yield from _iter_hub(source)
    except OSError as exc:  # ConnectionError, timeouts, the hub client's HTTP errors
        raise _unavailable(source, exc) from None


def _iter_hub(source: FineWebSource) -> Iterator[Record]:
    stream = open_hub_stream(source)
    features = getattr(stream, "features", None)
    if features is not None:
        for column in ("text", "id"):
            if column not in features:
                raise DataInputError(
                    f"{source.dataset} ({source.config}): no `{column}` column; found "
                    f"{sorted(features)}"
                )
        stream = stream.select_columns(["id", "text"])
    for row_no, row in enumerate(stream, 1):
        yield check_record(row, f"{source.dataset}[{source.config}] row {row_no}")


# ---- dispatch ---------------------------------------------------------------------------


def fingerprint(source: FineWebSource | LocalSource | DemoSource) -> dict[str, Any]:
    """What identifies the source's content, for the MANIFEST and the resume plan."""
    if isinstance(source, FineWebSource):
        return {
            "kind": source.kind,
            "dataset": source.dataset,
            "config": source.config,
            "split": source.split,
            "revision": source.revision,
        }
    if isinstance(source, LocalSource):
        return {"kind": source.kind, "inputs": describe_inputs(expand_inputs(source.inputs))}
    from prism_challenge.data.demo_corpus import distribution_versions

    return {
        "kind": source.kind,
        "label": "DEMO",
        "distributions": distribution_versions(source.distributions),
    }


def iter_records(source: FineWebSource | LocalSource | DemoSource) -> Iterator[Record]:
    if isinstance(source, FineWebSource):
        return iter_hub(source)
    if isinstance(source, LocalSource):
        return iter_local(expand_inputs(source.inputs))
    from prism_challenge.data.demo_corpus import iter_demo

    return iter_demo(source)
