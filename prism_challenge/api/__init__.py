"""The validator's HTTP API: the app factory, its dependencies, errors and a thread server.

`create_app` and `ROUTERS` are loaded on first use: `app.py` imports every stage's router,
and those routers import `api.deps` / `api.errors`, so importing them here eagerly would make
"import a router module first" a circular import.
"""

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError
from prism_challenge.api.server import ApiServer

__all__ = ["ROUTERS", "ApiDeps", "ApiError", "ApiServer", "create_app"]


def __getattr__(name: str):
    if name in ("create_app", "ROUTERS"):
        from prism_challenge.api import app

        return getattr(app, name)
    raise AttributeError(f"module 'prism_challenge.api' has no attribute {name!r}")
