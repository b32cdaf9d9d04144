"""Is this node behind? The running version against the newest release tag of its checkout.

Validators run from a git checkout (`make setup`); releases are tags `vX.Y.Z`. The check
reads only the local repository (no network: `git fetch --tags` is the operator's call), never
changes it, and says what to run. Outside a checkout, or without git, it says so and nothing
else happens.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import prism_challenge

PACKAGE_ROOT = Path(prism_challenge.__file__).resolve().parent.parent
RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")  # release tags are vX.Y.Z, nothing else


def _version(text: str) -> tuple[int, int, int] | None:
    m = RELEASE.fullmatch(text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


@dataclass(frozen=True)
class UpdateCheck:
    running: str
    latest: str | None  # the newest release tag, None when there is none to compare with
    behind: bool
    advice: str


def _release_tags(checkout: Path) -> list[tuple[tuple[int, int, int], str]]:
    out = subprocess.run(["git", "-C", str(checkout), "tag", "--list", "v*"],
                         capture_output=True, text=True, timeout=10)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or "git tag failed")
    tags = []
    for tag in out.stdout.split():
        version = _version(tag) if tag.startswith("v") else None
        if version is not None:
            tags.append((version, tag))
    return sorted(tags)


def check_for_update(checkout: Path = PACKAGE_ROOT,
                     running: str = prism_challenge.__version__) -> UpdateCheck:
    def result(latest: str | None, behind: bool, advice: str) -> UpdateCheck:
        return UpdateCheck(running, latest, behind, advice)

    if shutil.which("git") is None or not (checkout / ".git").exists():
        return result(None, False, f"update check skipped: {checkout} is not a git checkout "
                      "(an installed package updates with pip)")
    try:
        tags = _release_tags(checkout)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return result(None, False, f"update check skipped: {exc}")
    if not tags:
        return result(None, False, f"update check: no release tags (v*) in {checkout}; run "
                      f"`git -C {checkout} fetch --tags` to see new releases")
    newest, tag = tags[-1]
    current = _version(running)
    if current is None:
        return result(tag, False, f"update check skipped: running version {running!r} is not "
                      "a release (X.Y.Z)")
    if newest <= current:
        return result(tag, False, f"PRISM {running} is up to date with the newest release "
                      f"tag {tag} in {checkout}")
    return result(tag, True, (
        f"PRISM {running} is behind release {tag}: stop the validator (SIGTERM requeues its "
        f"runs), back up the store, then `git -C {checkout} checkout {tag} && make -C "
        f"{checkout} setup` and start it again (docs/validators.md, Upgrade)"))
