"""Which locked packages an offline install kit must carry: the lock's pins, less those the
GPU host already has (its `pip list --format=freeze`, by name) and those named as skipped.

A GPU host keeps its own CUDA torch and usually numpy, scipy, pyarrow and more; shipping them
again would replace the host's builds and make the kit hundreds of megabytes.

    python scripts/wheel_needs.py requirements.lock --have host-freeze.txt --skip "ray ruff"
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path


def _name(spec: str) -> str:
    """PEP 503 normalised project name of a `name==version` (or `name @ ...`) line."""
    raw = re.split(r"[=<>!~ @\[;]", spec.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", raw).lower()


def needs(lock_lines: list[str], have: set[str], skip: set[str]) -> list[str]:
    """The pinned lines of the lock whose package is neither on the host nor skipped."""
    out = []
    for line in lock_lines:
        line = line.strip()
        if not re.match(r"^[A-Za-z0-9_.-]+==", line):
            continue
        if _name(line) in have | skip:
            continue
        out.append(re.sub(r"\+cpu$", "", line.split(" ", 1)[0]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument("--have", type=Path, help="the host's `pip list --format=freeze`")
    parser.add_argument("--skip", default="", help="names never carried, space-separated")
    args = parser.parse_args(argv)
    if not args.lock.is_file():
        print(f"error: no lock at {args.lock}: run `make lock` first", file=sys.stderr)
        return 2
    have: set[str] = set()
    if args.have:
        if not args.have.is_file():
            print(f"error: no file {args.have}: on the host run "
                  f"`python3 -m pip list --format=freeze > {args.have.name}`", file=sys.stderr)
            return 2
        have = {_name(line) for line in args.have.read_text().splitlines() if line.strip()}
    skip = {_name(name) for name in args.skip.split()}
    print("\n".join(needs(args.lock.read_text().splitlines(), have, skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
