"""The node's API reference page, rendered from its own OpenAPI document.

FastAPI's Swagger page loads its scripts from a CDN and is blank on a host without internet
access; this page is plain HTML built on the server, so it works anywhere. The machine-readable
document stays at `/openapi.json`.
"""

from __future__ import annotations

from prism_challenge.dashboard.html import esc, link, section, table

METHODS = ("get", "post", "put", "patch", "delete")


def render_api_docs(doc: dict) -> str:
    rows = []
    for path, item in sorted(doc.get("paths", {}).items()):
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            params = ", ".join(p.get("name", "") for p in op.get("parameters", []))
            rows.append([f'<span class="mono">{esc(method.upper())}</span>',
                         f'<span class="mono">{esc(path)}</span>', esc(params or None),
                         esc(op.get("summary") or op.get("description", "").split("\n")[0])])
    intro = (f"<p>{esc(doc.get('info', {}).get('description', ''))} The full schema: "
             f"{link('/openapi.json', '/openapi.json')}.</p>")
    return section("API", intro + table(["method", "path", "parameters", "what"], rows))
