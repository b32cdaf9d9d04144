"""The dashboard in a real browser: Debian's headless Chromium (skipped where it is absent;
`.ci/run` installs it)."""

from __future__ import annotations

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
