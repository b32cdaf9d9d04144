"""The HTTP toolkit every stage's routes are built from: dependencies, errors, bodies, server.

It imports no feature: each stage owns its routes in its own package, and the validator
assembles them into one app (`validator/app.py`).
"""

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError
from prism_challenge.api.server import ApiServer

__all__ = ["ApiDeps", "ApiError", "ApiServer"]
