"""The two refusals of the data plane: bad input to prepare, prepared data that does not verify."""

from __future__ import annotations


class DataInputError(ValueError):
    """The source cannot be prepared (no `text` column, invalid UTF-8, empty, bad spec...).

    Raised before anything is published: the output directory is left as it was.
    """


class SourceUnavailable(DataInputError):
    """The source could not be reached (the hub down or offline, no network): nothing is
    wrong with the spec, and nothing was written; the same command works once it is back.
    `prism prepare-data` exits with `SOURCE_UNAVAILABLE_EXIT` for it."""


SOURCE_UNAVAILABLE_EXIT = 3


class DataIntegrityError(RuntimeError):
    """Prepared data does not match its MANIFEST (missing, corrupted or foreign files).

    A refusal, never a warning: nothing may be scored on data that does not verify.
    """
