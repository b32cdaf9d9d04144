"""`prepare-data`: source -> split -> challenge tokenizer -> token shards -> MANIFEST.

Stages (all under `<out>/.work/` until the end, so an interrupted run never publishes
anything a reader would accept):

1. stage: read the source in its order, refuse bad rows, send each document to train / val
   / test by the hash of its id, append its UTF-8 text to that split's staging file.
   Checkpointed every `CHECKPOINT_BYTES`; a re-run continues after the last checkpoint.
2. tokenizer: train byte-level BPE on the train split (challenge order) and derive the
   per-token byte lengths. Kept across re-runs.
3. shards: encode each split in the challenge's order (sorted by the second half of the id
   hash), document then separator, and cut the stream into `shard_tokens`-token shards, each
   written atomically and journaled with its sha256 and where the next one starts. A re-run
   keeps every journaled shard whose hash still verifies and continues from there.
4. publish: tokenizer.json and token_bytes.bin beside the shards, then MANIFEST.json (last,
   atomically), then the work directory is removed.

Bad input (`DataInputError`) removes the work directory and leaves `<out>` as it was; any
other interruption keeps it for the next run to resume. The same spec and the same source
give byte-identical files and MANIFEST.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from prism_challenge.data import sources
from prism_challenge.data.errors import DataInputError, DataIntegrityError
from prism_challenge.data.manifest import (
    BYTE_LENGTHS_NAME,
    DEMO_LABEL,
    MANIFEST_NAME,
    ORDER_RULE,
    SPLIT_RULE,
    TOKENIZER_NAME,
    FileRef,
    Manifest,
    ShardInfo,
    SplitInfo,
    TokenizerInfo,
    atomic_write,
    read_manifest,
    safe_member,
    sha256_file,
    verify_file,
)
from prism_challenge.data.spec import SPLITS, DataSpec, DemoSource, LocalSource
from prism_challenge.data.tokenizer import (
    LIBRARY,
    byte_lengths,
    iter_encoded,
    tokenizer_from_bytes,
    train_tokenizer,
)

PIPELINE_VERSION = 1
WORK_DIR = ".work"
CHECKPOINT_BYTES = 64 << 20
ENCODE_BATCH_BYTES = 4 << 20
LABELS = {
    "demo": DEMO_LABEL,
    "fineweb-edu": "FineWeb-Edu (HuggingFaceFW/fineweb-edu) at a pinned revision",
    "local": "local files with the FineWeb-Edu schema",
}


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def split_and_key(salt: bytes, doc_id: str) -> tuple[float, int]:
    """The split draw u in [0, 1) and the order key of a document (see SPLIT_RULE)."""
    h = hashlib.sha256(salt + doc_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64, int.from_bytes(h[8:16], "big")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


# ---- progress ---------------------------------------------------------------------------


def _progress(enabled: bool, console: Console | None) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        disable=not enabled,
        transient=False,
    )


# ---- work state -------------------------------------------------------------------------


@dataclass
class _Work:
    dir: Path
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    def save(self) -> None:
        atomic_write(self.state_path, json.dumps(self.state, indent=1).encode())

    @classmethod
    def open(cls, out: Path, plan_sha: str) -> _Work:
        work = cls(out / WORK_DIR)
        if work.state_path.is_file():
            try:
                work.state = json.loads(work.state_path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                work.state = {}
            if work.state.get("plan_sha256") == plan_sha:
                return work
        # Nothing to resume (or another plan's leftovers): start clean.
        shutil.rmtree(work.dir, ignore_errors=True)
        for split in SPLITS:
            for stale in (out / split).glob("shard_*.bin"):
                stale.unlink()
        work.dir.mkdir(parents=True)
        work.state = {"plan_sha256": plan_sha}
        work.save()
        return work


# ---- stage 1: split and stage the source ------------------------------------------------


@dataclass
class _Staged:
    """Per split: the staging text file and each document's offset, length and order key."""

    paths: dict[str, Path]
    offsets: dict[str, np.ndarray]
    lengths: dict[str, np.ndarray]
    keys: dict[str, np.ndarray]
    rows: int  # source rows consumed
    skipped_empty: int
    orders: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The challenge's order; stable, so equal keys (repeated ids) keep source order.
        self.orders = {s: np.argsort(self.keys[s], kind="stable") for s in SPLITS}

    def n_docs(self, split: str) -> int:
        return int(self.lengths[split].size)

    def n_bytes(self, split: str) -> int:
        return int(self.lengths[split].sum())

    def order(self, split: str) -> np.ndarray:
        return self.orders[split]

    @contextmanager
    def texts(self, split: str) -> Iterator[mmap.mmap | bytes]:
        if self.n_bytes(split) == 0:
            yield b""
            return
        with (
            open(self.paths[split], "rb") as fh,
            mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm,
        ):
            yield mm


