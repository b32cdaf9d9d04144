"""benchmarks/score_noise.py measures the shape it is asked for: the test budget by default,
`Settings()`'s defaults with `--demo`, and a config file's settings as they are with `--config`
(how an operator with a GPU measures the production shape)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from prism_challenge.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "score_noise.py"
PRODUCTION_SHAPE = """\
challenge:
  seq_len: 1024
  token_budget: 1000013824
  deadline_s: 4800
sandbox:
  backend: docker
  nproc_per_node: 8
scoring:
  heldout_positions: 32768
  heldout_cuts_per_row: 8
  gap_penalty_start: 0.7
  gap_zero: 1.2
"""


@pytest.fixture(scope="module")
def noise():
    spec = importlib.util.spec_from_file_location("score_noise_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shape(settings: Settings) -> tuple[int, int, int, int]:
    c, sc = settings.challenge, settings.scoring
    return c.seq_len, c.token_budget, sc.heldout_positions, sc.heldout_cuts_per_row


def test_the_default_is_the_test_budget_with_more_baseline_rounds(noise):
    args = noise.parse([])
    assert _shape(noise.bench_settings(args)) == (32, 3072, 384, 4)
    assert (args.rounds, args.other_rounds) == (20, 3)
    assert noise.parse(["--smoke"]).rounds == 3


def test_demo_is_the_default_settings_shape(noise):
    settings = noise.bench_settings(noise.parse(["--demo"]))
    assert _shape(settings) == _shape(Settings()) == (128, 294_912, 1536, 8)


def test_config_takes_the_files_settings_as_they_are(noise, tmp_path):
    path = tmp_path / "production.yaml"
    path.write_text(PRODUCTION_SHAPE)
    settings = noise.bench_settings(noise.parse(["--config", str(path), "--rounds", "25"]))
    assert _shape(settings) == (1024, 1_000_013_824, 32768, 8)
    assert (settings.sandbox.backend, settings.sandbox.nproc_per_node) == ("docker", 8)
    assert (settings.scoring.gap_penalty_start, settings.scoring.gap_zero) == (0.7, 1.2)


def test_a_missing_config_is_one_line_naming_the_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    done = subprocess.run([sys.executable, str(SCRIPT), "--config", str(missing)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"score_noise: {missing}: config file not found (pass a config YAML such as "
        "config.example.yaml)"]


@pytest.mark.parametrize("argv", [["--rounds", "-1"], ["--demo", "--config", "x.yaml"]])
def test_bad_flags_are_refused(noise, argv):
    with pytest.raises(SystemExit) as exc:
        noise.parse(argv)
    assert exc.value.code == 2
