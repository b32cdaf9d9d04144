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


def test_the_command_line_loads_without_the_store_torch_or_the_chain():
    """Every `prism` start pays for what app.py imports: the store (sqlalchemy), torch and
    bittensor are imported by the commands that use them, so `--help`, `submit` and `check`
    do not wait for them (`prism --help` went from 1.6 s to 0.7 s on a 2-core host)."""
    heavy = ("sqlalchemy", "torch", "bittensor", "prism_challenge.storage")
    probe = ("import sys, prism_challenge.cli.app; "
             f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_bad_config_is_a_clean_error(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("intake:\n  port: -4\n")
    out = _prism("config", "--config", str(bad))
    assert out.returncode == 2
    assert "intake.port" in out.stderr
    assert "Traceback" not in out.stderr


def test_user_text_is_printed_literally_never_as_markup(tmp_path, capsys):
    """Bracketed text in messages (a `[axes]` table name, a miner's `[bold]` name) must show
    as written: rich would take it for markup and drop it."""
    import shutil
    from pathlib import Path

    import pytest
    import typer
    from rich.console import Console

    from prism_challenge.cli.common import fail
    from prism_challenge.miner.findings import Finding
    from prism_challenge.miner.render import findings_table

    bundle = tmp_path / "bundle"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "sandbox" / "tiny", bundle)
    (bundle / "prism.toml").write_text("axes = 3\n")
    check = _prism("check", str(bundle))
    assert check.returncode == 1
    assert ("FAIL bundle [BUNDLE_META]: prism.toml: 'axes' must be a table, e.g. [axes] "
            "followed by key = value lines") in " ".join(check.stdout.split())
    with pytest.raises(typer.Exit):
        fail("unknown key 'x'; the allowed keys are name, description and [axes] [/]")
    err = capsys.readouterr().err
    assert err == "error: unknown key 'x'; the allowed keys are name, description and [axes] [/]\n"
    console = Console(record=True, width=200)
    console.print(findings_table("prism check [bold]x[/]", [
        Finding("axes", "fail", "prism.toml [axes]: unknown axis 'heads'")]))
    text = console.export_text()
    assert "prism check [bold]x[/]" in text and "prism.toml [axes]: unknown axis" in text


def test_a_node_without_a_store_gets_no_store_from_the_registry_commands(tmp_path):
    """`prism program` reads: without a store it prints the empty registry's brief and
    creates nothing. `prism registry note` needs the node's registry: it says so in one line
    and creates nothing."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "prism_challenge.cli", *args],
                              capture_output=True, text=True, cwd=tmp_path)

    brief = run("program")
    assert brief.returncode == 0, brief.stderr
    assert "`prism.toml` under `[axes]`" in brief.stdout and "<!-- sha256 " in brief.stdout
    note = run("registry", "note", "H001", "x")
    assert note.returncode == 2
    assert note.stderr.strip() == (
        "error: no store at prism-data/prism.db: this node has no registry yet (start "
        "`prism validator`, or read a validator's brief with --url http://HOST:PORT)")
    assert list(tmp_path.iterdir()) == []


def test_the_readme_lists_every_command_of_prism_help():
    import re
    from pathlib import Path

    import typer.main

    from prism_challenge.cli.app import app

    commands = sorted(typer.main.get_command(app).commands)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = readme.split("`prism --help` lists them:", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"`([a-z-]+)`", listed)) == commands
