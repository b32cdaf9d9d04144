import httpx
import pytest
from verified_kit import mark_verified
from weights_entries import HOTKEYS

from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.scoring import ScoreResult, record_score
from prism_challenge.storage.tables import Submission
from prism_challenge.validator.app import create_app


def _score(store, i, hotkey, bpb, corpus="demo", reviewed="passed"):
    result = ScoreResult(
        bpb=bpb, prequential_bpb=bpb, uniform_bpb=12.0, tail_bpb=bpb, heldout_delta=1.0,
        gap=0.0, penalty=0.0, eligible=True, reasons=[], notes=[], unconsumed_tokens=0,
        exit_reason="ok",
    )
    with store.session() as s:
        row = Submission(digest=f"{i:064x}", hotkey=hotkey, status="running", reviewed=reviewed,
                         accepted_at=float(i), updated_at=float(i), bundle=b"x")
        s.add(row)
        s.flush()
        record_score(s, row.id, result, corpus, now=float(i))
        mark_verified(s, row.id)


def _serve(store, settings):
    mg = StaticMetagraph.of(HOTKEYS[:3], block=9)
    return ApiServer(create_app(ApiDeps(settings=settings, store=store, metagraph=mg)))


def test_leaderboard_and_weights_over_http(store):
    _score(store, 1, HOTKEYS[1], 2.0)
    _score(store, 2, HOTKEYS[2], 1.0, reviewed="unreviewed")
    _score(store, 3, HOTKEYS[5], 0.5, corpus="fineweb-edu")
    winner_only = Settings(weights={"winner_share": 1.0, "research_share": 0.0})
    with _serve(store, winner_only) as server:
        board = httpx.get(f"{server.url}/v1/leaderboard", params={"corpus": "demo"}).json()
        plan = httpx.get(f"{server.url}/v1/weights", params={"corpus": "demo"}).json()
        latest = httpx.get(f"{server.url}/v1/weights").json()
    assert board["corpus"] == "demo"
    assert [(s["rank"], s["entry"]["hotkey"], s["entry"]["unreviewed"], s["leader"])
            for s in board["standings"]] == [(1, HOTKEYS[2], True, True),
                                              (2, HOTKEYS[1], False, False)]
    assert (plan["uids"], plan["weights_u16"], plan["block"]) == ([2], [65535], 9)
    assert plan["rows"][0]["reasons"] == [
        "leader: submission 2 bpb 1.000000 on demo (scored without LLM review)"
    ]
    # The latest corpus is fineweb-edu, whose only scorer is not registered: burn.
    assert latest["corpus"] == "fineweb-edu"
    assert (latest["uids"], latest["weights_u16"]) == ([0], [65535])
    assert latest["excluded"][0]["hotkey"] == HOTKEYS[5]


def test_the_leaderboard_ranks_registered_hotkeys_and_lists_those_that_left(store):
    """HOTKEYS[5] has the best run but is not registered: it leads neither the board nor the
    weights, and the board lists it apart; the registered leader is the one the weights pay."""
    _score(store, 1, HOTKEYS[1], 2.0)
    _score(store, 2, HOTKEYS[5], 0.5)
    _score(store, 3, HOTKEYS[2], 1.5)
    with _serve(store, Settings(weights={"winner_share": 1.0, "research_share": 0.0})
                ) as server:
        board = httpx.get(f"{server.url}/v1/leaderboard").json()
        plan = httpx.get(f"{server.url}/v1/weights").json()
    assert [(s["entry"]["hotkey"], s["leader"]) for s in board["standings"]] == [
        (HOTKEYS[2], True), (HOTKEYS[1], False)]
    assert board["leader"]["hotkey"] == HOTKEYS[2]
    assert [(e["hotkey"], e["bpb"]) for e in board["departed"]] == [(HOTKEYS[5], 0.5)]
    assert (plan["uids"], plan["weights_u16"]) == ([2], [65535])


def test_misconfigured_burn_uid_is_a_clear_503(store):
    with _serve(store, Settings(weights={"burn_uid": 7})) as server:
        r = httpx.get(f"{server.url}/v1/weights")
    assert r.status_code == 503
    assert r.json()["rule"] == "WEIGHTS_CONFIG" and "burn_uid 7" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/v1/leaderboard", "/v1/weights"])
def test_empty_store_answers_with_an_empty_board_and_a_burn(store, path):
    with _serve(store, Settings()) as server:
        body = httpx.get(f"{server.url}{path}").json()
    assert body["leader"] is None
    if path == "/v1/weights":
        assert (body["uids"], body["weights_u16"]) == ([0], [65535])


def test_the_heldout_round_shows_its_commit_and_reveals_the_last_round(store, tmp_path):
    from prism_challenge.sandbox.heldout_round import reveal

    settings = Settings(validator={"work_dir": str(tmp_path / "runs")},
                        scoring={"heldout_round_s": 1.0})
    with _serve(store, settings) as server:
        first = httpx.get(f"{server.url}/v1/heldout-round").json()
        assert len(first["commit"]) == 64 and first["round"].startswith("round-")
        prev = first["previous"]
        # the revealed secret hashes to the commit that round showed
        assert reveal(prev["round"], prev["secret"], prev["commit"]).label == prev["round"]
    assert (tmp_path / "heldout-master.key").stat().st_size == 32
