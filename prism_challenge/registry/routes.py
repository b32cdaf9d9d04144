"""HTTP: the current brief (`program.md` + digest header, and as JSON; per hotkey with
`?hotkey=`), the hypotheses, the theory graph, an embeddable posteriors panel, research
credit and the journal. Read-only; the validator writes."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, Response

from prism_challenge.registry.journal_md import journal_markdown
from prism_challenge.registry.panel import posteriors_panel
from prism_challenge.registry.service import Registry

DIGEST_HEADER = "X-Prism-Program-Digest"
HOTKEY = Query(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$",
               description="A hotkey (ss58): the brief of its population instead of the "
                           "global one.")
JOURNAL_MAX = 100


def build(deps) -> APIRouter:
    """Routes over `deps.store` / `deps.settings` (an `ApiDeps`). The registry is opened
    (and its ledger seeded) on the first request, not when the app is built."""
    opened: list[Registry] = []

    def reg() -> Registry:
        if not opened:
            opened.append(Registry(deps.store, deps.settings))
        return opened[0]

    def brief(hotkey: str | None) -> tuple[str, str, dict]:
        if hotkey is None:
            return reg().program()
        return reg().program_for(hotkey, deps.settings, deps.metagraph.block)

    router = APIRouter(prefix="/v1", tags=["registry"])

    @router.get("/program.md", response_class=Response)
    def program_md(hotkey: str | None = HOTKEY) -> Response:
        text, digest, _ = brief(hotkey)
        return Response(text, media_type="text/markdown; charset=utf-8",
                        headers={DIGEST_HEADER: digest})

    @router.get("/program.json")
    def program_json(hotkey: str | None = HOTKEY) -> dict:
        return brief(hotkey)[2]

    @router.get("/hypotheses")
    def hypotheses(include_archived: bool = True) -> list[dict]:
        return reg().hypotheses(include_archived=include_archived)

    @router.get("/registry/graph")
    def graph() -> dict:
        return reg().theory_graph()

    @router.get("/registry/panel", response_class=HTMLResponse)
    def panel() -> HTMLResponse:
        return HTMLResponse(posteriors_panel(reg().hypotheses()))

    @router.get("/registry/credit")
    def credit() -> list[dict]:
        """Research credit per hotkey over the credit window (points, share, cap)."""
        return reg().credit_table()

    @router.get("/journal")
    def journal(offset: int = Query(0, ge=0, le=10**9),
                limit: int = Query(20, ge=1, le=JOURNAL_MAX)) -> dict:
        """Journal entries, newest first: `offset` entries skipped, at most `limit` given."""
        total, entries = reg().journal(offset=offset, limit=limit)
        return {"total": total, "offset": offset, "limit": limit, "entries": entries}

    @router.get("/journal.md", response_class=Response)
    def journal_md(limit: int = Query(20, ge=1, le=JOURNAL_MAX)) -> Response:
        total, entries = reg().journal(limit=limit)
        return Response(journal_markdown(total, entries),
                        media_type="text/markdown; charset=utf-8")

    return router
