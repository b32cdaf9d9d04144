"""Property tests of the sandbox wire (`sandbox.protocol`) and of the host-side readers of it,
the feeder and the eval server, over real sockets (socketpairs and real Unix sockets).

What must hold for anything a sandbox sends (any bytes, any size, cut short, lengths far over
the caps, non-JSON, JSON of the wrong shape, fields of the wrong type):
- `recv` answers with a frame, a `ProtocolError` or a `ConnectionError`, nothing else; a frame
  over a limit is refused before one byte of its body is read (the bytes after the refused
  prefix are still in the socket), holding at most about `MAX_HEADER` bytes;
- the feeder never blames what the harness sent on the validator's side (`infra_error`), no
  serving thread dies of an exception, and no stream row is handed out twice;
- the eval server keeps answers only to tasks it handed out, and its thread ends cleanly;
- a well-formed message round-trips exactly.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import struct
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from fuzz_kit import PROPERTY, budget
from hypothesis import example, given
from hypothesis import strategies as st

from prism_challenge.data import TokenStream
from prism_challenge.sandbox import protocol
from prism_challenge.sandbox.eval_server import EvalServer, Task
from prism_challenge.sandbox.feeder import (
    MAX_CONTROL_BYTES,
    MAX_FINISH_BYTES,
    Feeder,
    FeederPlan,
)
from prism_challenge.sandbox.protocol import MAX_HEADER, MAX_PAYLOAD, ProtocolError

DEEP = b"[" * 50_000  # nesting past the recursion limit: once a RecursionError
HUGE_INT = b'{"op":"next","rank":' + b"9" * 5000 + b"}"  # past int()'s digit limit: a ValueError


def prefix(header: bytes) -> bytes:
    return struct.pack(">I", len(header)) + header


def frame(header: dict, payload: bytes = b"") -> bytes:
    """A frame as `send` writes it, header as given (so it may lie about its payload)."""
    return prefix(json.dumps(header, separators=(",", ":")).encode()) + payload


@contextlib.contextmanager
def pair(timeout: float = 10.0):
    a, b = socket.socketpair()
    a.settimeout(timeout)
    b.settimeout(timeout)
    with a, b:
        yield a, b


@contextlib.contextmanager
def thread_errors():
    """The exceptions that end any thread inside the block (a dying serving thread)."""
    caught: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: caught.append(args.exc_value)
    try:
        yield caught
    finally:
        threading.excepthook = previous


def unread(sock: socket.socket) -> bytes:
    """What is waiting in the socket right now, without waiting for more."""
    sock.setblocking(False)
    try:
        return sock.recv(1 << 16)
    except BlockingIOError:
        return b""


def read_all(sock: socket.socket, limit=protocol.MAX_PAYLOAD) -> list[tuple[dict, bytes]]:
    """Every frame until the peer closes; a documented error ends the reading too."""
    frames = []
    while True:
        try:
            frames.append(protocol.recv(sock, limit))
        except (ProtocolError, ConnectionError):
            return frames


# ---- strategies --------------------------------------------------------------------------

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
_json_exact = st.recursive(  # JSON that compares equal after a round trip (no NaN)
    st.one_of(st.none(), st.booleans(), st.integers(-(2**80), 2**80),
              st.floats(allow_nan=False), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
_field = st.one_of(  # a header field as a hostile harness may write it
    st.integers(-3, 70), st.integers(), st.sampled_from([2**40, 2**63, -(2**63), 10**30]),
    st.floats(), st.sampled_from([float("inf"), float("-inf"), float("nan"), 1.5, True]),
    st.text(max_size=8), st.none(), st.lists(st.integers(), max_size=3),
)
_declared = st.one_of(  # what a header may say its payload is
    st.integers(0, 64), st.integers(), st.sampled_from([2**31, 2**40, 2**63, 10**30]),
    st.floats(), st.booleans(), st.text(max_size=4), st.none(),
)


@st.composite
def raw_frames(draw) -> bytes:
    """One frame of any kind: honest, lying about a length, non-JSON, or cut short."""
    kind = draw(st.sampled_from(["json", "bytes", "liar", "deep"]))
    if kind == "json":
        header = draw(st.one_of(_json, st.dictionaries(st.sampled_from(["op", "payload", "x"]),
                                                       _json, max_size=3)))
        raw = json.dumps(header).encode()
    elif kind == "bytes":
        raw = draw(st.binary(max_size=200))
    elif kind == "deep":
        raw = draw(st.sampled_from([DEEP, HUGE_INT, b'{"payload":1e999}', b"\xff\xfe\x00"]))
    else:
        raw = json.dumps({"op": draw(st.text(max_size=6)), "payload": draw(_declared)}).encode()
    size = draw(st.one_of(st.just(len(raw)), st.integers(0, 2**32 - 1)))
    data = struct.pack(">I", size) + raw + draw(st.binary(max_size=64))
    return data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data


# ---- the wire ----------------------------------------------------------------------------

@PROPERTY
@given(stream=st.one_of(st.binary(max_size=4096), st.lists(raw_frames(), max_size=4).map(
    b"".join)), limit=st.one_of(st.integers(0, 2**31), st.sampled_from([0, 16, MAX_PAYLOAD])))
@example(stream=prefix(DEEP), limit=MAX_PAYLOAD)
@example(stream=prefix(HUGE_INT), limit=MAX_PAYLOAD)
@example(stream=prefix(b'{"payload":5}') + b"abc", limit=MAX_PAYLOAD)  # cut short
@example(stream=prefix(b'{"payload":3}'), limit=2)
def test_any_bytes_are_frames_or_a_documented_error(stream, limit):
    with pair() as (writer, reader):
        writer.sendall(stream)
        writer.shutdown(socket.SHUT_WR)
        consumed = 0
        while True:
            try:
                header, payload = protocol.recv(reader, limit)
            except ProtocolError as exc:
                assert str(exc).strip()
                break
            except ConnectionError:  # the stream ended inside a frame (or between frames)
                break
            size = struct.unpack(">I", stream[consumed:consumed + 4])[0]
            raw = stream[consumed + 4:consumed + 4 + size]
            assert header == json.loads(raw) and isinstance(header, dict)
            n = header.get("payload", 0)
            assert len(payload) == n <= min(limit, MAX_PAYLOAD)
            assert payload == stream[consumed + 4 + size:consumed + 4 + size + n]
            consumed += 4 + size + n


@PROPERTY
@given(declared=st.one_of(st.integers(MAX_PAYLOAD + 1, 2**64),
                          st.sampled_from([2**40, 2**63 - 1, 10**30])),
       limit=st.one_of(st.integers(0, MAX_PAYLOAD), st.just(MAX_PAYLOAD)),
       op=st.text(max_size=8))
@example(declared=2**40, limit=MAX_PAYLOAD, op="finish")
def test_a_payload_declared_over_its_limit_is_refused_before_a_byte_of_it_is_read(
        declared, limit, op):
    """A declared 2**40 bytes over a real socketpair: refused at once (the reader never
    waits for the body), the bytes after the header still unread, memory held ~0."""
    following = b"BODY-NOT-READ" * 8
    with pair(timeout=5) as (writer, reader):
        writer.sendall(frame({"op": op, "payload": declared}) + following)  # and stays open
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError, match="over its limit"):
                protocol.recv(reader, limit)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 * 1024, peak
        assert unread(reader) == following


@PROPERTY
@given(size=st.integers(MAX_HEADER + 1, 2**32 - 1))
@example(size=2**32 - 1)
def test_a_header_declared_over_the_header_cap_is_refused_before_it_is_read(size):
    following = b"{" * 100
    with pair(timeout=5) as (writer, reader):
        writer.sendall(struct.pack(">I", size) + following)
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError, match="too large"):
                protocol.recv(reader)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 16 * 1024, peak
        assert unread(reader) == following


def test_a_header_at_the_cap_is_read_and_one_byte_over_is_not():
    raw = b'{"x":"' + b"a" * (MAX_HEADER - 8) + b'"}'
    assert len(raw) == MAX_HEADER
    with pair() as (writer, reader):
        sender = threading.Thread(target=writer.sendall, args=(prefix(raw),))
        sender.start()  # more than the socket buffer holds: read while it is sent
        assert protocol.recv(reader) == ({"x": "a" * (MAX_HEADER - 8)}, b"")
        sender.join()
    with pair() as (writer, reader):
        writer.sendall(struct.pack(">I", MAX_HEADER + 1))
        with pytest.raises(ProtocolError, match="too large"):
            protocol.recv(reader)


@PROPERTY
@given(header=st.dictionaries(st.text(max_size=12).filter(lambda k: k != "payload"),
                              _json_exact, max_size=6),
       payload=st.one_of(st.binary(max_size=512), st.integers(0, 600_000).map(bytes)),
       pad=st.one_of(st.none(), st.integers(MAX_HEADER - 64, MAX_HEADER + 8)))
@example(header={}, payload=b"", pad=MAX_HEADER - 10)  # exactly at the cap: {"pad":"xx..."}
@example(header={}, payload=b"", pad=MAX_HEADER - 9)
def test_a_well_formed_message_round_trips(header, payload, pad):
    """`payload` is the framing's own key (`send` sets it); any other header round-trips."""
    if pad is not None:
        header = {**header, "pad": "x" * pad}
    sent = {**header, "payload": len(payload)} if payload else header
    raw_size = len(json.dumps(sent, separators=(",", ":")).encode())
    with pair() as (writer, reader):
        if raw_size > MAX_HEADER:
            with pytest.raises(ProtocolError, match="over the limit"):
                protocol.send(writer, header, payload)
            assert unread(reader) == b""  # nothing was written
            return
        sender = threading.Thread(target=protocol.send, args=(writer, header, payload))
        sender.start()  # a payload over the socket buffer needs a reader at the same time
        got_header, got_payload = protocol.recv(reader, len(payload))
        sender.join()
    expected = {**header, "payload": len(payload)} if payload else header
    assert got_header == expected
    assert got_payload == payload


