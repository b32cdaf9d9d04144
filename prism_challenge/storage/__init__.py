"""Storage: the SQL store, its schema and migrations, and the submission lifecycle."""

from prism_challenge.storage.db import Store, StoreUnavailable, serialize_on
from prism_challenge.storage.lifecycle import (
    FINAL,
    INFRA_PREFIX,
    IllegalTransition,
    Status,
    failed_for_infra,
    reopen_after_infra,
    transition,
)

__all__ = ["FINAL", "INFRA_PREFIX", "IllegalTransition", "Status", "Store", "StoreUnavailable",
           "failed_for_infra", "reopen_after_infra", "serialize_on", "transition"]