def _stage(spec: DataSpec, work: _Work, progress: Progress) -> _Staged:
    paths = {s: work.dir / f"{s}.txt" for s in SPLITS}
    index_path = work.dir / "index.npz"
    salt = spec.split.salt.encode() + b"\x00"
    cuts = (spec.split.train, spec.split.train + spec.split.val)
    lists: dict[str, dict[str, list[int]]] = {
        s: {"offsets": [], "lengths": [], "keys": []} for s in SPLITS
    }
    sizes = dict.fromkeys(SPLITS, 0)
    rows = skipped = 0

    if index_path.is_file():  # resume from the last checkpoint
        with np.load(index_path) as saved:
            rows, skipped = int(saved["rows"]), int(saved["skipped"])
            for s in SPLITS:
                for name in ("offsets", "lengths", "keys"):
                    lists[s][name] = saved[f"{s}_{name}"].tolist()
                sizes[s] = int(saved[f"{s}_size"])
        if any(not paths[s].is_file() or paths[s].stat().st_size < sizes[s] for s in SPLITS):
            raise DataIntegrityError(
                f"{work.dir}: staging files are shorter than their checkpoint; remove "
                f"{work.dir} and run again"
            )
    for s in SPLITS:
        with open(paths[s], "ab") as fh:
            fh.truncate(sizes[s])  # drop what was written after the last checkpoint

    def finish() -> _Staged:
        arrays = {
            s: {n: np.asarray(v, dtype=np.uint64) for n, v in lists[s].items()} for s in SPLITS
        }
        return _Staged(
            paths=paths,
            offsets={s: arrays[s]["offsets"] for s in SPLITS},
            lengths={s: arrays[s]["lengths"] for s in SPLITS},
            keys={s: arrays[s]["keys"] for s in SPLITS},
            rows=rows,
            skipped_empty=skipped,
        )

    def checkpoint() -> None:
        for fh in handles.values():
            if not fh.closed:
                fh.flush()
                os.fsync(fh.fileno())
        payload = {"rows": np.int64(rows), "skipped": np.int64(skipped)}
        for s in SPLITS:
            for n, v in lists[s].items():
                payload[f"{s}_{n}"] = np.asarray(v, dtype=np.uint64)
            payload[f"{s}_size"] = np.int64(sizes[s])
        tmp = work.dir / "index.tmp.npz"
        np.savez(tmp, **payload)
        tmp.replace(index_path)

    if work.state.get("staged"):
        return finish()

    limits = spec.limits
    n_docs = sum(len(lists[s]["keys"]) for s in SPLITS)
    total = sum(sizes.values())
    task = progress.add_task(
        f"reading {spec.corpus} documents", total=limits.max_text_bytes, completed=total
    )
    records = sources.iter_records(spec.source)
    handles = {s: open(paths[s], "ab") for s in SPLITS}
    try:
        for _ in range(rows):  # already staged before the interruption
            next(records, None)
        since = 0
        for rec in records:
            if limits.max_documents and n_docs >= limits.max_documents:
                break
            if limits.max_text_bytes and total >= limits.max_text_bytes:
                break
            rows += 1
            if not rec.data:
                skipped += 1
                continue
            u, key = split_and_key(salt, rec.id)
            split = "train" if u < cuts[0] else "val" if u < cuts[1] else "test"
            handles[split].write(rec.data)
            entry = lists[split]
            entry["offsets"].append(sizes[split])
            entry["lengths"].append(len(rec.data))
            entry["keys"].append(key)
            sizes[split] += len(rec.data)
            n_docs += 1
            total += len(rec.data)
            since += len(rec.data)
            progress.update(task, completed=total)
            if since >= CHECKPOINT_BYTES:
                checkpoint()
                since = 0
    finally:
        for fh in handles.values():
            fh.close()

    if n_docs == 0:
        raise DataInputError(f"the {spec.corpus} source gave no non-empty documents")
    if isinstance(spec.source, DemoSource) and total < spec.source.min_text_bytes:
        raise DataInputError(
            f"demo corpus: only {total:,} bytes of docstrings found, {spec.source.min_text_bytes:,}"
            " needed (are the project's dependencies installed? run `make setup`)"
        )
    for s in SPLITS:
        if not lists[s]["keys"]:
            raise DataInputError(
                f"split {s!r} received no documents ({n_docs} in all): the source is too small "
                f"for the split ratios {spec.split.train}/{spec.split.val}/{spec.split.test}"
            )
    checkpoint()
    work.state["staged"] = True
    work.save()
    return finish()


