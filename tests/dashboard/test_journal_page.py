"""The research journal page and the overview's research credit, over real HTTP."""

from __future__ import annotations

import httpx
from dashboard_html import parse, table
from dashboard_store import HOTKEYS
from sqlalchemy import event

from prism_challenge.config.settings import Settings
from prism_challenge.registry import Observation, Registry
from prism_challenge.registry.cycle import Answers, plan_cycle

EVIL = "<script>document.title='pwned'</script>"
NEW = {"spec": {"kind": "single", "axis": "position", "treatment": "alibi", "control": "rope"},
       "importance": 0.5}


def _observe(reg, i, hotkey, opt, bpb):
    reg.observe(Observation(
        submission_id=i, hotkey=hotkey, digest=f"{i:064x}", bpb=bpb, eligible=True,
        accepted_at=1000.0 + i,
        measured={"param_count": 5_000_000, "layer_count": 4, "batch_size": 16,
                  "module_census": {"LayerNorm": 2},
                  "optimizers": [{"cls": opt, "hparams": {"lr": 3e-4}}]}))


def _registry(store) -> Registry:
    reg = Registry(store, Settings(registry={"cycle_scored": 4}))
    for i in range(4):
        _observe(reg, i + 1, HOTKEYS[i], "muon" if i % 2 else "adamw", 2.0 - 0.03 * (i % 2))
    reg.record(lambda st: plan_cycle(
        st, Answers(hypotheses=[NEW, {"spec": {"kind": "single", "axis": EVIL}}]), reg.cfg,
        trigger="scored", now=1_700_000_000.0, model="m"))
    reg.note("H001", '<img src=x onerror="alert(1)"> look at 1e8 params')
    return reg


def test_journal_page_shows_cycles_credit_and_notes(store, serve):
    _registry(store)
    html = httpx.get(f"{serve()}/dashboard/journal", timeout=10).text
    credit = table(html, "credit")
    assert credit[0] == ["hotkey", "points", "share of the research pot", "runs paid", "cap"]
    assert [row[1:4] for row in credit[1:]] == [["1.00", "25.00%", "1"]] * 4
    notes = table(html, "notes")
    assert notes[1][:2] == ["H001", "optimizer=muon gives lower bpb than optimizer=adamw"]
    assert notes[1][2] == '<img src=x onerror="alert(1)"> look at 1e8 params'
    moved = table(html, "journal")
    assert moved[0] == ["claim", "statement", "mean θ", "contrasts", "status", "evidence runs"]
    assert moved[1][0] == "H001" and moved[1][3] == "0 → 2"
    assert moved[1][5] == "win #2 vs #1; win #4 vs #3"
    assert 'href="/dashboard/submissions/2"' in html
    assert "accepted" in html and "H009" in html and "refused" in html
    assert "2 entries." in html and 'href="/v1/journal.md"' in html
    assert EVIL not in html and "&lt;script&gt;" in html
    elements = parse(html).elements
    assert "script" not in elements and "img" not in elements


def test_journal_page_pages_and_bounds(store, serve):
    reg = _registry(store)
    for k in range(25):
        reg.note("H002", f"note {k}")
    url = serve()
    first = httpx.get(f"{url}/dashboard/journal", timeout=10).text
    older = httpx.get(f"{url}/dashboard/journal?offset=20", timeout=10).text
    assert 'href="/dashboard/journal?offset=20"' in first and "newer" not in first
    assert 'href="/dashboard/journal?offset=0"' in older and "older" not in older
    first, older = (page.split('id="journal"')[1] for page in (first, older))
    assert "note 24" in first and "note 24" not in older and "Research cycle 1" in older
    for bad in ("-1", "x", str(10**10)):
        assert httpx.get(f"{url}/dashboard/journal?offset={bad}", timeout=10).status_code == 422


def test_overview_shows_the_research_credit_in_one_transaction(store, serve):
    _registry(store)
    url = serve()
    begun: list[int] = []
    event.listen(store.engine, "begin", lambda _conn: begun.append(1))
    html = httpx.get(url, timeout=10).text
    journal = httpx.get(f"{url}/dashboard/journal", timeout=10)
    assert len(begun) == 2 and journal.status_code == 200  # one per page
    shares = table(html, "registry")
    assert shares[0] == ["hotkey", "share of the research pot"]
    assert [r[1] for r in shares[1:]] == ["25.00%"] * 4
    assert 'href="/dashboard/journal"' in html


def test_journal_page_survives_a_ledger_it_cannot_replay(store, serve):
    from prism_challenge.storage.tables import RegistryEvent

    _registry(store)
    with store.session() as s:
        s.add(RegistryEvent(key="x", kind="bogus", payload={}, created_at=1.0))
    r = httpx.get(f"{serve()}/dashboard/journal", timeout=10)
    assert r.status_code == 200
    assert "registry state unavailable: unknown ledger event &#x27;bogus&#x27;" in r.text
    assert "Research cycle 1" in r.text
