"""The one error every bundle refusal raises: it names the file and the rule it broke.

The rule is a short stable id (API clients and tests match on it); the message is a sentence
a miner can act on without reading the validator's code.
"""

from __future__ import annotations


class BundleError(ValueError):
    """A bundle that cannot be accepted. `.file` is None when no single file is to blame."""

    def __init__(self, rule: str, message: str, *, file: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.file = file
