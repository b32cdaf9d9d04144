"""The dashboard over real HTTP: values, order, escaping, limits, bad input, store reads."""

from __future__ import annotations

import re

import httpx
from dashboard_html import parse, table
from dashboard_store import (
    EVIL_NAME,
    EVIL_REASON,
    HOTKEYS,
    add_run,
    add_submission,
    make_record,
    populate,
    score,
)
from sqlalchemy import event

from prism_challenge.config.settings import Settings
from prism_challenge.registry import Registry
from prism_challenge.sandbox.record import TelemetryPoint


def short(hotkey: str) -> str:
    return f"{hotkey[:6]}…{hotkey[-6:]}"


def get(url: str) -> httpx.Response:
    r = httpx.get(url, timeout=10)
    assert r.headers["content-type"].startswith(("text/html", "application/json"))
    return r


def test_overview_of_the_demo_corpus(store, serve):
    ids = populate(store)
    html = get(f"{serve()}/?corpus=demo").text
    assert table(html, "leaderboard") == [
        ["rank", "submission", "hotkey", "bpb", "held-out ± SE", "gap (bound)", "held-out Δ",
         "accepted", "review"],
        ["1 ★", EVIL_NAME, short(HOTKEYS[0]), "1.5000", "1.2500 ± 0.0200", "0.0100 (-0.0300)",
         "0.7500", "2023-11-14 22:13:21 UTC", "unreviewed"],
        ["2", "second-best", short(HOTKEYS[1]), "2.0000", "1.2500 ± 0.0200", "0.0100 (-0.0300)",
         "0.7500", "2023-11-14 22:13:22 UTC", "reviewed"],
    ]
    assert "dethrone margin 0.50% + 2 SE of the paired difference" in html
    assert table(html, "leaderboard", 1) == [
        ["submission", "hotkey", "bpb", "reason"],
        ["cheat", short(HOTKEYS[2]), "0.1000", EVIL_REASON],
    ]
    assert "demo corpus: development scores only" in html
    assert 'href="/?corpus=fineweb-edu"' in html
    assert f'href="/dashboard/submissions/{ids["leader"]}"' in html
    weights = table(html, "weights")
    assert weights[1] == [  # uid 0 leads and is the burn uid: the unpaid research share
        "0", short(HOTKEYS[0]), "1.0000", "65535", "1.5000",
        f"leader: submission {ids['leader']} bpb 1.500000 on demo (scored without LLM review)"
        "; burn: unassigned share 0.1",
    ]
    assert "dry run: nothing is set on-chain" in html


def test_miner_strings_are_escaped(store, serve):
    populate(store)
    html = get(f"{serve()}/?corpus=demo").text
    assert EVIL_NAME not in html and "<img" not in html
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; co" in html
    elements = parse(html).elements
    assert "script" not in elements and "img" not in elements


def test_queue_lists_open_submissions_first_then_the_latest_final_ones(store, serve):
    ids = populate(store)
    html = get(serve()).text
    rows = table(html, "queue")
    assert [int(r[0]) for r in rows[1:]] == [
        ids["waiting"], ids["held"], ids["web"], ids["cheat"], ids["second"], ids["leader"],
        ids["failed"],
    ]
    by_id = {int(r[0]): r for r in rows[1:]}
    assert by_id[ids["held"]][3:6] == ["received", "0", "LLM reviewer unreachable; retrying"]
    assert by_id[ids["failed"]][3:6] == ["failed", "3", EVIL_REASON]
    assert by_id[ids["waiting"]][1:4] == ["waiting", short(HOTKEYS[1]), "queued"]
    counts = re.sub(r"<[^>]+>", "", html.split('class="counts">')[1].split("</div>")[0])
    assert counts.split() == ["received", "1", "rejected", "0", "queued", "1", "running", "0",
                              "scored", "4", "failed", "1"]


