"""A fresh virtual environment that holds PRISM's wheel and one extra's dependencies only.

No index is reachable from a test, so the dependencies are not downloaded: the closure of
`prism-challenge[<extra>]` is read from this environment's installed metadata (each
requirement, with its markers evaluated for the extras asked of it), and the files each of
those distributions installed (its RECORD) are hard-linked into one `site-packages` folder
that the new environment reads through a `.pth` line. A distribution outside the closure
(for `[miner]`: openai, scipy, fastapi ...) is simply absent there, as on a real `[miner]`
install. pip then installs the wheel with its extra from no index at all, so it checks that
the closure satisfies every requirement. Hard links need the same filesystem; elsewhere the
files are copied (slower, same result).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

SELF = "prism-challenge"

# Settings small enough for a few seconds of training per sandbox.
TINY = {
    "PRISM_CHALLENGE__SEQ_LEN": "32",
    "PRISM_CHALLENGE__TOKEN_BUDGET": str(32 * 96),
    "PRISM_CHALLENGE__DEADLINE_S": "60",
    "PRISM_SCORING__HELDOUT_POSITIONS": "256",
    "PRISM_SCORING__HELDOUT_CUTS_PER_ROW": "4",
    "PRISM_VERIFICATION__SNAPSHOT_STEPS": "2",
    "PRISM_SANDBOX__CPU_THREADS": "1",
    "PRISM_SANDBOX__MEMORY_BYTES": str(3 * 2**30),
    "PRISM_SANDBOX__PIDS_MAX": "64",
    "PRISM_SANDBOX__DISK_BYTES": str(64 * 2**20),
    "PRISM_SANDBOX__STARTUP_GRACE_S": "60",
    "PRISM_SANDBOX__EVAL_TIME_S": "120",
}


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a command with wide output; fail the test with its output when it fails."""
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "COLUMNS": "400", **(env or {})})
    assert res.returncode == 0, f"{' '.join(argv)}\n{res.stdout}\n{res.stderr}"
    return res


def closure(extras: set[str]) -> dict[str, metadata.Distribution]:
    """Installed distributions that `prism-challenge[extras]` needs, by canonical name
    (PRISM itself left out: the wheel brings it)."""
    dists = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}
    found: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, frozenset[str]]] = [(SELF, frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, asked = todo.pop()
        if (name, asked) in seen:
            continue
        seen.add((name, asked))
        dist = dists[name]
        if name != SELF:
            found[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{**default_environment(), "extra": e} for e in ("", *asked)]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                dep = canonicalize_name(req.name)
                if dep not in dists:
                    raise LookupError(f"{name} needs {req}, which is not installed here")
                todo.append((dep, frozenset(req.extras)))
    return found


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)


def site_of(dists: dict[str, metadata.Distribution], site: Path) -> int:
    """Link every file the distributions installed under site-packages into `site`; returns
    the number of files."""
    count = 0
    for dist in dists.values():
        base = Path(dist.locate_file(""))
        for rel in dist.files or []:
            if ".." in rel.parts:
                continue  # scripts in bin/ (compiled caches are kept: a read-only sandbox
                # could not write them, and would compile torch at every start)
            src = base / rel
            if src.is_file() and not (site / rel).exists():
                _link(src, site / rel)
                count += 1
    return count


def make_env(where: Path, wheel: Path, extras: set[str]) -> Path:
    """A venv at `where`/venv with `wheel[extras]` installed and nothing else importable
    beyond the extra's closure; returns the venv folder."""
    deps = where / "deps" / "site-packages"
    site_of(closure(extras), deps)
    venv = where / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True)
    (Path(purelib.stdout.strip()) / "extra_deps.pth").write_text(f"{deps}\n")
    spec = f"{SELF}[{','.join(sorted(extras))}] @ {wheel.resolve().as_uri()}"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "-q", "--no-index", spec], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv
