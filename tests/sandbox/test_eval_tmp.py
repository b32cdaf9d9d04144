"""The eval sandbox has nowhere shared to leave a file but the harness's scratch.

Its task processes answer one held-out task each, one after the other, in the same sandbox:
a file one wrote in /tmp or /dev/shm could be read by the next. The runner's own eval spec,
run in a real bubblewrap sandbox with a probe as its program, finds both read-only, while
the scratch and the device nodes still work; the training sandbox keeps a writable /tmp.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from prism_challenge.isolation.docker import container_kwargs
from prism_challenge.sandbox.runner import RunPaths

PROBE = """
import json
out = {}
for path in ("/tmp/x", "/dev/shm/x", "/scratch/x", "/dev/null"):
    try:
        with open(path, "w") as f:
            f.write("left for the next task")
        out[path] = "written"
    except OSError as e:
        out[path] = e.strerror
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def specs(make_runner, tmp_path_factory):
    runner = make_runner()
    paths = RunPaths(tmp_path_factory.mktemp("run") / "r")
    paths.create({"architecture.py": b"", "training.py": b""})
    for sock in ("eval.sock", "feeder.sock"):  # bound into the sandbox: a file stands in
        (paths.sock / sock).touch()
    return runner, paths, runner._eval_spec(paths, "probe"), runner._train_spec(paths, "probe", 60)


def _written(runner, spec) -> dict:
    probe = dataclasses.replace(spec, argv=(sys.executable, "-c", PROBE), prewarm=False)
    result = runner.backend.run(probe)
    assert result.cause == "ok", result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_the_eval_sandbox_cannot_write_tmp_or_shm_but_its_scratch(specs):
    runner, _, eval_spec, _ = specs
    assert eval_spec.tmp_writable is False
    assert _written(runner, eval_spec) == {
        "/tmp/x": "Read-only file system", "/dev/shm/x": "Read-only file system",
        "/scratch/x": "written", "/dev/null": "written"}


def test_the_training_sandbox_keeps_a_writable_tmp(specs):
    runner, _, _, train_spec = specs
    assert train_spec.tmp_writable is True
    assert _written(runner, train_spec) == {
        "/tmp/x": "written", "/dev/shm/x": "written", "/scratch/x": "written",
        "/dev/null": "written"}


def test_a_docker_eval_container_gets_a_read_only_tmp_and_no_shm(specs):
    _, _, eval_spec, train_spec = specs
    image = "prism-challenge@sha256:" + "a" * 64
    ev, tr = container_kwargs(eval_spec, image), container_kwargs(train_spec, image)
    assert ev["tmpfs"]["/tmp"].startswith("ro,nosuid,nodev,size=")
    assert ev["ipc_mode"] == "none" and "shm_size" not in ev
    assert tr["tmpfs"]["/tmp"].startswith("rw,nosuid,nodev,size=")
    assert tr["ipc_mode"] == "private" and tr["shm_size"] > 0
