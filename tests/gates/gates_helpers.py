"""Helpers of the gate tests: settings pointing at the stub, submissions as intake makes."""

from __future__ import annotations

from pathlib import Path

from prism_challenge.bundle import ALLOWED, Bundle
from prism_challenge.config import Settings
from prism_challenge.storage import Status
from prism_challenge.storage.tables import Submission

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEY_ENV = "PRISM_TEST_LLM_KEY"


def make_settings(*, base_url: str = "http://127.0.0.1:9/v1", enabled: bool = True,
                  **llm) -> Settings:
    return Settings(
        llm={"enabled": enabled, "base_url": base_url, "model": "stub-model",
             "api_key_env": KEY_ENV, "timeout_s": 0.5, "backoff_s": 30.0,
             "max_backoff_s": 100.0, **llm},
    )


def bundle_of(kind: str, name: str, **extra: bytes) -> Bundle:
    """A fixture directory's bundle files (not its expected.txt), plus `extra` files."""
    root = FIXTURES / kind / name
    files = {p.name: p.read_bytes() for p in root.iterdir() if p.name in ALLOWED}
    files.update({k.replace("_", "."): v for k, v in extra.items()})
    return Bundle(files)


def bundle_from(files: dict[str, str]) -> Bundle:
    return Bundle({k: v.encode() for k, v in files.items()})


def submit(store, bundle: Bundle, hotkey: str, accepted_at: float, *, block: int | None = None,
           uid: int | None = None, not_before: float = 0.0) -> int:
    """Store a submission as the intake does (status received, wire-format bundle); `block`
    and `uid` are its commitment's (precedence), `not_before` its settling time."""
    with store.session() as s:
        row = Submission(
            digest=bundle.digest, hotkey=hotkey, status=Status.RECEIVED.value, attempts=0,
            accepted_at=accepted_at, updated_at=accepted_at, not_before=not_before,
            name=bundle.meta.name, bundle=bundle.to_wire(), block=block, uid=uid,
        )
        s.add(row)
        s.flush()
        return row.id


def row_of(store, submission_id: int) -> Submission:
    with store.session() as s:
        return s.get(Submission, submission_id)
