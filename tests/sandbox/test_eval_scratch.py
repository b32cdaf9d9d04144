"""The eval sandbox's /scratch is emptied before every task of a fresh model (trained, twin):
a file one held-out task writes there is absent in the next, so scratch is no channel
between tasks. The real eval server on a real Unix socket; the test speaks for the sandbox
exactly as `eval_main` does (hello, then one `task` request per task)."""

from __future__ import annotations

import socket

import numpy as np

from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.eval_server import EvalServer, Task

VOCAB = 8


def _task(model: str, snapshot: str | None = None) -> Task:
    return Task("logits", model, np.zeros((1, 4), dtype=np.int32), targets=np.zeros(1, int),
                snapshot=snapshot, select_rows=[0], select_positions=[3])


def test_a_file_written_to_scratch_in_one_task_is_absent_in_the_next(tmp_path):
    scratch = tmp_path / "eval_scratch"
    (scratch / "tmp").mkdir(parents=True)
    tasks = [_task("trained"), _task("twin"), _task("snapshot", "s.pt"),
             _task("snapshot", "s.pt"), _task("trained")]
    server = EvalServer(tmp_path / "eval.sock", {"vocab_size": VOCAB}, iter(tasks), VOCAB,
                        scratch=scratch)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(tmp_path / "eval.sock"))
    seen = []
    try:
        protocol.send(sock, {"op": "hello"})
        protocol.recv(sock)
        for i in range(len(tasks)):
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
        ("trained", ["tmp"]),
    ]
    assert len(server.answers) == len(tasks) and not server.problems
