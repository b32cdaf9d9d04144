"""Storage: the SQL store, its schema and migrations, and the submission lifecycle."""

from prism_challenge.storage.db import Store, serialize_on
from prism_challenge.storage.lifecycle import FINAL, IllegalTransition, Status, transition

__all__ = ["FINAL", "IllegalTransition", "Status", "Store", "serialize_on", "transition"]