# ---- stage 2: tokenizer -----------------------------------------------------------------


def _train_texts(staged: _Staged, limit: int | None) -> Iterator[list[str]]:
    order = staged.order("train")
    offsets, lengths = staged.offsets["train"], staged.lengths["train"]
    used = 0
    with staged.texts("train") as mm:
        batch: list[str] = []
        for i in order:
            o, n = int(offsets[i]), int(lengths[i])
            batch.append(mm[o : o + n].decode("utf-8"))
            used += n
            if len(batch) >= 256:
                yield batch
                batch = []
            if limit is not None and used >= limit:
                break
        if batch:
            yield batch


def _tokenizer(spec: DataSpec, staged: _Staged, work: _Work, progress: Progress):
    path = work.dir / TOKENIZER_NAME
    info = work.state.get("tokenizer")
    if info and path.is_file() and sha256_file(path) == info["sha256"]:
        return tokenizer_from_bytes(path.read_bytes()), info
    task = progress.add_task("training the challenge tokenizer", total=None)
    limit = spec.tokenizer.train_sample_bytes
    order = staged.order("train")
    lengths = staged.lengths["train"][order]
    cum = np.cumsum(lengths)
    n_docs = int(np.searchsorted(cum, limit) + 1) if limit else int(order.size)
    n_docs = min(n_docs, int(order.size))
    tok = train_tokenizer(_train_texts(staged, limit), spec.tokenizer)
    raw = tok.to_str().encode()
    atomic_write(path, raw)
    info = {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "documents": n_docs,
        "bytes": int(cum[n_docs - 1]),
    }
    work.state["tokenizer"] = info
    work.save()
    progress.update(task, total=1, completed=1)
    return tok, info


# ---- stage 3: shards --------------------------------------------------------------------


def _encode_batches(tok, staged: _Staged, split: str, start_doc: int) -> Iterator[tuple[int, list]]:
    """(index in order of the batch's first document, [(ids, n_bytes), ...])."""
    order = staged.order(split)
    offsets, lengths = staged.offsets[split], staged.lengths[split]
    with staged.texts(split) as mm:
        i = start_doc
        while i < order.size:
            first, texts, nbytes, size = i, [], [], 0
            while i < order.size and (size < ENCODE_BATCH_BYTES or not texts):
                j = order[i]
                o, n = int(offsets[j]), int(lengths[j])
                texts.append(mm[o : o + n].decode("utf-8"))
                nbytes.append(n)
                size += n
                i += 1
            yield first, list(zip(iter_encoded(tok, texts), nbytes, strict=True))