def test_queue_rows_limit(store, serve):
    ids = populate(store)
    rows = table(get(serve(dashboard={"refresh_s": 0, "queue_rows": 3})).text, "queue")
    assert [int(r[0]) for r in rows[1:]] == [ids["waiting"], ids["held"], ids["web"]]


def test_default_corpus_is_the_latest_scored_and_dashboard_alias(store, serve):
    populate(store)
    url = serve()
    html = get(url).text
    assert html == get(f"{url}/dashboard").text
    assert "corpus: fineweb-edu" in html and 'href="/?corpus=demo"' in html
    # Its only scorer is not registered on the subnet: it ranks nowhere, and is listed apart
    assert "nothing eligible scored yet" in html
    departed = table(html, "leaderboard")  # the only table: the standings are empty
    assert departed[0] == ["submission", "hotkey", "bpb", "accepted"]
    assert [r[:3] for r in departed[1:]] == [
        ["web-run deregistered", short(HOTKEYS[3]), "0.9000"]]
    # ... and the plan burns and says why.
    weights = table(html, "weights")
    assert weights[1][0] == "0" and weights[1][3] == "65535"
    assert weights[1][5] == "burn: nothing eligible"
    assert table(html, "weights", 1)[1] == [
        short(HOTKEYS[3]), "not registered on the subnet (deregistered?)"
    ]


def test_registry_panel_is_embedded(store, serve):
    url = serve()
    assert "no hypotheses yet" in get(url).text
    hypotheses = Registry(store, Settings()).hypotheses()
    html = get(url).text
    panel = table(html, "registry")
    assert len(panel) == 1 + len(hypotheses) and len(hypotheses) > 0
    assert [r[0] for r in panel[1:]] == [h["id"] for h in hypotheses]
    assert panel[1][1] == hypotheses[0]["statement"]
    assert 'class="prism-posteriors"' in html


def test_submission_page_draws_the_learning_curve(store, serve):
    ids = populate(store)
    html = get(f"{serve()}/dashboard/submissions/{ids['leader']}").text
    lines = dict(re.findall(r'data-label="([^"]+)"[^>]*points="([^"]*)"', html))
    per_batch = [tuple(map(float, p.split(","))) for p in lines["bpb per batch"].split()]
    running = [tuple(map(float, p.split(","))) for p in lines["prequential bpb so far"].split()]
    assert len(per_batch) == len(running) == 6
    xs, ys = zip(*per_batch, strict=True)
    assert list(xs) == sorted(xs) and len(set(xs)) == 6
    assert list(ys) == sorted(ys)  # bpb falls batch after batch: SVG y grows downwards
    # The running bpb ends at the mean (2.33), between the first (4.0) and last (1.0) batch.
    assert running[0] == per_batch[0] and per_batch[0][1] < running[-1][1] < per_batch[-1][1]
    assert "uniform 2.000" in html and "val trained 1.250" in html and "val twin 2.250" in html
    assert "attempt 1: 6 batches drawn as 6 points" in html
    assert table(html, "runs")[1] == ["1", "ok", "", "6", "600 / 600", "1.5 / 20.0 / 3.5",
                                      "2023-11-14 22:21:40 UTC"]
    score = dict((r[0], r[1]) for r in table(html, "score"))
    assert (score["bpb"], score["held-out Δ"], score["eligible"]) == ("1.500000", "0.750000",
                                                                      "eligible")
    assert score["corpus"] == "demo corpus: development scores only"
    assert (score["heldout_bpb"], score["heldout_se"], score["gap_bound"]) == (
        "1.250000", "0.020000", "-0.030000")
    assert EVIL_NAME not in html and "&lt;script&gt;" in html


def test_curve_points_setting_merges_batches(store, serve):
    ids = populate(store)
    html = get(f"{serve(dashboard={'refresh_s': 0, 'curve_points': 10})}"
               f"/dashboard/submissions/{ids['leader']}").text
    assert "6 batches drawn as 6 points" in html  # fewer batches than points: none merged
    add_run(store, ids["second"], 1, make_record("2" * 64, bpb=(3.0,) * 25),
            created_at=1_700_000_600.0)
    html = get(f"{serve(dashboard={'refresh_s': 0, 'curve_points': 10})}"
               f"/dashboard/submissions/{ids['second']}").text
    assert "25 batches drawn as 9 points" in html  # buckets of 3: ceil(25 / 10)


