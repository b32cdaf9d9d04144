"""Run as a script by test_enter.py: a fresh single-threaded interpreter (as a prewarmed
one would be, not a pytest worker with threads) forks a child that joins the sandbox of the
program `argv[1]`, forks into its pid namespace, sheds its privileges and prints what it
sees as one JSON line, or `error: ...`. `argv[2]`: a host file that must stay invisible."""

from __future__ import annotations

import json
import os
import socket
import sys

from prism_challenge.isolation.enter import enter_sandbox, shed_privileges


def facts(host_file: str) -> dict:
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1)
        network = "reached"
    except OSError:
        network = "unreachable"
    try:
        open("/usr/prism-enter-test", "w")
        usr = "writable"
    except OSError:
        usr = "read-only"
    return {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid(),
            "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
            "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
            "cap_prm": status["CapPrm"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
            "network": network, "usr": usr, "host_file": os.path.exists(host_file),
            "scratch": sorted(os.listdir("/scratch")), "hostname": socket.gethostname()}


def main() -> int:
    pid, host_file = int(sys.argv[1]), sys.argv[2]
    namespaces = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in ("mnt", "net", "user")}
    out_r, out_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(out_r)
        try:
            enter_sandbox(pid)
            inner = os.fork()
            if inner == 0:
                shed_privileges()
                os.write(out_w, json.dumps(facts(host_file)).encode())
                os._exit(0)
            _, status = os.waitpid(inner, 0)
            os._exit(os.waitstatus_to_exitcode(status))
        except BaseException as exc:  # noqa: BLE001 - the child reports and never returns
            os.write(out_w, f"error: {exc}".encode())
            os._exit(1)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as fh:
        text = fh.read().decode()
    os.waitpid(child, 0)
    stayed = all(os.readlink(f"/proc/self/ns/{ns}") == v for ns, v in namespaces.items())
    print(text if stayed else "error: the parent left its own namespaces")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