def _shards(
    split: str,
    tok,
    sep: int,
    blen: np.ndarray,
    staged: _Staged,
    spec: DataSpec,
    out: Path,
    work: _Work,
    progress: Progress,
) -> tuple[list[ShardInfo], int, int]:
    """Write (or keep) the split's shards; returns them, shards kept, shards written."""
    dtype = token_dtype(spec.tokenizer.vocab_size)
    cap = spec.shard_tokens
    journal: list[dict] = work.state.setdefault("shards", {}).setdefault(split, [])
    kept = 0
    for entry in journal:  # keep the prefix of journaled shards that still verify
        path = out / entry["file"]
        if (
            path.is_file()
            and path.stat().st_size == entry["n_tokens"] * dtype.itemsize
            and sha256_file(path) == entry["sha256"]
        ):
            kept += 1
        else:
            break
    del journal[kept:]
    work.save()
    doc, skip = (journal[-1]["next_doc"], journal[-1]["next_tok"]) if journal else (0, 0)
    written = 0
    n_docs = staged.n_docs(split)
    done_bytes = int(staged.lengths[split][staged.order(split)[:doc]].sum())
    task = progress.add_task(
        f"tokenizing {split}", total=staged.n_bytes(split), completed=done_bytes
    )

    buf = np.empty(cap, dtype=dtype)
    fill = 0

    def flush(next_doc: int, next_tok: int) -> None:
        nonlocal fill, written
        name = f"{split}/shard_{len(journal):05d}.bin"
        data = buf[:fill]
        digest = hashlib.sha256(memoryview(data)).hexdigest()
        atomic_write(safe_member(out, name), memoryview(data))
        journal.append(
            {
                "file": name,
                "sha256": digest,
                "n_tokens": int(fill),
                "next_doc": int(next_doc),
                "next_tok": int(next_tok),
            }
        )
        work.save()
        fill = 0
        written += 1

    if doc < n_docs:
        for first, encoded in _encode_batches(tok, staged, split, doc):
            counts = np.fromiter((len(ids) + 1 for ids, _ in encoded), np.int64, len(encoded))
            flat = np.empty(int(counts.sum()), dtype=np.int64)
            starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
            for (ids, _), s, c in zip(encoded, starts, counts, strict=True):
                flat[s : s + c - 1] = ids
            flat[starts + counts - 1] = sep
            if int(flat.max()) >= blen.size:
                raise DataIntegrityError(f"{split}: token id outside the vocabulary")
            # Byte accounting must be exact for every document (the separator is 0 bytes).
            got = np.add.reduceat(blen[flat], starts)
            want = np.fromiter((n for _, n in encoded), np.int64, len(encoded))
            if not np.array_equal(got, want):
                bad = int(np.flatnonzero(got != want)[0])
                raise DataIntegrityError(
                    f"{split}: document {first + bad} tokenizes to {got[bad]} bytes, its text "
                    f"has {want[bad]}: the tokenizer does not cover the bytes exactly"
                )
            pos = skip if first == doc else 0
            while pos < flat.size:
                take = min(cap - fill, flat.size - pos)
                buf[fill : fill + take] = flat[pos : pos + take]
                fill += take
                pos += take
                if fill == cap:
                    if pos == flat.size:
                        flush(first + len(encoded), 0)
                    else:
                        k = int(np.searchsorted(starts, pos, side="right") - 1)
                        flush(first + k, pos - int(starts[k]))
            progress.update(task, advance=int(want.sum()))
        if fill:
            flush(n_docs, 0)
    progress.update(task, completed=staged.n_bytes(split))
    shards = [
        ShardInfo(file=e["file"], sha256=e["sha256"], n_tokens=e["n_tokens"]) for e in journal
    ]
    return shards, kept, written


# ---- the pipeline -----------------------------------------------------------------------