def test_failed_submission_page(store, serve):
    ids = populate(store)
    html = get(f"{serve()}/dashboard/submissions/{ids['failed']}").text
    summary = dict((r[0], r[1]) for r in table(html, "", 0))
    assert (summary["status"], summary["attempts"], summary["reason"]) == ("failed", "3",
                                                                           EVIL_REASON)
    assert table(html, "runs")[1][:5] == ["3", "crash", "boom", "1", "100 / 100"]
    assert "not scored (yet)" in html
    assert "<img" not in html


def test_unreadable_run_record_is_reported_not_a_500(store, serve):
    ids = populate(store)
    add_run(store, ids["second"], 1, {"version": 99, "digest": "x"}, created_at=1.0)
    r = get(f"{serve()}/dashboard/submissions/{ids['second']}")
    assert r.status_code == 200
    row = table(r.text, "runs")[1]
    assert row[:2] == ["1", "unreadable"] and row[2].startswith("unreadable run record (version")
    assert "no scored batches yet" in r.text


def test_unknown_and_malformed_submission_ids(store, serve):
    populate(store)
    url = serve()
    missing = get(f"{url}/dashboard/submissions/999")
    assert missing.status_code == 404 and "There is no submission 999." in missing.text
    bad = get(f"{url}/dashboard/submissions/%3Cscript%3E")
    assert bad.status_code == 422 and bad.json()["rule"] == "REQUEST"
    long = get(f"{url}/?corpus={'x' * 33}")
    assert long.status_code == 422 and long.json()["rule"] == "REQUEST"


def test_corpus_parameter_is_escaped_and_an_unknown_one_is_empty(store, serve):
    populate(store)
    url = serve()
    evil = get(f"{url}/?corpus=%3Cb%3Ex").text
    assert "corpus: &lt;b&gt;x" in evil and "<b>x" not in evil
    assert "nothing eligible scored yet" in evil
    assert "nothing eligible scored yet" not in get(f"{url}/?corpus=demo").text


def test_each_page_reads_the_store_in_one_transaction(store, serve):
    ids = populate(store)
    url = serve()
    begun: list[int] = []

    def on_begin(_conn) -> None:
        begun.append(1)

    event.listen(store.engine, "begin", on_begin)
    try:
        for path in ("/", f"/dashboard/submissions/{ids['leader']}"):
            begun.clear()
            assert get(f"{url}{path}").status_code == 200
            assert len(begun) == 1, path
    finally:
        event.remove(store.engine, "begin", on_begin)


def test_empty_store(store, serve):
    html = get(serve()).text
    assert "no submissions yet" in html and "nothing eligible scored yet" in html
    assert "no corpus scored yet" in html
    assert table(html, "weights")[1][5] == "burn: nothing eligible"


def test_misconfigured_weights_keep_the_rest_of_the_page(store, serve):
    populate(store)
    r = get(serve(weights={"burn_uid": 7}))
    assert r.status_code == 200
    assert "weights misconfigured" in r.text and "burn_uid 7" in r.text
    assert table(r.text, "leaderboard")[1][0] == "web-run deregistered"


def test_refresh_and_disabled(store, serve):
    assert '<meta http-equiv="refresh" content="15">' in get(serve(dashboard={})).text
    assert "http-equiv" not in get(serve()).text
    url = serve(dashboard={"enabled": False})
    off = get(url)
    assert off.status_code == 404 and off.json()["rule"] == "NOT_FOUND"
    assert get(f"{url}/dashboard/submissions/1").status_code == 404
    assert httpx.get(f"{url}/metrics").status_code == 200


