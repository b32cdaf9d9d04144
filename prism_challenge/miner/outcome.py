"""Why a local run stopped before its budget ran out, in one line a miner can act on.

The sandbox keeps the last frames of a crash's traceback: mostly the harness's and torch's,
with the bundle's own line among them and the exception at the end. Printed whole inside a
table cell it wrapped into twenty lines of paths cut with "…", and `prism eval` showed its
first 200 characters, which hold only the harness's frames. `run_problem` says it in one
line instead: what happened (the exception, the bundle's file and line that raised it, how
far into the budget the run got) and what to do next. The traceback itself is still printed,
whole, below the report (`crash_traceback`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from prism_challenge.isolation.spec import human_bytes
from prism_challenge.sandbox.record import RunRecord

# a frame of the bundle's code: the sandbox mounts the bundle at /submission
BUNDLE_FRAME = re.compile(r'File "/submission/([^"]+)", line (\d+), in (\S+)\n(?:[ \t]*(\S.*))?')
# Read from a humanized detail: the isolation layer writes the limit in GiB/MiB, a record
# stored before it did so as "N bytes"; humanize() makes both read the same.
SIZE = r"(\d+(?:\.\d+)? (?:GiB|MiB|KiB|bytes))"
MEMORY_LIMIT = re.compile(rf"memory limit of {SIZE}")
HOST_OOM = re.compile(rf"host's OOM killer while under its own limit of {SIZE}")
BYTE_COUNT = re.compile(r"\b(\d+) bytes\b")
# an allocation the process itself could not get (torch's CPU allocator, CUDA, Python)
OUT_OF_MEMORY = re.compile(r"out of memory|not enough memory|can't allocate memory|"
                           r"OutOfMemoryError|MemoryError", re.IGNORECASE)
MEMORY_KEY = "sandbox.memory_bytes"
SMALLER = "make the model or the batch size smaller, or keep fewer tensors alive in train()"
MAX_CHARS = 200  # of the exception's message and of the line of code quoted


@dataclass(frozen=True)
class RunProblem:
    what: str  # what happened, with the row of the budget the run got to
    fix: str  # what to do next

    @property
    def line(self) -> str:
        return f"{self.what}; {self.fix}"


def humanize(text: str) -> str:
    """Every 'N bytes' of a sandbox's message written as GiB/MiB/KiB."""
    return BYTE_COUNT.sub(lambda m: human_bytes(int(m.group(1))), text)


def host_out_of_memory(detail: str, at: str = "") -> str | None:
    """The one line for a run the host's OOM killer ended while it was under the sandbox's
    own limit (this machine ran out of memory first), `at` saying how far it got; None for
    any other run."""
    found = HOST_OOM.search(humanize(detail or ""))
    if found is None:
        return None
    limit = found.group(1)
    return (f"this machine ran out of memory{at}, before the run reached the sandbox's limit "
            f"of {limit} (the host's OOM killer ended it); {SMALLER}, or free memory here; to "
            f"have the sandbox's own limit stop a run first, set {MEMORY_KEY} in your config "
            "below the memory this machine can spare")


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"


def crash_cause(detail: str) -> str:
    """The exception a crash ended with and the last line of the bundle that led to it:
    `ValueError: boom (training.py line 25, in train: raise ValueError("boom"))`.

    The exception is the traceback's last line that is not indented (a chained exception's
    final one); the place is the innermost frame of /submission. A traceback whose kept
    frames are all inside a library says so instead of naming a line."""
    lines = [humanize(ln) for ln in detail.splitlines() if ln.strip()]
    outer = [ln for ln in lines if not ln[0].isspace() and not ln.startswith("Traceback")]
    cause = _clip(outer[-1] if outer else (lines[-1] if lines else "no error message"))
    frames = BUNDLE_FRAME.findall(detail)
    if not frames:
        if 'File "' not in detail:  # no traceback: a process died, or the output's tail
            return cause
        return f"{cause} (raised inside a library: the frames the sandbox kept hold no line " \
               "of your bundle, so look for the call of yours that reaches it)"
    name, line, func, code = frames[-1]
    code = "" if code.startswith("File ") else code  # a frame without its source line
    where = f"{name} line {line}, in {func}"
    return f"{cause} ({where}: {_clip(code)})" if code else f"{cause} ({where})"


def run_problem(record: RunRecord) -> RunProblem | None:
    """What stopped a run short of its budget, for the three ways a miner's own code does it:
    a crash, the memory limit, and train() returning early. None for a run that consumed
    its budget and for the other limits, whose detail already says what was hit."""
    done, budget = record.consumed.rows, record.budget.rows
    at = f"at row {done:,} of {budget:,}"
    if record.exit_reason == "crash":
        cause = crash_cause(record.exit_detail)
        if OUT_OF_MEMORY.search(cause.split(" (", 1)[0]):
            return RunProblem(f"the run ran out of memory {at} with {cause}",
                              f"{SMALLER}, then run `prism check` again")
        return RunProblem(f"the run crashed {at} with {cause}",
                          "fix it, then run `prism check` again")
    if record.exit_reason == "memory":
        found = MEMORY_LIMIT.search(humanize(record.exit_detail))
        limit = f"of {found.group(1)} " if found else ""
        return RunProblem(f"the run reached the sandbox's memory limit {limit}"
                          f"({MEMORY_KEY}) {at}",
                          f"{SMALLER}; the validators run under their own limit, so raise "
                          f"{MEMORY_KEY} in your config only to match theirs on this machine")
    if record.exit_reason == "ok" and done < budget:
        return RunProblem(f"train(ctx) returned {at}",
                          "iterate ctx.batches(...) to its end: every token left is charged "
                          "at log2 V bits")
    return None


def crash_traceback(record: RunRecord) -> list[str]:
    """The lines of a crashed run's traceback as the sandbox kept them (none otherwise)."""
    if record.exit_reason != "crash":
        return []
    return record.exit_detail.rstrip("\n").splitlines()
