"""docs/security.md A: escapes and damage are contained by the real bubblewrap sandbox.

Each attack runs for real (bypassing the static gates, which are tested elsewhere), and the
test checks both the verdict and that the validator's side stayed healthy.
"""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest
from sandbox_kit import bundle, tiny_settings

from prism_challenge.isolation.cgroup import ROOT as CGROUP_ROOT


@pytest.fixture(scope="module")
def host_listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    hits: list[str] = []

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            hits.append("connected")
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], hits
    server.close()


@pytest.fixture(scope="module")
def escape(prepared_data, host_listener, tmp_path_factory, make_runner):
    port, hits = host_listener
    base = tmp_path_factory.mktemp("validator")
    db = base / "prism.db"
    db.write_text("validator database")
    config = base / "config.yaml"
    config.write_text("llm:\n  api_key_env: SECRET_KEY\n")
    manifest = json.loads((prepared_data / "MANIFEST.json").read_text())
    shards = sorted(str(p) for p in prepared_data.rglob("*") if p.is_file())
    assert any("val" in s for s in shards) and any("train" in s for s in shards)
    targets = shards + [str(db), str(config)]
    os.environ["PRISM_TEST_SECRET_KEY"] = "hunter2"
    try:
        files = bundle("escape", TARGETS=repr(targets), HOST_PORT=str(port))
        runner = make_runner()
        run_dir = tmp_path_factory.mktemp("escape-run")
        record = runner.run(files, "e" * 64, run_dir)
    finally:
        del os.environ["PRISM_TEST_SECRET_KEY"]
    report = json.loads((run_dir / "scratch" / "out" / "attack.json").read_text())
    return {"record": record, "report": report, "targets": targets, "hits": hits,
            "manifest": manifest, "db": db, "config": config, "run_dir": run_dir}


def test_network_is_unreachable(escape):
    net = escape["report"]["net"]
    assert net["host_loopback"] == "ConnectionRefusedError"  # its own empty loopback
    assert net["internet"] == "OSError"  # no route at all
    assert net["dns"] == "gaierror"
    assert escape["hits"] == []  # nothing reached the host's listener


def test_data_store_and_config_are_unreadable(escape):
    read = escape["report"]["read"]
    assert set(read) == set(escape["targets"])
    assert {k: v for k, v in read.items() if v == "allowed"} == {}
    assert escape["report"]["env"] == []
    assert "hunter2" not in escape["report"]["proc_environ"]
    assert "PRISM_SCRATCH" in escape["report"]["proc_environ"]  # it did read its own
    assert escape["report"]["uid"] == 65534


def test_nothing_written_outside_scratch(escape):
    writes = escape["report"]["write"]
    assert {k: v for k, v in writes.items() if v == "allowed"} == {}
    assert escape["db"].read_text() == "validator database"
    assert not (escape["db"].parent / "pwn").exists()
    assert not any(p.name == "pwn" for p in escape["run_dir"].rglob("pwn"))


def test_foreign_code_runs_only_inside_the_walls(escape):
    """A6: ctypes, a pickle that shells out and a subprocess all run, and all hit the walls."""
    foreign = escape["report"]["foreign"]
    assert foreign["ctypes_open_fd"] == -1  # raw libc open() on the read-only root
    assert foreign["pickle_system_status"] != 0  # the shell it spawned could not write
    assert foreign["shell_status"] != 0  # its write to /etc failed...
    assert foreign["shell_uid"] == "65534"  # ...and it ran as nobody
    run_dir = escape["run_dir"]
    assert not (run_dir / "submission" / "pwn_pickle").exists()
    assert not list(run_dir.rglob("pwn_*"))


def test_lookahead_connection_is_refused_and_run_is_still_scored(escape):
    assert escape["report"]["lookahead"] == "PermissionError"
    record = escape["record"]
    assert record.exit_reason == "ok"
    assert record.consumed.rows == record.budget.rows
    assert any("already connected" in p for p in record.limits_hit)


def _no_leftover_cgroups(run_name: str):
    for hierarchy in ("pids", "memory"):
        d = CGROUP_ROOT / hierarchy / "prism"
        if d.is_dir():
            assert [p.name for p in d.iterdir() if p.name.startswith(run_name)] == []


@pytest.mark.parametrize(
    "attack, exit_reason, needle",
    [
        ("forkbomb", "pids", "process limit"),
        ("membomb", "memory", "memory limit"),
        ("spin", "deadline", "deadline"),
        ("sleeper", "deadline", "deadline"),
        ("diskfill", "disk", "scratch space"),
        ("flood", "output", "output"),
    ],
)
def test_resource_attacks_are_killed_with_the_right_reason(make_runner, tmp_path, attack,
                                                           exit_reason, needle):
    settings = tiny_settings(memory_bytes=1536 * 2**20)
    # the sleeper must finish its two reported steps before its deadline on a loaded host
    settings = settings.model_copy(update={"challenge": settings.challenge.model_copy(
        update={"deadline_s": 8.0 if attack == "sleeper" else 3.0})})
    runner = make_runner(settings)
    digest = attack.ljust(64, "0")
    record = runner.run(bundle(attack), digest, tmp_path / "run")
    assert record.exit_reason == exit_reason, (record.exit_reason, record.exit_detail)
    assert needle in record.exit_detail
    # The validator side carries on: the record is complete, the eval sandbox ran, and no
    # process or cgroup of the attack is left behind.
    assert record.eval is not None and record.eval.val_bpb_twin is not None
    assert record.consumed.rows < record.budget.rows
    _no_leftover_cgroups(f"prism-{digest[:12]}")
    if attack == "sleeper":
        assert record.consumed.rows == 2 * 8  # the third batch was never reported