def test_run_records_are_parsed_once_per_app(store, serve):
    ids = populate(store)
    url = serve()
    statements: list[str] = []

    def on_execute(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement.lower())

    page = f"{url}/dashboard/submissions/{ids['leader']}"
    event.listen(store.engine, "before_cursor_execute", on_execute)
    try:
        first = get(page).text
        assert sum("cast(run_records.record as text)" in s for s in statements) == 1
        statements.clear()
        assert get(page).text == first
        assert not any("run_records.record" in s for s in statements)
    finally:
        event.remove(store.engine, "before_cursor_execute", on_execute)


def test_record_cache_keeps_only_the_most_recent_digests(store):
    from prism_challenge.dashboard.records import RecordCache

    ids = populate(store)
    cache = RecordCache(curve_points=10, size=1)
    for key in ("leader", "failed", "leader"):
        with store.session() as s:
            stored = cache.read(s, ids[key])
        assert stored[0].text is not None and stored[0].cached is None  # evicted each time
        digest = cache.digests(stored)[0]
    assert (digest.attempt, digest.batches, len(digest.curve.points)) == (1, 6, 6)
    assert digest.record.steps is None and digest.record.exit_reason == "ok"
    with store.session() as s:
        again = cache.read(s, ids["leader"])
    assert again[0].text is None and again[0].cached == digest


def test_a_research_credit_failure_is_shown_in_the_weights_panel(store, serve):
    from prism_challenge.storage.tables import RegistryEvent

    populate(store)
    with store.session() as s:  # a ledger the registry refuses to replay
        s.add(RegistryEvent(key="x", kind="bogus", payload={}, created_at=1.0))
    r = get(serve(weights={"research_share": 0.5, "winner_share": 0.5}))
    assert r.status_code == 200
    assert "research credit unavailable: unknown ledger event &#x27;bogus&#x27;" in r.text
    assert table(r.text, "leaderboard")[1][0] == "web-run deregistered"


def test_submission_page_shows_what_was_measured(store, serve):
    ids = populate(store)
    html = get(f"{serve()}/dashboard/submissions/{ids['leader']}").text
    measured = dict((r[0], r[1]) for r in table(html, "measured"))
    assert measured == {
        "attempt": "1",
        "parameters": "123,456 (cap 1,000,000)",
        "layers": "4",
        "modules": "Embedding×1, Linear×8",
        "optimizers": "<b>AdamW</b>(lr=0.001, wd=0.1)",
        "batch size": "16",
        "precision / compile": "fp32 / False",
        "world size": "1",
        "causality screen (trained)": "ok max |Δlogit| 0",
        "causality screen (twin)": "failed max |Δlogit| 0.25",
        "held-out positions / bytes (target-absent)": "5,000 / 20,000",
        "kept losses": "16 positions per batch",
    }
    assert "<b>AdamW" not in html and "&lt;b&gt;AdamW&lt;/b&gt;" in html


def test_submission_page_plots_the_miners_telemetry(store, serve):
    sid = add_submission(store, 1, HOTKEYS[0], path=("queued", "running"))
    points = [TelemetryPoint(step=20, values={"loss": 2.0}),  # stored out of order
              TelemetryPoint(step=0, values={"loss": 4.0, "lr": 0.001}),
              TelemetryPoint(step=40, values={"loss": 1.0, "lr": 0.0005})]
    add_run(store, sid, 1, make_record(f"{1:064x}", telemetry=points), created_at=1.0)
    url = serve()
    html = get(f"{url}/dashboard/submissions/{sid}").text
    lines = dict(re.findall(r'data-label="([^"]+)"[^>]*points="([^"]*)"', html))
    loss = [tuple(map(float, p.split(","))) for p in lines["loss"].split()]
    lr = [tuple(map(float, p.split(","))) for p in lines["lr"].split()]
    assert len(loss) == 3 and len(lr) == 2
    xs, ys = zip(*loss, strict=True)
    assert list(xs) == sorted(xs) and list(ys) == sorted(ys)  # step order; the loss falls
    assert lr[0][1] < lr[1][1]  # the learning rate falls too (SVG y grows downwards)
    assert "attempt 1: reported by the training script (ctx.log), never scored" in html

    quiet = add_submission(store, 2, HOTKEYS[1], path=("queued", "running"))
    add_run(store, quiet, 1, make_record(f"{2:064x}"), created_at=2.0)
    assert "the training script logged nothing" in get(f"{url}/dashboard/submissions/{quiet}").text