# ---- the feeder (outside the training sandbox) -------------------------------------------

@pytest.fixture(scope="module")
def train(prepared_data) -> TokenStream:
    return TokenStream.open(prepared_data, "train")


@pytest.fixture(scope="module")
def sockets(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sandbox-protocol")


_counter = itertools.count()  # a fresh socket path for each example


ROWS = (1, 2, 3)  # what a step may take per rank under this plan


def new_feeder(train: TokenStream, sockets: Path) -> Feeder:
    """One rank (a world of two would hold rank 0's every step until rank 1 asked for it:
    ranks are served in step, tests/sandbox/test_feeder_protocol.py)."""
    plan = FeederPlan(seq_len=32, vocab_size=train.manifest.vocab_size,
                      separator_id=train.manifest.separator_id, param_cap=10**6,
                      token_budget=32 * 64, budget_rows=64, deadline_s=30.0, world_size=1,
                      sample_secret=b"s" * 32, keep_rate=0.05, lanes=8)
    return Feeder(train, plan, sockets / f"feeder-{next(_counter)}.sock")


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


_OPS = st.one_of(st.sampled_from(["hello", "ready", "next", "loss", "probe", "finish"]),
                 st.text(max_size=6), st.none(), st.integers())


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """`good` three times in four: deep enough into a conversation to reach its state."""
    return st.integers(0, 3).flatmap(lambda i: bad if i == 0 else good)


@st.composite
def harness_messages(draw) -> bytes:
    """A hostile harness's side of one connection: mostly a run's own traffic (hello, the
    next step, its losses) with fields of any type mixed in, any op, payloads of any size
    under the caps, and raw garbage."""
    out, asked = [], []  # the steps asked in order, with their rows
    rank = draw(st.sampled_from([0, 0, 0, 1, None]))  # None: no hello
    if rank is not None:
        out.append(frame({"op": "hello", "rank": rank}))
    for _ in range(draw(st.integers(0, 8))):
        shape = draw(st.sampled_from(["op", "next", "next", "loss", "raw"]))
        if shape == "raw":
            out.append(draw(raw_frames()))
            continue
        if shape == "op":  # any op, any fields, any payload
            header = {"op": draw(_OPS)}
            for key in ("rank", "step", "rows", "nats", "status", "detail"):
                if draw(st.booleans()):
                    header[key] = draw(st.one_of(_field, st.integers(-1, 3)))
            payload = draw(st.one_of(
                st.just(b""), st.binary(max_size=64), st.integers(0, 9000).map(bytes),
                st.sampled_from([b"[" * 20_000, b"{}", b"[]", b"9" * 5000])))
        elif shape == "next":
            step = draw(mostly(st.just(len(asked)), st.one_of(st.integers(-1, 3), _field)))
            rows = draw(mostly(st.sampled_from(ROWS), st.one_of(st.integers(-1, 5), _field)))
            header = {"op": "next", "rank": draw(mostly(st.just(rank), _field)), "step": step,
                      "rows": rows}
            payload = b""
            if step == len(asked) and rows in ROWS and header["rank"] == rank == 0:
                asked.append(rows)  # served
        else:  # the losses of a step asked for (or of another), of the right size or not
            step = draw(mostly(st.sampled_from(range(len(asked))), st.integers(-1, 3))
                        if asked else st.integers(-1, 3))
            right = asked[step] * 32 * 4 if 0 <= step < len(asked) else 0
            size = draw(mostly(st.just(right), st.integers(0, 1100)))
            header, payload = {"op": "loss", "rank": 0, "step": step}, bytes(size)
        out.append(frame({**header, **({"payload": len(payload)} if payload else {})}, payload))
    return b"".join(out)


def converse(feeder: Feeder, stream: bytes) -> list[tuple[dict, bytes]]:
    """Send `stream` on one connection, then read every reply until the feeder hangs up."""
    sock = connect(feeder.path)
    with sock:
        sender = threading.Thread(target=_send_then_close, args=(sock, stream), daemon=True)
        sender.start()
        replies = read_all(sock)
        sender.join(10)
    return replies


def _send_then_close(sock: socket.socket, stream: bytes) -> None:
    with contextlib.suppress(OSError):  # the feeder may hang up before it is all sent
        sock.sendall(stream)
        sock.shutdown(socket.SHUT_WR)


def assert_sound(feeder: Feeder, replies: list[tuple[dict, bytes]]) -> None:
    """What holds after any conversation with a hostile harness."""
    state = feeder.state
    assert state.infra_error is None, state.infra_error  # the harness's fault, not ours
    assert len(state.problems) <= 50 and all(isinstance(p, str) and p for p in state.problems)
    handed = [(h, p) for h, p in replies if "rows" in h and p]
    assert len(handed) == len(state.served)  # every batch handed out is on the record
    rows = np.concatenate([s.rows for s in state.served.values()] or [np.array([], int)])
    assert len(set(rows.tolist())) == len(rows), "a stream row was handed out twice"
    for header, payload in replies:
        assert isinstance(header, dict)
        if "error" in header:
            assert isinstance(header["error"], str) and header["error"] and not payload


@PROPERTY
@given(stream=harness_messages())
@example(stream=frame({"op": "hello", "rank": 0}) + frame({"op": "loss", "rank": 0,
                                                            "step": float("inf")}))
@example(stream=frame({"op": "hello", "rank": float("inf")}))  # once blamed on the feeder
@example(stream=frame({"op": "hello", "rank": 0}) + frame({"op": "next", "rank": 0,
                                                            "step": -1, "rows": 2}))
@example(stream=frame({"op": "hello", "rank": 0}) + frame({"op": "probe", "rank": 0, "step": 0,
                                                            "nats": [10**400]}))
@example(stream=frame({"op": "hello", "rank": 0}) + frame({"op": "finish", "rank": 0},
                                                           b"[" * 100_000))
@example(stream=frame({"op": "hello", "rank": 0}) + prefix(DEEP))
def test_any_harness_messages_leave_the_feeder_sound(train, sockets, stream):
    feeder = new_feeder(train, sockets)
    with thread_errors() as died:
        try:
            replies = converse(feeder, stream)
        finally:
            feeder.close()
    assert not died, died
    assert_sound(feeder, replies)


@budget(20)
@given(steps=st.lists(st.integers(-2, 3), min_size=1, max_size=8),
       rows=st.sampled_from(ROWS), report=st.booleans())
@example(steps=[0, 0], rows=2, report=True)  # once: the same rows again, their loss replaced
@example(steps=[0, -1], rows=2, report=False)  # once: step -1 served the last step's rows
def test_no_step_is_served_twice_to_a_rank(train, sockets, steps, rows, report):
    """Rows trained on and then scored again would let a model learn what it is scored on."""
    out = [frame({"op": "hello", "rank": 0}), frame({"op": "ready", "rank": 0})]
    honest = []  # the steps a feeder may serve: each next one, from 0, once
    for step in steps:
        out.append(frame({"op": "next", "rank": 0, "step": step, "rows": rows}))
        if step == len(honest):
            honest.append(step)
        if report and step in honest:  # (a loss of a step never served ends the connection)
            losses = np.zeros((rows, 32), "<f4").tobytes()
            out.append(frame({"op": "loss", "rank": 0, "step": step, "payload": len(losses)},
                             losses))
    feeder = new_feeder(train, sockets)
    with thread_errors() as died:
        try:
            replies = converse(feeder, b"".join(out))
        finally:
            feeder.close()
    assert not died, died
    assert_sound(feeder, replies)
    handed = [h for h, p in replies if p]
    assert len(handed) == len(honest) == len(feeder.state.served)
    if report:
        assert all(s.nats == 0.0 for s in feeder.state.served.values())


@PROPERTY
@given(op=st.sampled_from(["finish", "loss", "next", "hello", "ready", "probe", "other"]),
       over=st.one_of(st.integers(1, 2**40), st.sampled_from([2**40, 2**63])))
@example(op="finish", over=2**40)
def test_an_announced_payload_over_its_kinds_limit_ends_the_connection_unread(train, sockets,
                                                                               op, over):
    limit = {"finish": MAX_FINISH_BYTES, "loss": 0}.get(op, MAX_CONTROL_BYTES)
    feeder = new_feeder(train, sockets)
    sock = connect(feeder.path)
    try:
        protocol.send(sock, {"op": "hello", "rank": 0})
        protocol.recv(sock)
        sock.sendall(frame({"op": op, "rank": 0, "step": 0, "payload": limit + over}))
        assert sock.recv(1) == b""  # hung up at once, without waiting for the body
    finally:
        sock.close()
        feeder.close()
    assert any("over its limit" in p for p in feeder.state.problems), feeder.state.problems
    assert feeder.state.infra_error is None and feeder.state.finishes == {}


# ---- the eval server (outside the eval sandbox) ------------------------------------------

VOCAB = 16


def eval_tasks() -> list[Task]:
    inputs = np.arange(16, dtype=np.int32).reshape(2, 8) % VOCAB
    return [Task("logits", "trained", inputs, targets=np.array([1, 2]), select_rows=[0, 1],
                 select_positions=[3, 5], tag="first"),
            Task("causality", "trained", inputs, causality={"positions": [2], "seed": 1},
                 tag="second")]


@st.composite
def eval_messages(draw) -> bytes:
    out = []
    for _ in range(draw(st.integers(0, 8))):
        shape = draw(st.sampled_from(["task", "result", "op", "raw", "hello"]))
        if shape == "raw":
            out.append(draw(raw_frames()))
        elif shape in ("task", "hello"):
            out.append(frame({"op": shape}))
        else:
            header = {"op": "result" if shape == "result" else draw(_OPS)}
            for key in ("task", "result", "detail"):
                if draw(st.booleans()):
                    header[key] = draw(st.one_of(_field, st.integers(0, 3), _json))
            payload = draw(st.one_of(st.just(b""), st.binary(max_size=64),
                                     st.just(bytes(2 * VOCAB * 4))))
            out.append(frame({**header, **({"payload": len(payload)} if payload else {})},
                             payload))
    return b"".join(out)


def talk_to_eval_server(root: Path, tasks: list[Task], stream: bytes
                        ) -> tuple[EvalServer, list, list[tuple[dict, bytes]]]:
    """(the server, the exceptions that ended any thread, the replies) after `stream`."""
    path = root / f"eval-{next(_counter)}.sock"
    with thread_errors() as died:
        server = EvalServer(path, {"vocab_size": VOCAB}, iter(tasks), VOCAB)
        try:
            sock = connect(path)
            with sock:
                sender = threading.Thread(target=_send_then_close, args=(sock, stream),
                                          daemon=True)
                sender.start()
                replies = read_all(sock)
                sender.join(10)
        finally:
            server.close()
    return server, died, replies


def test_an_honest_eval_exchange_is_answered(sockets):
    """The control of the property below: well-formed answers are kept."""
    stream = b"".join([frame({"op": "hello"}), frame({"op": "task"}),
                       frame({"op": "result", "task": 1, "payload": 2 * VOCAB * 4},
                             bytes(2 * VOCAB * 4)),
                       frame({"op": "task"}), frame({"op": "result", "task": 2,
                                                     "result": {"max_leak": 0.0}}),
                       frame({"op": "task"})])
    server, died, replies = talk_to_eval_server(sockets, eval_tasks(), stream)
    assert not died and server.problems == []
    assert [h.get("kind") for h, _ in replies[1:]] == ["logits", "causality", "done"]
    first, second = server.answers
    assert first.nats == pytest.approx([np.log(VOCAB)] * 2)  # zero logits: uniform
    assert second.result == {"max_leak": 0.0}


@PROPERTY
@given(stream=eval_messages())
@example(stream=frame({"op": "task"}) + frame({"op": "result", "task": 1,
                                               "payload": 2**40}))
@example(stream=frame({"op": "task"}) + frame({"op": "result", "task": [1]}))
@example(stream=prefix(DEEP))  # once a RecursionError that ended the server's thread
@example(stream=frame({"op": "task"}) + frame({"op": "result", "task": 1, "payload": 128},
                                              bytes(128)))
def test_any_eval_harness_messages_leave_the_eval_server_sound(sockets, stream):
    tasks = eval_tasks()
    server, died, replies = talk_to_eval_server(sockets, tasks, stream)
    assert not died, died
    handed = [h.get("task") for h, _ in replies if "kind" in h and h["kind"] != "done"]
    assert len(server.answers) <= len(handed) <= len(tasks)
    for answer in server.answers:  # only answers to tasks handed out, each at most once
        assert any(answer.task is task for task in tasks[:len(handed)])
        if answer.task.kind == "logits":
            assert answer.nats.shape == (2,)
        else:
            assert isinstance(answer.result, dict)
    assert len({id(a.task) for a in server.answers}) == len(server.answers)
    assert all(isinstance(p, str) for p in server.problems)
