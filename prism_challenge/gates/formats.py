"""Format strings that reach attributes or indexes (docs/security.md B2, B7).

`"{0.gi_frame.f_back.f_locals}".format(gen)` performs attribute and index lookups inside
`str.format`, where no AST node shows them: that is how miner code read the harness's
locals past a policy that refuses `.gi_frame` written out. A format string may therefore
only name plain fields (`{}`, `{0}`, `{name}`, with any conversion and a spec that is itself
plain); one whose field, or a field nested in a spec, holds `.` or `[` is refused, as is a
string that `str.format` could not parse. f-strings need no such check: their expressions
are ordinary AST nodes that every other rule sees.
"""

from __future__ import annotations

import string

_PARSER = string.Formatter()
MAX_NESTING = 4  # str.format itself stops at 2 levels of nested specs


def format_string_problem(text: str) -> str | None:
    """Why `text` may not be used with .format/.format_map, or None when it only names
    plain fields."""
    return _problem(text, 0)


def _problem(text: str, depth: int) -> str | None:
    if depth > MAX_NESTING:
        return "nests format specs too deeply"
    try:
        parts = list(_PARSER.parse(text))
    except ValueError as exc:
        return f"is not a valid format string ({exc})"
    for _literal, field, spec, _conversion in parts:
        if field is not None and ("." in field or "[" in field):
            shown = field if len(field) <= 60 else field[:57] + "..."
            return f"has the field '{{{shown}}}', which reaches an attribute or an index"
        if spec:
            nested = _problem(spec, depth + 1)
            if nested is not None:
                return nested
    return None
