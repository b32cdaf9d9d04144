"""The sandbox fixture bundles (tests/fixtures/sandbox), shared by the sandbox and validator
tests: attacks and tiny honest models, with values filled in per test."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sandbox"


def bundle(name: str, **substitutions: str) -> dict[str, bytes]:
    """A fixture bundle; files it lacks come from the honest `tiny` bundle. Each
    substitution replaces `KEY = []` or `KEY = 0` in the sources with `KEY = value`."""
    files = {}
    for fname in ("architecture.py", "training.py"):
        path = FIXTURES / name / fname
        if not path.exists():
            path = FIXTURES / "tiny" / fname
        text = path.read_text()
        for key, value in substitutions.items():
            text = text.replace(f"{key} = []", f"{key} = {value}").replace(
                f"{key} = 0", f"{key} = {value}")
        files[fname] = text.encode()
    return files


def queue_bundle(store, files: dict[str, bytes], hotkey: str) -> int:
    """Admit `files` as a queued submission of `hotkey` (accepted now); its id."""
    import time

    from prism_challenge.bundle import Bundle
    from prism_challenge.storage import Status, transition
    from prism_challenge.storage.tables import Submission

    bundle = Bundle(files)
    with store.session() as s:
        row = Submission(digest=bundle.digest, hotkey=hotkey, status="received",
                         accepted_at=time.time(), updated_at=time.time(),
                         bundle=bundle.to_wire())
        s.add(row)
        s.flush()
        transition(s, row.id, Status.QUEUED)
        return row.id
