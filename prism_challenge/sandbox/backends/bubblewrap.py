"""Isolation with bubblewrap: new user, pid, net, ipc, uts and cgroup namespaces.

Only what the spec mounts is visible (the Python runtime read-only, the run's own files);
the network namespace has nothing but loopback; the process runs as uid 65534 with every
capability dropped and dies with its parent. Limits come from `supervise`.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from prism_challenge.sandbox.backends.spec import Mount, SandboxResult, SandboxSpec, StopAt
from prism_challenge.sandbox.backends.supervise import supervise

NOBODY = "65534"
# Name resolution inside the sandbox knows loopback only (torchrun rendezvous and gloo need
# `localhost`); there is no DNS to ask anyway.
HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost\n"
NSSWITCH = "hosts: files\n"


def runtime_mounts() -> tuple[Mount, ...]:
    """Read-only mounts that make this interpreter, its packages and PRISM importable."""
    import prism_challenge

    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
             Path(prism_challenge.__file__).resolve().parent}
    # Package folders outside the prefix that this interpreter imports from (a `.pth` line,
    # a user site): the sandboxed interpreter reads the same `.pth` files and needs them too.
    paths |= {Path(p).resolve() for p in sys.path
              if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()}
    # System libraries that the interpreter and torch link against.
    paths |= {p for p in (Path("/usr"), Path("/etc/ld.so.cache"), Path("/etc/alternatives"))
              if p.exists()}
    return tuple(Mount(p, str(p)) for p in sorted(paths))


class BubblewrapBackend:
    name = "bubblewrap"

    def __init__(self, bwrap: str | None = None) -> None:
        found = bwrap or shutil.which("bwrap")
        if not found:
            raise RuntimeError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        self.bwrap = found

    def command(self, spec: SandboxSpec, etc: Path) -> list[str]:
        argv = [
            self.bwrap,
            "--unshare-user", "--uid", NOBODY, "--gid", NOBODY,
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox",
            "--clearenv",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
            "--ro-bind", str(etc / "hosts"), "/etc/hosts",
            "--ro-bind", str(etc / "nsswitch.conf"), "/etc/nsswitch.conf",
        ]
        for mount in runtime_mounts() + spec.mounts:
            flag = "--bind" if mount.writable else "--ro-bind"
            argv += [flag, str(mount.host), mount.target]
        for gpu in spec.gpus:
            for dev in (f"/dev/nvidia{gpu}", "/dev/nvidiactl", "/dev/nvidia-uvm"):
                if Path(dev).exists():
                    argv += ["--dev-bind", dev, dev]
        argv += ["--remount-ro", "/"]  # the sandbox's own root: only /tmp and binds write
        for key, value in sorted(spec.env.items()):
            argv += ["--setenv", key, value]
        argv += ["--chdir", spec.cwd, "--", *spec.argv]
        return argv

    def run(self, spec: SandboxSpec, *, stop_at: StopAt = None) -> SandboxResult:
        (spec.scratch / "tmp").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="prism-etc-") as tmp:
            etc = Path(tmp)
            (etc / "hosts").write_text(HOSTS)
            (etc / "nsswitch.conf").write_text(NSSWITCH)
            return supervise(self.command(spec, etc), spec.limits, spec.scratch, name=spec.name,
                             stop_at=stop_at)
