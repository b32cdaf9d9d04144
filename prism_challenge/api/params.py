"""Bounded path and query parameters shared by the routes, so the OpenAPI schema states the
limits and a value outside them is a 422 `REQUEST` before any route code or query runs.

Ids are `Integer` columns: 64-bit on SQLite but 32-bit on PostgreSQL, and a larger Python int
makes the database driver raise (a 500) instead of finding nothing. The bound is the smaller.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

MAX_ROW_ID = 2**31 - 1
MAX_CORPUS_CHARS = 32

SubmissionId = Annotated[
    int, Path(ge=1, le=MAX_ROW_ID, description=f"a submission id (1 to {MAX_ROW_ID})")
]

CORPUS_HELP = ("Competition key to rank (e.g. fineweb-edu@3c1f09a2b7de), or a corpus name "
               "(demo, fineweb-edu) for its latest key; default: the one scored most "
               "recently.")
CorpusQuery = Annotated[
    str | None, Query(max_length=MAX_CORPUS_CHARS, description=CORPUS_HELP)
]
