import subprocess
import sys

from prism_challenge import __version__


def _prism(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prism_challenge.cli", *args], capture_output=True, text=True
    )


def test_version():
    out = _prism("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"prism {__version__}"


def test_help_lists_commands():
    out = _prism("--help")
    assert out.returncode == 0
    assert "config" in out.stdout


def test_bad_config_is_a_clean_error(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("intake:\n  port: -4\n")
    out = _prism("config", "--config", str(bad))
    assert out.returncode == 2
    assert "intake.port" in out.stderr
    assert "Traceback" not in out.stderr
