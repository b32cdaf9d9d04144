"""`GET /` (= `/dashboard`) and `GET /dashboard/submissions/{id}`: the validator's web pages.

Read-only HTML, one store session per page, no scripts (the page reloads itself every
`dashboard.refresh_s` seconds). Served only when `dashboard.enabled`.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from prism_challenge import __version__
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.params import CorpusQuery, SubmissionId
from prism_challenge.dashboard.api_page import render_api_docs
from prism_challenge.dashboard.cluster_panel import cluster_html
from prism_challenge.dashboard.html import esc, page, section
from prism_challenge.dashboard.journal_page import PAGE, render_journal
from prism_challenge.dashboard.overview_page import render_overview
from prism_challenge.dashboard.queries import (
    SubmissionView,
    load_journal,
    load_overview,
    load_submission,
)
from prism_challenge.dashboard.records import RecordCache
from prism_challenge.dashboard.submission_page import render_submission


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(tags=["dashboard"], include_in_schema=False)
    cfg = deps.settings.dashboard
    if not cfg.enabled:
        return router
    records = RecordCache(cfg.curve_points)

    def meta() -> str:
        s = deps.settings
        block = deps.metagraph.block
        where = f"block {block}" if block is not None else "no chain block yet"
        return esc(f"netuid {s.chain.netuid} · {s.mode} mode · {where} · v{__version__}")

    @router.get("/", response_class=HTMLResponse)
    @router.get("/dashboard", response_class=HTMLResponse)
    def overview(corpus: CorpusQuery = None) -> HTMLResponse:
        with deps.store.session() as session:
            view = load_overview(session, deps.settings, deps.metagraph, corpus=corpus,
                                 queue_rows=cfg.queue_rows, hotkey=deps.hotkey,
                                 now=deps.clock())
        body = render_overview(view)
        if deps.cluster is not None:
            body += cluster_html(deps.cluster())
        return HTMLResponse(page("PRISM validator", body, meta=meta(), refresh_s=cfg.refresh_s))

    @router.get("/dashboard/journal", response_class=HTMLResponse)
    def journal(offset: int = Query(0, ge=0, le=10**9)) -> HTMLResponse:
        with deps.store.session() as session:
            view = load_journal(session, deps.settings, offset=offset, limit=PAGE)
        return HTMLResponse(page("Research journal", render_journal(view), meta=meta(),
                                 refresh_s=cfg.refresh_s))

    @router.get("/dashboard/submissions/{submission_id}", response_class=HTMLResponse)
    def submission(submission_id: SubmissionId) -> HTMLResponse:
        with deps.store.session() as session:
            head = load_submission(session, submission_id)
            stored = [] if head is None else records.read(session, submission_id)
        if head is None:
            body = section("Not found", f"<p>There is no submission {submission_id}.</p>")
            return HTMLResponse(page("Not found", body, meta=meta()), status_code=404)
        view = SubmissionView(head.row, head.score, records.digests(stored))
        body = render_submission(view)
        title = f"Submission {submission_id}"
        return HTMLResponse(page(title, body, meta=meta(), refresh_s=cfg.refresh_s))

    @router.get("/docs", response_class=HTMLResponse)
    def api_docs(request: Request) -> HTMLResponse:
        """The routes of this node from its OpenAPI document, rendered here (no CDN): the
        page works on a host without internet access."""
        return HTMLResponse(page("API", render_api_docs(request.app.openapi()), meta=meta()))

    return router
