import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import prism_in_process
from verified_kit import mark_verified
from weights_entries import HOTKEYS

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.scoring import ScoreResult, record_score
from prism_challenge.storage import Store
from prism_challenge.storage.tables import Score, Submission

ROOT = Path(__file__).resolve().parents[2]


def _result(bpb: float, eligible: bool = True) -> ScoreResult:
    return ScoreResult(
        bpb=bpb, prequential_bpb=bpb, uniform_bpb=12.0, tail_bpb=bpb, heldout_delta=2.0,
        gap=0.0, penalty=0.0, eligible=eligible, reasons=[] if eligible else ["audit: x"],
        notes=[], unconsumed_tokens=0, exit_reason="ok",
    )


@pytest.fixture
def node(tmp_path):
    """A config, a store with three scored submissions and a metagraph without HOTKEYS[2]."""
    db = tmp_path / "prism.db"
    store = Store(f"sqlite:///{db}")
    with store.session() as s:
        for i, (hotkey, bpb, ok) in enumerate(
            [(HOTKEYS[1], 2.0, True), (HOTKEYS[2], 1.0, True), (HOTKEYS[3], 1.5, True),
             (HOTKEYS[4], 0.5, False)]
        ):
            row = Submission(digest=f"{i:064x}", hotkey=hotkey, status="running",
                             accepted_at=float(i), updated_at=float(i), bundle=b"x")
            s.add(row)
            s.flush()
            record_score(s, row.id, _result(bpb, ok), "demo", now=float(i))
            mark_verified(s, row.id)
    store.close()
    mg = tmp_path / "metagraph.json"
    mg.write_text(json.dumps({"hotkeys": [HOTKEYS[0], HOTKEYS[1], HOTKEYS[3]], "block": 42}))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"storage:\n  url: sqlite:///{db}\nchain:\n  metagraph_file: {mg}\n"
        "weights:\n  winner_share: 0.75\n  burn_uid: 0\n"
    )
    return cfg


def _run(*args: str):
    """`python ARGS`: `-m prism_challenge.cli ...` through typer's CliRunner in this process
    (the same command, without a second start of the CLI), a script in a process of its own.
    `returncode` is the exit code either way."""
    if args[:2] != ("-m", "prism_challenge.cli"):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT)
    return prism_in_process(*args[2:])


def test_json_plan(node):
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(node), "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    # HOTKEYS[2] (best bpb) is deregistered: the lead goes to HOTKEYS[3] (uid 2); the
    # unassigned quarter burns on uid 0: 0.25 / 0.75 * 65535 = 21845.
    assert (plan["uids"], plan["weights_u16"]) == ([0, 2], [21845, 65535])
    assert plan["block"] == 42 and plan["corpus"] == "demo" and plan["dry_run"] is True
    assert [r["hotkey"] for r in plan["rows"]] == [None, HOTKEYS[3]]
    assert plan["rows"][1]["bpb"] == 1.5
    assert plan["excluded"][0]["hotkey"] == HOTKEYS[2]


def test_a_corpus_is_a_key_or_a_name_and_an_unknown_one_is_refused(node, tmp_path):
    """`--corpus` takes a competition key or a corpus name (its latest key); one no score is
    kept under is refused before any plan, rather than planning (and setting) a burn."""
    store = Store(f"sqlite:///{tmp_path / 'prism.db'}")
    with store.session() as s:
        for row in s.query(Score):
            row.corpus = "demo@0123456789ab"
    store.close()
    for asked in ("demo", "demo@0123456789ab"):
        out = _run("-m", "prism_challenge.cli", "weights", "--config", str(node), "--json",
                   "--corpus", asked)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["corpus"] == "demo@0123456789ab"
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(node), "--corpus",
               "fineweb-edu")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no score is kept under corpus 'fineweb-edu'" in out.stderr
    assert "demo@0123456789ab" in out.stderr


