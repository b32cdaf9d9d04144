"""The eval sandbox's /scratch is emptied before every task of a fresh model (trained, twin):
a file one held-out task writes there is absent in the next, so scratch is no channel
between tasks. The real eval server on a real Unix socket; the test speaks for the sandbox
exactly as `eval_main` does (hello, then one `task` request per task, asked again by the
next process when told `respawn`)."""

from __future__ import annotations

import socket

import numpy as np

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.eval_server import EvalServer, Task

VOCAB = 8


def _task(model: str, snapshot: str | None = None) -> Task:
    return Task("logits", model, np.zeros((1, 4), dtype=np.int32), targets=np.zeros(1, int),
                snapshot=snapshot, select_rows=[0], select_positions=[3])


def _said_hello(path) -> socket.socket:
    """A connection to the server at `path` that said hello as the sandbox does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    protocol.send(sock, {"op": "hello"})
    protocol.recv(sock)
    return sock


def test_a_file_written_to_scratch_in_one_task_is_absent_in_the_next(tmp_path):
    scratch = tmp_path / "eval_scratch"
    (scratch / "tmp").mkdir(parents=True)
    tasks = [_task("trained"), _task("twin"), _task("snapshot", "s.pt"),
             _task("snapshot", "s.pt"), _task("trained")]
    server = EvalServer(tmp_path / "eval.sock", {"vocab_size": VOCAB}, iter(tasks), VOCAB,
                        scratch=scratch)
    sock = _said_hello(tmp_path / "eval.sock")
    seen = []
    try:
        for i in range(len(tasks)):
            protocol.send(sock, {"op": "task"})
            header, _ = protocol.recv(sock, 1 << 20)
            if header == {"kind": "respawn"}:  # a new process asks for the same task
                seen.append("respawn")
                protocol.send(sock, {"op": "task"})
                header, _ = protocol.recv(sock, 1 << 20)
            seen.append((header["model"], sorted(p.name for p in scratch.iterdir())))
            # what the model leaves behind: a note, a hidden folder it made read-only
            (scratch / f"note-{i}").write_text("the answer to the last task")
            hidden = scratch / f".keep-{i}"
            hidden.mkdir()
            (hidden / "weights").write_bytes(b"\0" * 64)
            hidden.chmod(0o500)
            (scratch / "tmp" / f"t-{i}").write_text("x")
            protocol.send(sock, {"op": "result", "task": header["task"]},
                          np.zeros(VOCAB, dtype="<f4").tobytes())
        protocol.send(sock, {"op": "task"})
        assert protocol.recv(sock)[0] == {"kind": "done"}
    finally:
        sock.close()
        server.close()
    assert seen == [
        ("trained", ["tmp"]),
        ("twin", ["tmp"]),  # the trained model's task left nothing
        ("snapshot", ["tmp"]),
        ("snapshot", [".keep-2", "note-2", "tmp"]),  # a snapshot's own tasks keep scratch
        "respawn",  # the snapshot's process makes way for the trained model's
        ("trained", ["tmp"]),
    ]
    assert len(server.answers) == len(tasks) and not server.problems


def test_each_held_out_task_and_each_snapshot_run_goes_to_a_process_of_its_own(tmp_path):
    """The server tells a process that answered a snapshot to make way (`respawn`) when the
    next task is another model's or another snapshot's; a held-out model's process asks once
    (it exits after its task), so the next asker is always a new process."""
    tasks = [_task("snapshot", "a.pt"), _task("snapshot", "a.pt"), _task("snapshot", "b.pt"),
             _task("trained"), _task("trained"), _task("twin"), _task("snapshot", "b.pt")]
    server = EvalServer(tmp_path / "eval.sock", {"vocab_size": VOCAB}, iter(tasks), VOCAB)
    sock = _said_hello(tmp_path / "eval.sock")
    replies = []
    try:
        while True:
            protocol.send(sock, {"op": "task"})
            header, _ = protocol.recv(sock, 1 << 20)
            if header.get("kind") in ("respawn", "done"):
                replies.append(header["kind"])
                if header["kind"] == "done":
                    break
                continue
            replies.append(header.get("snapshot") or header["model"])
            protocol.send(sock, {"op": "result", "task": header["task"]},
                          np.zeros(VOCAB, dtype="<f4").tobytes())
    finally:
        sock.close()
        server.close()
    assert replies == ["a.pt", "a.pt", "respawn", "b.pt", "respawn", "trained", "trained",
                       "twin", "b.pt", "done"]
    assert [a.task for a in server.answers] == tasks and not server.problems