@dataclass
class PrepareReport:
    manifest: Manifest
    up_to_date: bool = False  # the MANIFEST already matched and verified: nothing was done
    shards_kept: int = 0  # journaled shards from an interrupted run that verified
    shards_written: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


def _recorded(spec: DataSpec) -> DataSpec:
    """The spec as the MANIFEST keeps it: local input paths are machine-specific (their names,
    sizes and hashes are in the MANIFEST's `source`)."""
    return spec.with_source(LocalSource()) if isinstance(spec.source, LocalSource) else spec


def plan_of(spec: DataSpec) -> tuple[dict[str, Any], str]:
    """The source's fingerprint and the sha256 of everything that determines the output."""
    source = sources.fingerprint(spec.source)
    plan = {
        "pipeline": PIPELINE_VERSION,
        "library": LIBRARY,
        "spec": _recorded(spec).model_dump(mode="json"),
        "source": source,
    }
    return source, hashlib.sha256(_canonical(plan)).hexdigest()


def prepare_data(
    spec: DataSpec,
    out: Path | str,
    *,
    progress: bool = False,
    console: Console | None = None,
) -> PrepareReport:
    """Build (or resume, or confirm) the data version `spec` describes under `out`."""
    started = time.perf_counter()
    out = Path(out)
    source_info, plan_sha = plan_of(spec)
    if (out / MANIFEST_NAME).is_file():
        try:
            existing = read_manifest(out)
        except DataIntegrityError:
            existing = None
        if existing is not None and existing.plan_sha256 != plan_sha:
            raise DataInputError(
                f"{out} already holds data version {existing.sha256[:16]}… ({existing.name}, "
                f"corpus {existing.corpus}) built from another spec or source; choose another "
                "--out or remove that directory first"
            )
        if existing is not None:
            try:
                manifest = verify_data(out)
                return PrepareReport(
                    manifest, up_to_date=True, seconds=time.perf_counter() - started
                )
            except DataIntegrityError:
                pass  # repair: rebuild below, rewriting what does not verify
    created = _first_missing(out)
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out):
        return _build(spec, out, created, source_info, plan_sha, progress, console, started)


