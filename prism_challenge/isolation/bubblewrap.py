"""Isolation with bubblewrap: new user, pid, net, ipc, uts and cgroup namespaces.

Only what the spec mounts is visible (the Python runtime read-only, the run's own files);
the network namespace has nothing but loopback; the process runs as uid 65534 with every
capability dropped and dies with its parent. Limits come from `supervise`.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from prism_challenge.isolation.cgroup import Cgroup
from prism_challenge.isolation.enter import program_pid
from prism_challenge.isolation.prewarm import (
    EnteredProgram,
    PrewarmUnavailable,
    entry_of,
    prewarmed_for,
)
from prism_challenge.isolation.spec import (
    SANDBOX_USER,
    Mount,
    SandboxResult,
    SandboxSpec,
    StopAt,
)
from prism_challenge.isolation.supervise import Enter, supervise

log = logging.getLogger("prism.sandbox")

NOBODY = "65534"
# Name resolution inside the sandbox knows loopback only (the ranks' rendezvous and gloo need
# `localhost`); there is no DNS to ask anyway.
HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost\n"
NSSWITCH = "hosts: files\npasswd: files\ngroup: files\n"
# The sandbox's uid has a name, a home and a group, as a normal user has: libraries that ask
# who runs them (getpass.getuser() in torch.compile's inductor, for one) must not crash the
# run, which would be charged to the miner for the validator's environment.
PASSWD = f"{SANDBOX_USER}:x:{NOBODY}:{NOBODY}:PRISM sandbox:/scratch:/usr/sbin/nologin\n"
GROUP = f"{SANDBOX_USER}:x:{NOBODY}:\n"
# Driver nodes every CUDA process needs besides its own GPUs' /dev/nvidia<minor>; bound when
# the host has them.
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
# What the sandbox runs while the prewarmed interpreter enters it (isolation/prewarm.py).
WAITER = ("/bin/sh", "-c", "echo ready; exec sleep infinity")
# failed entries in a row before every sandbox starts cold (a transient failure costs one
# sandbox its prewarmed start, not the validator's)
ENTRY_FAILURES = 3


class DeviceNodeMissing(RuntimeError):
    """A GPU of the sandbox has no device node on this host (the driver lost it)."""


# Where the harness's own modules appear inside the sandbox; first on its PYTHONPATH.
HARNESS_ROOT = "/opt/prism"


def _package_dir() -> Path:
    import prism_challenge

    return Path(prism_challenge.__file__).resolve().parent


def harness_files(package: Path) -> list[Path]:
    """The only PRISM files a sandbox holds: what the harness and the health probe import.

    The rest of the package (settings, runner, replay, held-out scoring, the store) never
    enters a sandbox, so a model cannot read how it is judged from inside one. Sources only:
    compiled caches would expose the names of the modules that are left out.
    """
    # sampling.py: which kept positions a probe cuts together (the secret never enters)
    names = ["__init__.py", "sandbox/__init__.py", "sandbox/protocol.py",
             "hardware/__init__.py", "hardware/health_probe.py", "sandbox/sampling.py"]
    names += sorted(f"sandbox/harness/{p.name}" for p in (package / "sandbox/harness")
                    .glob("*.py"))
    return [package / n for n in names]


def harness_args() -> list[str]:
    """bwrap arguments that bind the harness's files under HARNESS_ROOT, and hide the
    installed package where a runtime mount would otherwise show it (a wheel installed in
    site-packages, or a clone's package below a bound folder)."""
    package = _package_dir()
    argv: list[str] = []
    if any(package.is_relative_to(m.host) for m in runtime_mounts()):
        argv += ["--tmpfs", str(package), "--remount-ro", str(package)]
    target = Path(HARNESS_ROOT) / "prism_challenge"
    for f in harness_files(package):
        argv += ["--ro-bind", str(f), str(target / f.relative_to(package))]
    return argv


def runtime_mounts() -> tuple[Mount, ...]:
    """Read-only mounts that make this interpreter and its packages importable (PRISM's
    own files come from `harness_args`)."""
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
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

    def __init__(self, bwrap: str | None = None, *, dev_dir: Path = Path("/dev"),
                 prewarm: bool = True) -> None:
        found = bwrap or shutil.which("bwrap")
        if not found:
            raise RuntimeError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
        self.bwrap = found
        self.dev_dir = Path(dev_dir)
        self.prewarm = prewarm  # `python -m` programs start in the prewarmed interpreter
        self._entry_failures = 0  # in a row; ENTRY_FAILURES of them turn prewarm off

    def device_binds(self, spec: SandboxSpec) -> list[str]:
        """Only this sandbox's GPU nodes (and the driver's control nodes) appear in its /dev."""
        if not spec.gpus:
            return []
        argv: list[str] = []
        for gpu in spec.gpus:
            node = self.dev_dir / f"nvidia{gpu.minor}"
            if not node.exists():
                raise DeviceNodeMissing(f"GPU {gpu.id}: device node {node} is missing")
            argv += ["--dev-bind", str(node), f"/dev/nvidia{gpu.minor}"]
        for name in CONTROL_NODES:
            if (self.dev_dir / name).exists():
                argv += ["--dev-bind", str(self.dev_dir / name), f"/dev/{name}"]
        return argv

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
            "--ro-bind", str(etc / "passwd"), "/etc/passwd",
            "--ro-bind", str(etc / "group"), "/etc/group",
        ]
        for mount in runtime_mounts() + spec.mounts:
            flag = "--bind" if mount.writable else "--ro-bind"
            argv += [flag, str(mount.host), mount.target]
        argv += harness_args()
        argv += self.device_binds(spec)
        argv += ["--remount-ro", "/"]  # the sandbox's own root: only /tmp and binds write
        if not spec.tmp_writable:  # /dev's own tmpfs holds /dev/shm; device nodes still open
            argv += ["--remount-ro", "/tmp", "--remount-ro", "/dev"]
        for key, value in sorted(self.environment(spec).items()):
            argv += ["--setenv", key, value]
        argv += ["--chdir", spec.cwd, "--", *spec.argv]
        return argv

    @staticmethod
    def environment(spec: SandboxSpec) -> dict[str, str]:
        """The program's whole environment in the sandbox."""
        env = {"PYTHONPATH": HARNESS_ROOT, **spec.env}
        if spec.gpus:  # indices follow nvidia-smi's (PCI bus) order, as the slots were planned
            env.update(CUDA_VISIBLE_DEVICES=",".join(g.id for g in spec.gpus),
                       CUDA_DEVICE_ORDER="PCI_BUS_ID")
        return env

    def _enter(self, spec: SandboxSpec, module: str, args: tuple[str, ...]) -> Enter:
        """Starts `python -m module args` of `spec` in the prewarmed interpreter, inside the
        sandbox the launcher built around WAITER."""

        def enter(launcher: subprocess.Popen, cgroup: Cgroup | None) -> EnteredProgram:
            if launcher.stdout is None or launcher.stdout.readline() != b"ready\n":
                raise PrewarmUnavailable("the sandbox did not start: its waiter is silent")
            request = {"pid": program_pid(program_pid(launcher.pid)), "module": module,
                       "args": list(args), "cwd": spec.cwd,
                       # the program can tell how it started (its pid, the waiter beside
                       # it), so it is part of the run's stack: a replay must start alike
                       "env": {**self.environment(spec), "PRISM_START": "prewarmed"},
                       "cgroup_procs": [] if cgroup is None
                       else [str(d / "cgroup.procs") for d in cgroup.dirs],
                       "cpus": list(spec.cpus), "fsize": spec.limits.disk_bytes}
            return prewarmed_for(request["env"]).spawn(request)

        return enter

    def run(self, spec: SandboxSpec, *, stop_at: StopAt = None) -> SandboxResult:
        (spec.scratch / "tmp").mkdir(parents=True, exist_ok=True)
        # the sandbox's /etc files sit beside its scratch, in the run's own folder: a
        # validator killed mid-run leaves them where the run's files are cleaned, not in /tmp
        with tempfile.TemporaryDirectory(prefix=".etc-", dir=spec.scratch.parent) as tmp:
            etc = Path(tmp)
            (etc / "hosts").write_text(HOSTS)
            (etc / "nsswitch.conf").write_text(NSSWITCH)
            (etc / "passwd").write_text(PASSWD)
            (etc / "group").write_text(GROUP)
            entry = entry_of(spec.argv) if self.prewarm and spec.prewarm else None
            if entry is None:
                return supervise(self.command(spec, etc), spec.limits, spec.scratch,
                                 name=spec.name, stop_at=stop_at, cpus=spec.cpus)
            waiter = self.command(dataclasses.replace(spec, argv=WAITER), etc)
            try:
                result = supervise(waiter, spec.limits, spec.scratch, name=spec.name,
                                   stop_at=stop_at, cpus=spec.cpus,
                                   enter=self._enter(spec, *entry))
            except PrewarmUnavailable as exc:
                self._entry_failures += 1
                if self._entry_failures >= ENTRY_FAILURES:
                    log.warning("sandboxes start cold from now on: %s", exc)
                    self.prewarm = False
                else:
                    log.warning("this sandbox starts cold (%d failed entries in a row of %d "
                                "allowed): %s", self._entry_failures, ENTRY_FAILURES, exc)
                return supervise(self.command(spec, etc), spec.limits, spec.scratch,
                                 name=spec.name, stop_at=stop_at, cpus=spec.cpus)
            self._entry_failures = 0
            return result
