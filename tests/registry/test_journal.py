"""The journal over HTTP (JSON paged with bounds, markdown) and operator notes through
`prism registry note` (real uvicorn server, real SQLite, the real CLI)."""

from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.server import ApiServer
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.cli.app import app
from prism_challenge.config.settings import Settings
from prism_challenge.registry import Registry
from prism_challenge.registry.cycle import Answers, plan_cycle, plan_failure
from prism_challenge.storage import Store
from prism_challenge.storage.tables import RegistryEvent
from prism_challenge.validator.app import create_app
from tests.registry.conftest import obs

ALIBI = {"spec": {"kind": "single", "axis": "position", "treatment": "alibi",
                  "control": "rope"}, "importance": 0.5}
EVIL = {"spec": {"kind": "single", "axis": "<script>x</script>", "treatment": "a`](evil)",
                 "control": "b"}, "importance": 0.5}


def _journal(tmp_path) -> tuple[str, Path, Registry]:
    url = f"sqlite:///{tmp_path / 'j.db'}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"storage:\n  url: {url}\nregistry:\n  cycle_scored: 4\n")
    settings = Settings(storage={"url": url}, registry={"cycle_scored": 4})
    reg = Registry(Store(url), settings)
    for i in range(4):
        reg.observe(obs(i, 2.0 - 0.03 * (i % 2), opt="muon" if i % 2 else "adamw"))
    cfg_r = reg.cfg
    reg.record(lambda st: plan_failure(st, "timeout after 60s", trigger="startup", now=10.0))
    reg.record(lambda st: plan_cycle(st, Answers(hypotheses=[ALIBI, EVIL]), cfg_r,
                                     trigger="startup", now=20.0, model="m"))
    for i in range(4, 8):
        reg.observe(obs(i, 2.0 - 0.03 * (i % 2), opt="muon" if i % 2 else "adamw"))
    reg.record(lambda st: plan_cycle(st, Answers(hypotheses=[ALIBI]), cfg_r, trigger="scored",
                                     now=30.0, model="m"))
    return url, cfg, reg


@pytest.fixture(scope="module")
def journal(tmp_path_factory) -> tuple[str, Path, Registry]:
    """One journal for the tests that only read it."""
    url, cfg, reg = _journal(tmp_path_factory.mktemp("journal"))
    yield url, cfg, reg
    reg.store.close()


def test_journal_json_is_paged_newest_first_with_bounded_params(journal):
    url, _, reg = journal
    settings = Settings(storage={"url": url})
    deps = ApiDeps(settings=settings, store=reg.store, metagraph=StaticMetagraph.of([]))
    with ApiServer(create_app(deps)) as server, httpx.Client(base_url=server.url) as http:
        first = http.get("/v1/journal", params={"limit": 2}).json()
        rest = http.get("/v1/journal", params={"offset": 2, "limit": 2}).json()
        default = http.get("/v1/journal").json()
        bad = [http.get("/v1/journal", params=p).status_code for p in (
            {"limit": 0}, {"limit": 101}, {"offset": -1}, {"limit": "x"}, {"offset": 10**10})]
        md = http.get("/v1/journal.md")
        bad_md = http.get("/v1/journal.md", params={"limit": 1000}).status_code
    assert (first["total"], first["offset"], first["limit"]) == (3, 0, 2)
    assert [e["n"] for e in first["entries"]] == [3, 2]
    assert [e["n"] for e in rest["entries"]] == [1] and default["limit"] == 20
    assert [e["kind"] for e in default["entries"]] == ["cycle", "cycle", "cycle_failed"]
    assert bad == [422] * 5 and bad_md == 422
    second, first_cycle, failed = default["entries"]
    assert failed["error"] == "timeout after 60s" and failed["trigger"] == "startup"
    assert [v["accepted"] for v in first_cycle["proposed"]] == ["H009", None]
    assert first_cycle["proposed"][1]["reason"] == "axes: unknown axis '<script>x</script>'"
    assert second["proposed"][0]["reason"] == "duplicate: single|position|alibi|rope"
    moved = {m["id"]: m for m in second["moved"]}
    assert moved["H001"]["contrasts"] == [2, 4] and moved["H001"]["mean"][1] > 0.5
    assert moved["H001"]["runs"] == [{"at": 6, "outcome": "win", "submissions": [5, 4]},
                                     {"at": 8, "outcome": "win", "submissions": [7, 6]}]
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    text = md.text
    assert "### Research cycle 2 (after 8 scored" in text
    assert "- accepted as H009: `" in text
    assert "win: [#5](/dashboard/submissions/5) vs [#4](/dashboard/submissions/4)" in text
    assert "### Research cycle failed" in text and "`timeout after 60s`" in text
    # LLM text stays inside one code span: its backtick cannot open a link
    assert "a'](evil)" in text and "a`](evil)" not in text


def test_operator_notes_reach_the_graph_and_the_journal(tmp_path):
    url, cfg, reg = _journal(tmp_path)
    runner = CliRunner()
    out = runner.invoke(app, ["registry", "note", "H001", "[red]check[/] muon on 1e8 params",
                              "-c", str(cfg)])
    assert out.exit_code == 0, out.output
    assert out.output == "noted on H001 (journal entry 4): [red]check[/] muon on 1e8 params\n"
    node = next(n for n in reg.theory_graph()["nodes"] if n["id"] == "H001")
    assert [n["text"] for n in node["notes"]] == ["[red]check[/] muon on 1e8 params"]
    assert node["notes"][0]["at"] == 8
    entry = reg.journal(limit=1)[1][0]
    assert entry["kind"] == "note" and entry["hypothesis"] == "H001"
    with reg.store.session() as s:
        events = s.execute(select(func.count()).select_from(RegistryEvent)).scalar()
    for args, why in [
        (["H999", "x"], "note refused: unknown hypothesis 'H999'"),
        (["H001", "   "], "note refused: the text must hold 1 to 500 characters"),
        (["H001", "x" * 501], "note refused: the text must hold 1 to 500 characters"),
        (["H001", "two\nlines"], "note refused: the text must be one line"),
    ]:
        bad = runner.invoke(app, ["registry", "note", *args, "-c", str(cfg)])
        assert bad.exit_code == 2 and why in bad.output
    with reg.store.session() as s:
        assert s.execute(select(func.count()).select_from(RegistryEvent)).scalar() == events
    assert reg.replay().model_dump_json() == reg.state().model_dump_json()


@pytest.mark.parametrize("limit", [1, 100])
def test_journal_limits_are_honoured(journal, limit):
    _, _, reg = journal
    total, entries = reg.journal(limit=limit)
    assert total == 3 and len(entries) == min(limit, 3)
