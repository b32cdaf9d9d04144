"""The dashboard in a real browser: Debian's headless Chromium (skipped where it is absent;
`.ci/run` installs it)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest
from dashboard_store import populate

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1280,900",
]


def chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=90, check=True,
    )


def test_overview_renders_and_runs_no_miner_script(store, serve, tmp_path):
    populate(store)
    dom = chromium(tmp_path, "--dump-dom", f"{serve()}/?corpus=demo").stdout
    # The leader's name is a script that would retitle the page if the browser ran it.
    assert "<title>PRISM validator</title>" in dom and "pwned</title>" not in dom
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    for text in ("Leaderboard", "Queue", "Weights plan", "Research registry", "unreviewed",
                 "demo corpus: development scores only", "1.5000"):
        assert text in dom


def test_submission_page_screenshot_shows_the_chart(store, serve, tmp_path):
    from matplotlib.image import imread

    ids = populate(store)
    url = f"{serve()}/dashboard/submissions/{ids['leader']}"
    dom = chromium(tmp_path, "--dump-dom", url).stdout
    assert dom.count("<polyline") == 2 and "learning curve" in dom
    shot = tmp_path / "submission.png"
    chromium(tmp_path, f"--screenshot={shot}", url)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 900)
    pixels = imread(shot)[..., :3]
    # The dark header band is painted, and the chart's dark-blue running-bpb line is there.
    assert pixels[5, 5].max() < 0.2
    red, blue = pixels[..., 0], pixels[..., 2]
    dark_blue = (abs(red - 0x1F / 255) < 0.05) & (abs(blue - 0x93 / 255) < 0.05)
    assert dark_blue.sum() > 200


def test_rejected_scored_and_verified_submissions_show_what_miners_need(store, serve, tmp_path):
    """A rejected bundle (two violations, each on its own line), a scored one with an axis
    flag and its training output, and the verified leader: the pages a browser renders show
    the reasons, the held-out SE, the weights' explanation and the axis flag."""
    from dashboard_store import HOTKEYS, add_run, add_submission, make_record

    ids = populate(store)
    violations = ("AST policy:\nAST-IMPORT training.py:2: import of 'socket' is not allowed\n"
                  "AST-CALL training.py:9: 'torch.load' is not allowed")
    rejected = add_submission(store, 8, HOTKEYS[2], name="rejected-one", reviewed="pending",
                              path=("rejected",), reason=violations)
    flag = ('gates passed (LLM review disabled)\naxis flag: declared axis optimizer = "adamw" '
            "but the code never names adamw: construct that optimiser in train(ctx)")
    with store.session() as s:
        from prism_challenge.storage.tables import Submission
        s.get(Submission, ids["second"]).reason = flag
    add_run(store, ids["second"], 1, make_record(f"{2:064x}", train_output=(
        "PRINTED step 0 <b>not bold</b>\nPRINTED step 1\n")), created_at=1_700_000_600.0)
    base = serve()
    dom = chromium(tmp_path, "--dump-dom", f"{base}/dashboard/submissions/{rejected}").stdout
    assert "rejected-one" in dom and "not reviewed (refused before the LLM review)" in dom
    # each violation on its own line (the reason keeps its newlines: white-space pre-line)
    assert ("AST-IMPORT training.py:2: import of 'socket' is not allowed\n"
            "AST-CALL training.py:9: 'torch.load' is not allowed") in dom
    dom = chromium(tmp_path, "--dump-dom", f"{base}/dashboard/submissions/{ids['second']}").stdout
    assert 'axis flag: declared axis optimizer = "adamw" but the code never names adamw' in dom
    assert "PRINTED step 0 &lt;b&gt;not bold&lt;/b&gt;\nPRINTED step 1" in dom
    assert "heldout_se</th><td>0.020000</td>" in dom  # the held-out SE, six decimals
    dom = chromium(tmp_path, "--dump-dom", f"{base}/?corpus=demo").stdout
    weights = dom[dom.index('id="weights"'):]
    assert "dry run: nothing is set on-chain" in weights and "<th>why</th>" in weights
    why = re.findall(r'<td><span class="reason">([^<]+)</span></td></tr>', weights)
    assert why and all(w.strip() for w in why), weights[:3000]
    shot = tmp_path / "second.png"
    chromium(tmp_path, f"--screenshot={shot}", f"{base}/dashboard/submissions/{ids['second']}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert struct.unpack(">II", data[16:24]) == (1280, 900)
