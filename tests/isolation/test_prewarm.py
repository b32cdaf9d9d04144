"""Programs started as `python -m MODULE` run in the prewarmed interpreter
(isolation/prewarm.py), inside the same real bubblewrap sandbox a cold start gets: same
view, same output and exit status, no run's values in the prewarmed process, and a cold
start whenever the prewarmed one cannot enter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from prism_challenge.isolation import bubblewrap
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.isolation.prewarm import prewarmed_for
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env

PROGRAM = f"""
import json, os, sys
import torch
print(json.dumps({{"uid": os.getuid(), "pids": sorted(int(p) for p in os.listdir("/proc")
                  if p.isdigit()), "argv": sys.argv[1:],
                  "secret": os.environ.get("PRISM_RUN_VALUE"),
                  "name": __name__, "path0": sys.path[:2], "cwd": os.getcwd(),
                  "clone": os.path.exists({str(Path(__file__).resolve())!r}),
                  "sum": float(torch.ones(4).sum())}}))
sys.exit(int(sys.argv[1]))
"""


def _spec(tmp_path: Path, code: int, env: dict[str, str] | None = None) -> SandboxSpec:
    pkg, scratch = tmp_path / "pkg", tmp_path / f"scratch-{code}"
    pkg.mkdir(exist_ok=True)
    (pkg / "facts.py").write_text(PROGRAM)
    scratch.mkdir()
    return SandboxSpec(argv=(sys.executable, "-m", "facts", str(code), "x"),
                       mounts=(Mount(pkg, "/pkg"), Mount(scratch, "/scratch", writable=True)),
                       env=minimal_env({"PYTHONPATH": "/pkg", "PRISM_RUN_VALUE": "run-only",
                                        "OMP_NUM_THREADS": "1", **(env or {})}),
                       limits=Limits(120, 2**31, 64, 2**26, 65536), scratch=scratch)


def _facts(result) -> dict:
    return json.loads(result.output.strip().splitlines()[-1])


def test_a_prewarmed_program_sees_what_a_cold_one_sees_and_exits_with_its_code(tmp_path):
    warm = BubblewrapBackend().run(_spec(tmp_path, 3))
    cold = BubblewrapBackend(prewarm=False).run(_spec(tmp_path, 4))
    assert (warm.cause, warm.exit_code, cold.cause, cold.exit_code) == ("crash", 3, "crash", 4)
    w, c = _facts(warm), _facts(cold)
    assert w.pop("pids") == [1, 2, 3] and c.pop("pids") == [1, 2]  # the waiter is pid 2
    assert (w.pop("argv"), c.pop("argv")) == (["3", "x"], ["4", "x"])
    assert w == c
    assert w["uid"] == 65534 and w["clone"] is False and w["name"] == "__main__"
    assert w["secret"] == "run-only" and w["cwd"] == "/scratch" and w["sum"] == 4.0


def test_the_prewarmed_process_holds_none_of_a_runs_environment(tmp_path):
    result = BubblewrapBackend().run(_spec(tmp_path, 0))
    assert result.cause == "ok", result.output
    prewarmed = prewarmed_for(_spec(tmp_path, 1).env)
    environ = Path(f"/proc/{prewarmed._proc.pid}/environ").read_bytes().split(b"\0")
    started = dict(kv.decode().split("=", 1) for kv in environ if kv)
    assert started == minimal_env({"OMP_NUM_THREADS": "1"})
    assert "PRISM_RUN_VALUE" not in started


class _CannotEnter(BubblewrapBackend):
    """Asks the prewarmed interpreter to join a host process, which is no sandbox: the fork
    must refuse (it shares the host's namespaces), and the program start cold."""

    def _enter(self, spec, module, args):
        enter = super()._enter(spec, module, args)

        def host_process(launcher, cgroup):
            import prism_challenge.isolation.bubblewrap as bw

            host = subprocess.Popen(["sleep", "60"])
            real = bw.program_pid
            bw.program_pid = lambda pid: host.pid if pid != launcher.pid else real(pid)
            try:
                return enter(launcher, cgroup)
            finally:
                bw.program_pid = real
                host.kill()
                host.wait()

        return host_process


def test_a_program_the_prewarmed_interpreter_cannot_start_starts_cold(tmp_path, caplog,
                                                                     monkeypatch):
    """One failed entry starts that sandbox cold; ENTRY_FAILURES in a row turn it off."""
    import prism_challenge.isolation.bubblewrap as bw

    monkeypatch.setattr(bw, "ENTRY_FAILURES", 2)
    backend = _CannotEnter()
    result = backend.run(_spec(tmp_path, 0))
    assert result.cause == "ok", result.output
    assert _facts(result)["pids"] == [1, 2]  # cold: no waiter
    assert backend.prewarm is True and "this sandbox starts cold (1 failed" in caplog.text
    assert "from now on" not in caplog.text
    result = backend.run(_spec(tmp_path, 1))
    assert result.cause == "crash" and _facts(result)["pids"] == [1, 2]
    assert backend.prewarm is False
    assert "sandboxes start cold from now on" in caplog.text


def test_a_spec_that_asks_for_a_cold_start_gets_one(tmp_path):
    """A replay of a run that started cold starts cold, on a backend that prewarms."""
    import dataclasses

    backend = BubblewrapBackend()
    result = backend.run(dataclasses.replace(_spec(tmp_path, 0), prewarm=False))
    assert result.cause == "ok" and _facts(result)["pids"] == [1, 2]
    assert backend.prewarm is True


def test_sandbox_prewarm_false_starts_every_sandbox_cold(tmp_path):
    from prism_challenge.config import Settings
    from prism_challenge.miner.sandbox_run import backend_of

    assert backend_of(Settings()).prewarm is True
    backend = backend_of(Settings(sandbox={"prewarm": False}))
    result = backend.run(_spec(tmp_path, 0))
    assert result.cause == "ok" and _facts(result)["pids"] == [1, 2]


def test_the_sandboxs_etc_files_live_in_the_runs_folder_and_go_with_the_run(tmp_path):
    """/etc/passwd (and hosts, group, nsswitch.conf) are bound from a folder beside the
    run's scratch, not from the host's temporary folder: a validator killed mid-run leaves
    them where the run's own files are cleaned. A run that ends removes them."""
    scratch = tmp_path / "run" / "scratch"
    scratch.mkdir(parents=True)
    spec = SandboxSpec(argv=("/bin/sh", "-c", "grep ' /etc/passwd ' /proc/self/mountinfo; "
                                              "cat /etc/passwd"),
                       mounts=(Mount(scratch, "/scratch", writable=True),), env=minimal_env(),
                       limits=Limits(60, 2**30, 64, 2**26, 65536), scratch=scratch)
    result = BubblewrapBackend().run(spec)
    assert result.cause == "ok", result.output
    mount, user = result.output.strip().splitlines()
    source = Path(mount.split()[3])  # the bound file's path on the host's filesystem
    assert source.name == "passwd" and source.parent.parent.name == "run", mount
    assert source.parent.name.startswith(".etc-")
    assert user == bubblewrap.PASSWD.strip()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["scratch"]


OPTIMIZER_PROGRAM = """
import json, sys
import torch
loaded = "torch._dynamo" in sys.modules
from prism_challenge.sandbox.harness.seeding import make_deterministic
make_deterministic(0, 1)
torch.optim.AdamW([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo if not yet
import torch._inductor.config as config
print(json.dumps({"dynamo_before": loaded, "compile_threads": config.compile_threads,
                  "cxx": config.cpp.cxx[1]}))
"""


def test_an_optimizer_costs_a_prewarmed_run_no_import_and_inductor_keeps_the_runs_threads(
        tmp_path):
    """The prewarmed interpreter has imported torch._dynamo (what the first optimizer's
    constructor imports: seconds of every run's training time) on a CPU build of torch; the
    inductor config it imported with it read the sandbox's compile threads (7 here) and
    compiler, never the host's core count or a compiler the sandbox was not given."""
    pkg, scratch = tmp_path / "pkg", tmp_path / "scratch"
    pkg.mkdir()
    scratch.mkdir()
    (pkg / "optimizer.py").write_text(OPTIMIZER_PROGRAM)
    spec = SandboxSpec(
        argv=(sys.executable, "-m", "optimizer"),
        mounts=(Mount(pkg, "/pkg"), Mount(scratch, "/scratch", writable=True)),
        env=minimal_env({"PYTHONPATH": f"{bubblewrap.HARNESS_ROOT}:/pkg",
                         "OMP_NUM_THREADS": "1", "TORCHINDUCTOR_COMPILE_THREADS": "7",
                         "CXX": "/opt/this-sandboxs/c++"}),
        limits=Limits(120, 2**31, 64, 2**26, 65536), scratch=scratch)
    result = BubblewrapBackend().run(spec)
    assert result.cause == "ok", result.output
    import torch

    cpu_build = torch.version.cuda is None and torch.version.hip is None
    assert _facts(result) == {"dynamo_before": cpu_build, "compile_threads": 7,
                              "cxx": "/opt/this-sandboxs/c++"}