def _first_missing(out: Path) -> Path | None:
    """The outermost folder of `out` that does not exist yet (what a refused run removes),
    or None when `out` exists."""
    missing = None
    for folder in (out, *out.absolute().parents):
        if folder.exists():
            break
        missing = folder
    return missing


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One prepare-data per data root at a time (an advisory lock on the directory)."""
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataInputError(f"{out}: another prepare-data is running on it") from None
        yield
    finally:
        os.close(fd)


def _build(
    spec: DataSpec,
    out: Path,
    created: Path | None,
    source_info: dict[str, Any],
    plan_sha: str,
    progress: bool,
    console: Console | None,
    started: float,
) -> PrepareReport:
    work = _Work.open(out, plan_sha)
    timings: dict[str, float] = {}
    try:
        with _progress(progress, console) as bar:
            t = time.perf_counter()
            staged = _stage(spec, work, bar)
            timings["stage"] = time.perf_counter() - t
            t = time.perf_counter()
            tok, tok_info = _tokenizer(spec, staged, work, bar)
            timings["tokenizer"] = time.perf_counter() - t
            sep = tok.token_to_id(spec.tokenizer.separator)
            blen = byte_lengths(tok, sep)
            t = time.perf_counter()
            splits: dict[str, SplitInfo] = {}
            kept = written = 0
            for split in SPLITS:
                shards, k, w = _shards(split, tok, sep, blen, staged, spec, out, work, bar)
                kept, written = kept + k, written + w
                splits[split] = SplitInfo(
                    n_documents=staged.n_docs(split),
                    n_text_bytes=staged.n_bytes(split),
                    n_tokens=sum(s.n_tokens for s in shards),
                    shards=shards,
                )
            timings["shards"] = time.perf_counter() - t
    except (DataInputError, ModuleNotFoundError):  # bad input or a missing extra: no resume
        shutil.rmtree(work.dir, ignore_errors=True)
        if created is not None:  # every folder this run made, parents included
            shutil.rmtree(created, ignore_errors=True)
        raise

    tok_raw = (work.dir / TOKENIZER_NAME).read_bytes()
    atomic_write(out / TOKENIZER_NAME, tok_raw)
    blen_raw = blen.astype("<i4").tobytes()
    atomic_write(out / BYTE_LENGTHS_NAME, blen_raw)
    manifest = Manifest(
        corpus=spec.corpus,
        label=LABELS[spec.corpus],
        name=spec.name,
        source={**source_info, "rows_read": staged.rows, "empty_skipped": staged.skipped_empty},
        spec=_recorded(spec),
        spec_sha256=_recorded(spec).sha256(),
        split_rule=SPLIT_RULE,
        order_rule=ORDER_RULE,
        vocab_size=spec.tokenizer.vocab_size,
        separator_id=sep,
        tokenizer_sha256=tok_info["sha256"],
        tokenizer=TokenizerInfo(
            file=TOKENIZER_NAME,
            sha256=tok_info["sha256"],
            library=LIBRARY,
            vocab_size=spec.tokenizer.vocab_size,
            separator=spec.tokenizer.separator,
            separator_id=sep,
            min_frequency=spec.tokenizer.min_frequency,
            trained_on_documents=tok_info["documents"],
            trained_on_bytes=tok_info["bytes"],
        ),
        byte_lengths=FileRef(file=BYTE_LENGTHS_NAME, sha256=hashlib.sha256(blen_raw).hexdigest()),
        token_dtype="uint16" if token_dtype(spec.tokenizer.vocab_size).itemsize == 2 else "uint32",
        shard_tokens=spec.shard_tokens,
        splits=splits,
        plan_sha256=plan_sha,
    )
    raw = manifest.dump_bytes()
    atomic_write(out / MANIFEST_NAME, raw)
    shutil.rmtree(work.dir, ignore_errors=True)
    return PrepareReport(
        Manifest.from_bytes(raw),
        shards_kept=kept,
        shards_written=written,
        seconds=time.perf_counter() - started,
        timings=timings,
    )


def verify_data(
    root: Path | str, *, progress: bool = False, console: Console | None = None
) -> Manifest:
    """Re-hash every file the MANIFEST lists and check the tables; `DataIntegrityError` if not."""
    root = Path(root)
    manifest = read_manifest(root)
    dtype = np.dtype("<u2" if manifest.token_dtype == "uint16" else "<u4")
    tok_path = verify_file(root, manifest.tokenizer)
    if manifest.tokenizer_sha256 != manifest.tokenizer.sha256:
        raise DataIntegrityError(f"{root}: MANIFEST names two different tokenizer hashes")
    tok = tokenizer_from_bytes(tok_path.read_bytes())
    blen_path = verify_file(root, manifest.byte_lengths, size=4 * manifest.vocab_size)
    blen = np.fromfile(blen_path, dtype="<i4")
    if tok.get_vocab_size() != manifest.vocab_size or not np.array_equal(
        blen, byte_lengths(tok, manifest.separator_id)
    ):
        raise DataIntegrityError(f"{blen_path}: does not match the tokenizer's vocabulary")
    total = sum(s.n_tokens for sp in manifest.splits.values() for s in sp.shards)
    with _progress(progress, console) as bar:
        task = bar.add_task("verifying shards", total=total * dtype.itemsize)
        for split, info in manifest.splits.items():
            if sum(s.n_tokens for s in info.shards) != info.n_tokens:
                raise DataIntegrityError(f"{split}: shard token counts do not add up")
            for shard in info.shards:
                path = verify_file(root, shard, size=shard.n_tokens * dtype.itemsize)
                top = int(np.memmap(path, dtype=dtype, mode="r").max())
                if top >= manifest.vocab_size:
                    raise DataIntegrityError(f"{path}: token id {top} outside the vocabulary")
                bar.update(task, advance=shard.n_tokens * dtype.itemsize)
    return manifest
