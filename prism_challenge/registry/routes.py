"""HTTP: the current brief (`program.md` + digest header, and as JSON), the hypotheses, the
theory graph and an embeddable posteriors panel. Read-only; the validator writes."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from prism_challenge.registry.panel import posteriors_panel
from prism_challenge.registry.service import Registry

DIGEST_HEADER = "X-Prism-Program-Digest"


def build(deps) -> APIRouter:
    """Routes over `deps.store` / `deps.settings` (an `ApiDeps`). The registry is opened
    (and its ledger seeded) on the first request, not when the app is built."""
    opened: list[Registry] = []

    def reg() -> Registry:
        if not opened:
            opened.append(Registry(deps.store, deps.settings))
        return opened[0]

    router = APIRouter(prefix="/v1", tags=["registry"])

    @router.get("/program.md", response_class=Response)
    def program_md() -> Response:
        text, digest, _ = reg().program()
        return Response(text, media_type="text/markdown; charset=utf-8",
                        headers={DIGEST_HEADER: digest})

    @router.get("/program.json")
    def program_json() -> dict:
        return reg().program()[2]

    @router.get("/hypotheses")
    def hypotheses(include_archived: bool = True) -> list[dict]:
        return reg().hypotheses(include_archived=include_archived)

    @router.get("/registry/graph")
    def graph() -> dict:
        return reg().theory_graph()

    @router.get("/registry/panel", response_class=HTMLResponse)
    def panel() -> HTMLResponse:
        return HTMLResponse(posteriors_panel(reg().hypotheses()))

    return router
