"""No isolation: the program runs as a plain child process (debugging only).

It still gets the scrubbed environment and every limit, but sees the whole host. Settings
refuse it in production mode.
"""

from __future__ import annotations

import os
from pathlib import Path

from prism_challenge.isolation.spec import SandboxResult, SandboxSpec, StopAt
from prism_challenge.isolation.supervise import supervise


class NoIsolationBackend:
    name = "none"

    def run(self, spec: SandboxSpec, *, stop_at: StopAt = None) -> SandboxResult:
        """Runs with the mounts' host paths substituted for their targets in argv and env."""
        (spec.scratch / "tmp").mkdir(parents=True, exist_ok=True)
        table = sorted(((m.target, str(m.host)) for m in spec.mounts), key=lambda t: -len(t[0]))

        def host_path(value: str) -> str:
            for target, host in table:
                if value == target or value.startswith(target + "/"):
                    return host + value[len(target):]
            return value

        argv = [host_path(a) for a in spec.argv]
        env = {k: host_path(v) for k, v in spec.env.items()}
        env["PATH"] = os.environ.get("PATH", env["PATH"])
        cwd = Path(host_path(spec.cwd))
        wrapper = ["/usr/bin/env", "-C", str(cwd), "-i", *(f"{k}={v}" for k, v in env.items())]
        return supervise(wrapper + argv, spec.limits, spec.scratch, name=spec.name,
                         stop_at=stop_at, cpus=spec.cpus)
