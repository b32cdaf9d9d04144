"""The commands in docs/miners.md work as written (a guide whose commands drift is a bug).

`prism check` and `prism eval` lines run verbatim in a scratch folder holding a copy of
`examples/`, with tiny settings from PRISM_CONFIG and the shared prepared data as the data
root (the 10 MB demo build is too slow for tests). The other `prism` lines (prepare-data,
submit, program) need a long build, a wallet or a node: for them the sub-command must exist
and every option the line uses must appear in its --help.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from miner_kit import EXAMPLES, GUIDE, ROOT, RUN, guide_commands, prism_in_process

from prism_challenge.bundle import Bundle
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.verification.replay import ReplayRecord

OPERATOR_GUIDE = ROOT / "docs" / "validators.md"
PORTING_GUIDE = ROOT / "docs" / "porting.md"


def test_guide_covers_the_whole_local_loop():
    subs = [c[1] for c in guide_commands()]
    for sub in ("prepare-data", "check", "eval", "submit", "program"):
        assert sub in subs, f"docs/miners.md has no `prism {sub}` command"
    operator = [c[1] for c in guide_commands(OPERATOR_GUIDE)]
    assert "prepare-data" in operator and "validator" in operator


@pytest.mark.parametrize("argv", [c for c in guide_commands() if c[1] not in RUN]
                         + guide_commands(OPERATOR_GUIDE), ids=lambda c: " ".join(c[:2]))
def test_guide_command_options_exist(argv):
    res = prism_in_process(argv[1], "--help")
    assert res.exit_code == 0, res.output
    for opt in (a.split("=", 1)[0] for a in argv[2:] if a.startswith("--")):
        assert opt in res.stdout, f"`{' '.join(argv)}`: {opt} is not an option any more"


def test_guide_check_and_eval_run_as_written(guide_run):
    folder, ran = guide_run
    for argv, res in ran:
        assert res.returncode == 0, f"{' '.join(argv)}\n{res.stdout}\n{res.stderr}"
    assert [a[1] for a, _ in ran] == ["check", "eval"]
    assert "PASS" in ran[0][1].stdout
    out = folder / ran[1][0][ran[1][0].index("--out") + 1]
    record = RunRecord.model_validate_json((out / "record.json").read_text())
    assert record.exit_reason == "ok" and record.consumed.rows == record.budget.rows
    assert record.axes.optimizers[0].cls == "AdamW"
    score = json.loads((out / "score.json").read_text())
    assert score["score"]["eligible"] and score["val_source"].startswith("the val split")
    assert (out / "learning_curve.png").is_file()
    # the baseline's replay reproduces it exactly on the CPU and agrees at every probe
    assert score["verification"]["passed"], score["verification"]
    replay = ReplayRecord.model_validate_json((out / "replay.json").read_text())
    assert replay.batch_max_rel_diff == 0.0
    assert replay.probes.compared > 0 and replay.probes.mismatched == 0
    assert replay.snapshots.compared > 0 and replay.snapshots.mismatched == 0


def test_guide_says_how_a_new_shell_gets_the_prism_command():
    """`prism` is a script of the project's virtual environment: the guide names the make
    target that creates it and the activation a new shell needs, before its first command."""
    text = GUIDE.read_text()
    first = text.index("prism prepare-data --source demo")
    setup = text[text.index("## The local loop"):first]
    assert "make setup" in setup and "source .venv/bin/activate" in setup
    assert "(or call .venv/bin/prism)" in setup
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^VENV\s+\?= \.venv$", makefile, flags=re.M)
    assert re.search(r"^setup: ", makefile, flags=re.M)
    assert 'prism = "prism_challenge.cli.app:main"' in (ROOT / "pyproject.toml").read_text()


def test_guide_example_table_matches_the_examples():
    rows = re.findall(r"^\| `(\w+)` \|.*\| (`[^|]*`) \|$", GUIDE.read_text(), flags=re.M)
    assert {name for name, _ in rows} == {p.name for p in EXAMPLES.iterdir() if p.is_dir()}
    for name, cell in rows:
        documented = dict(kv.split("=") for kv in cell.strip("`").split(", "))
        declared = {k: str(v) for k, v in Bundle.from_dir(EXAMPLES / name).meta.axes.items()}
        assert documented == declared, name


def test_porting_guide_commands_run_as_written(tiny_config, prepared_data, tmp_path):
    """Both ported bundles pass `prism eval` (the static gates, then eligible and verified)."""
    shutil.copytree(EXAMPLES, tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PRISM_CONFIG": str(tiny_config), "PRISM_DATA__ROOT": str(prepared_data)}
    commands = guide_commands(PORTING_GUIDE)
    assert [(c[1], c[2]) for c in commands] == [
        (sub, f"examples/{name}") for name in ("nanogpt_port", "autoresearch_port")
        for sub in ("eval",)]
    optimizers = {}
    for argv in commands:
        res = prism_in_process(*argv[1:], cwd=tmp_path, env=env)
        assert res.returncode == 0, f"{' '.join(argv)}\n{res.stdout}\n{res.stderr}"
        out = tmp_path / argv[argv.index("--out") + 1]
        record = RunRecord.model_validate_json((out / "record.json").read_text())
        assert record.exit_reason == "ok" and record.consumed.rows == record.budget.rows
        assert record.telemetry, "the port keeps its ctx.log telemetry"
        assert json.loads((out / "score.json").read_text())["score"]["eligible"]
        assert "ELIGIBLE: a validator would rank this run" in res.stdout
        optimizers[argv[2]] = record.axes.optimizers[0].cls
    assert optimizers == {"examples/nanogpt_port": "AdamW", "examples/autoresearch_port": "Muon"}