def test_a_run_stopped_early_shows_as_censored(store, serve):
    """Its bpb is a lower bound: listed apart with a censored badge, never ranked."""
    populate(store)
    sid = add_submission(store, 8, HOTKEYS[1], name="hopeless", path=("queued", "running"))
    score(store, sid, 1.2, censored=True, now=1_700_001_004.0)  # below the leader's 1.5
    url = serve()
    html = get(f"{url}/?corpus=demo").text
    assert [r[1] for r in table(html, "leaderboard")[1:]] == [EVIL_NAME, "second-best"]
    assert table(html, "leaderboard", 2) == [
        ["submission", "hotkey", "bpb at least", "why"],
        ["hopeless censored", short(HOTKEYS[1]), "≥ 1.2000",
         "stopped at a checkpoint: it could no longer beat the leader by the dethrone margin"],
    ]
    board = get(f"{url}/v1/leaderboard?corpus=demo").json()
    assert [e["submission_id"] for e in board["censored"]] == [sid]
    assert board["censored"][0]["censored"] is True
    page = get(f"{url}/dashboard/submissions/{sid}").text
    assert dict((r[0], r[1]) for r in table(page, "score"))["censored"] == \
        "censored: stopped early, the bpb is a lower bound"


def test_a_rejection_lists_each_violation_and_no_pending_review(store, serve):
    """A bundle refused by the AST policy never reached the LLM: the page says so, and its
    violations keep their line breaks (they ran together on one line before)."""
    reason = "AST policy:\nAST-IMPORT line 1: os\nAST-CALL line 4: eval"
    sid = add_submission(store, 9, HOTKEYS[1], name="refused", path=("rejected",),
                         reviewed="pending", reason=reason)
    html = get(f"{serve()}/dashboard/submissions/{sid}").text
    summary = dict((r[0], r[1]) for r in table(html, "", 0))
    assert summary["LLM review"] == "not reviewed (refused before the LLM review)"
    assert "white-space:pre-line" in html
    assert '<span class="reason">AST policy:\nAST-IMPORT line 1: os\nAST-CALL line 4: eval' in html


def test_score_figures_share_one_precision(store, serve):
    ids = populate(store)
    html = get(f"{serve()}/dashboard/submissions/{ids['second']}").text
    summary = dict((r[0], r[1]) for r in table(html, "score"))
    assert summary["uniform_bpb"] == "8.000000" and summary["gap"] == "0.010000"
    assert summary["bpb"] == "2.000000"


def test_the_api_page_is_rendered_here_without_a_cdn(store, serve):
    url = serve()
    page = get(f"{url}/docs")
    assert page.status_code == 200 and "cdn" not in page.text.lower()
    rows = table(page.text, "")[1:]
    assert any(r[:2] == ["POST", "/v1/submissions"] for r in rows)
    assert any(r[:2] == ["GET", "/v1/leaderboard"] for r in rows)
    assert httpx.get(f"{url}/redoc").status_code == 404
    assert httpx.get(f"{url}/openapi.json").json()["info"]["title"] == "PRISM validator"


def test_the_header_says_when_there_is_no_chain_block(store, tmp_path, live_server):
    from prism_challenge.api import ApiDeps
    from prism_challenge.chain.metagraph import StaticMetagraph
    from prism_challenge.validator.app import create_app

    deps = ApiDeps(settings=Settings(), store=store,
                   metagraph=StaticMetagraph.of(HOTKEYS[:1], block=None))
    html = get(live_server(create_app(deps))).text
    assert "block None" not in html and "no chain block yet" in html
