"""The README's first command, on tiny settings: validator + prism submit as real processes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from validator_kit import ROOT, TINY


def test_demo_scores_two_miners_and_prints_the_plan(tiny_config, tmp_path):
    work = tmp_path / "demo"
    out = subprocess.run(
        [sys.executable, "-m", "prism_challenge.cli", "demo", "--config", str(tiny_config()),
         "--work", str(work), "--bundle", str(TINY), "--bundle", str(ROOT / "examples/baseline")],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "demo finished: 2/2 submissions scored" in out.stdout
    assert "DRY RUN" in out.stdout and "leader" in out.stdout
    assert "validator: stopped (exit status 0)" in out.stdout
    db = sqlite3.connect(work / "prism.db")
    statuses = db.execute(
        "select status, attempts, reviewed from submissions order by id").fetchall()
    assert statuses == [("scored", 1, "unreviewed"), ("scored", 1, "unreviewed")]
    assert db.execute("select count(*) from scores").fetchone() == (2,)
    assert db.execute("select count(*) from run_records").fetchone() == (2,)
    # every scored submission reached the research registry's ledger
    assert db.execute("select count(*) from registry_events where key like 'obs:%'"
                      ).fetchone() == (2,)
    log = (work / "validator.log").read_text()
    assert "received SIGTERM: stopping" in log
