"""The validator's HTTP API: the app factory, its dependencies, errors and a thread server."""

from prism_challenge.api.app import ROUTERS, create_app
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError
from prism_challenge.api.server import ApiServer

__all__ = ["ROUTERS", "ApiDeps", "ApiError", "ApiServer", "create_app"]