def test_table_and_script_wrapper_agree(node):
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(node))
    assert out.returncode == 0, out.stderr
    assert "DRY RUN" in out.stdout and "65535" in out.stdout and "21845" in out.stdout
    assert f"excluded: {HOTKEYS[2]}" in out.stdout
    script = _run("scripts/get_weights.py", "--config", str(node), "--json")
    assert script.returncode == 0, script.stderr
    assert json.loads(script.stdout)["weights_u16"] == [21845, 65535]


def test_set_is_refused_while_dry_run(node):
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(node), "--set")
    assert out.returncode == 2
    assert "weights.dry_run is true" in out.stderr and "Traceback" not in out.stderr
    live = node.parent / "live.yaml"
    live.write_text(node.read_text().replace("burn_uid: 0", "burn_uid: 0\n  dry_run: false"))
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(live), "--set")
    assert out.returncode == 2 and "chain.mode is 'local'" in out.stderr


def test_missing_store_is_a_clean_error_and_creates_nothing(tmp_path):
    cfg = tmp_path / "c.yaml"
    db = tmp_path / "none" / "prism.db"
    cfg.write_text(f"storage:\n  url: sqlite:///{db}\n")
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(cfg))
    assert out.returncode == 2 and "no store at" in out.stderr
    assert not db.parent.exists()


@pytest.mark.parametrize("url, why", [
    ("postgres://u:hunter2@127.0.0.1/x", "NoSuchModuleError"),  # the dialect is postgresql
    ("postgresql+psycopg://u:hunter2@127.0.0.1:1/x", "the database cannot be opened"),
])
def test_an_unusable_store_url_is_one_line_with_the_password_hidden(tmp_path, url, why):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"storage:\n  url: {url}\n")
    out = _run("-m", "prism_challenge.cli", "weights", "--config", str(cfg))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert why in out.stderr and "u:***@127.0.0.1" in out.stderr
    assert "hunter2" not in out.stderr + out.stdout


def test_bad_research_credits_file(node, tmp_path):
    bad = tmp_path / "credit.json"
    bad.write_text(json.dumps({HOTKEYS[1]: -3}))
    out = _run("-m", "prism_challenge.cli", "weights", "-c", str(node),
               "--research-credits", str(bad))
    assert out.returncode == 2 and "research credits must be" in out.stderr


def test_research_credits_file_feeds_the_research_share(node, tmp_path):
    live = node.parent / "research.yaml"
    live.write_text(node.read_text().replace("burn_uid: 0", "burn_uid: 0\n  research_share: 0.25"))
    credit = tmp_path / "credit.json"
    credit.write_text(json.dumps({HOTKEYS[1]: 1.0}))
    out = _run("-m", "prism_challenge.cli", "weights", "-c", str(live), "--json",
               "--research-credits", str(credit))
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert (plan["uids"], plan["weights_u16"]) == ([1, 2], [21845, 65535])


def test_settings_refuse_inverted_gap_thresholds():
    with pytest.raises(ValueError, match="gap_zero"):
        ScoringSettings(gap_penalty_start=0.5, gap_zero=0.5)


def test_research_share_without_a_file_reads_the_registry_credits(node):
    cfg = node.parent / "registry.yaml"
    cfg.write_text(node.read_text().replace("burn_uid: 0", "burn_uid: 0\n  research_share: 0.25"))
    out = _run("-m", "prism_challenge.cli", "weights", "-c", str(cfg), "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    # A fresh registry has credited nobody, so the research quarter burns with the rest.
    assert (plan["uids"], plan["weights_u16"]) == ([0, 2], [21845, 65535])
    assert plan["rows"][0]["reasons"] == ["burn: unassigned share 0.25"]


def test_showing_weights_in_local_mode_writes_no_local_chain(node, tmp_path):
    """A read-only command creates nothing: no ledger file, one line saying so instead."""
    ledger = tmp_path / "ledger" / "local-chain.db"
    cfg = node.parent / "ledger.yaml"
    cfg.write_text(node.read_text().replace(
        "chain:\n", f"chain:\n  local_ledger: {ledger}\n"))
    out = _run("-m", "prism_challenge.cli", "weights", "-c", str(cfg), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["weights_u16"] == [21845, 65535]
    assert f"no local chain yet ({ledger} does not exist" in out.stderr
    assert not ledger.parent.exists()
