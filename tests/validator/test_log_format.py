"""`prism validator --log-format`: JSON lines for machines, rich text for a terminal."""

from __future__ import annotations

import json
import logging

import pytest

from prism_challenge.cli.validator_cmd import setup_logging


@pytest.fixture
def stderr(capsys):
    """stderr captured (not a terminal); the root logger is restored afterwards."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield capsys
    root.handlers[:], root.level = saved[0], saved[1]


@pytest.mark.parametrize("fmt", ["auto", "json"])
def test_json_lines_off_a_terminal(stderr, fmt):
    setup_logging(log_format=fmt)
    log = logging.getLogger("prism.validator")
    log.info('submission %s: "quoted"\nsecond line', 7)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = (json.loads(ln) for ln in stderr.readouterr().err.splitlines())
    assert (first["level"], first["logger"]) == ("info", "prism.validator")
    assert first["msg"] == 'submission 7: "quoted"\nsecond line'
    assert isinstance(first["ts"], float) and "exc" not in first
    assert second["level"] == "error" and "ValueError: boom" in second["exc"]


def test_text_format_is_rich(stderr):
    setup_logging(log_format="text")
    (handler,) = logging.getLogger().handlers
    assert type(handler).__name__ == "RichHandler"
