"""`/v1/weights` online shows the vector the chain stores, not the plan before the subnet's
weight rules: a 90/10 leader/burn plan on a subnet capped at max_weight_limit 32768 is
served as the clipped vector, and it is exactly what the setter then puts on chain."""

from __future__ import annotations

import httpx
from chain_kit import NETUID
from verified_kit import mark_verified

from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.scoring import ScoreResult, record_score
from prism_challenge.storage.tables import Submission
from prism_challenge.validator.app import create_app
from prism_challenge.weights.chain import WeightSetter
from prism_challenge.weights.conform import AsSent
from prism_challenge.weights.plan import load_plan


def _scored(store, hotkey: str) -> None:
    result = ScoreResult(
        bpb=1.0, prequential_bpb=1.0, uniform_bpb=12.0, tail_bpb=1.0, heldout_delta=1.0,
        gap=0.0, penalty=0.0, eligible=True, reasons=[], notes=[], unconsumed_tokens=0,
        exit_reason="ok")
    with store.session() as s:
        row = Submission(digest="ab" * 32, hotkey=hotkey, status="running", accepted_at=1.0,
                         updated_at=1.0, bundle=b"x")
        s.add(row)
        s.flush()
        record_score(s, row.id, result, "demo", now=1.0)
        mark_verified(s, row.id)


def test_the_weights_route_serves_the_vector_the_chain_stores(fake, client, wallets, store):
    fake.hyper["MaxWeightsLimit"] = 32768  # no uid may hold more than about half
    fake.hyper["CommitRevealWeightsEnabled"] = False  # set directly: stored at once
    _scored(store, wallets["miner"].hotkey.ss58_address)  # uid 2 leads
    settings = Settings(chain={"mode": "online", "netuid": NETUID, "retries": 0},
                        weights={"winner_share": 0.9, "research_share": 0.0, "burn_uid": 0,
                                 "dry_run": False})
    c = client()
    graph = LiveMetagraph(c, refresh_blocks=1, status=None)
    graph.refresh(force=True)
    with store.session() as s:
        plan = load_plan(s, graph, settings)
    assert (plan.uids, plan.weights_u16) == ([0, 2], [7282, 65535])  # 10/90 as planned
    validator = wallets["validator"]
    deps = ApiDeps(settings, store, graph, as_sent=AsSent(c, lambda: 1))
    with ApiServer(create_app(deps)) as server:
        shown = httpx.get(f"{server.url}/v1/weights", timeout=30).json()
    # About 50/50: the largest share is 65535 / 131069 <= 32768 / 65535.
    assert (shown["uids"], shown["weights_u16"]) == ([0, 2], [65534, 65535])
    assert shown["as_sent"].startswith("clipped to the subnet's max_weight_limit 32768/65535")
    assert [r["u16"] for r in shown["rows"]] == [65534, 65535]

    fake.block = 1400  # a tempo after the validator's last set (950)
    graph.refresh(force=True)
    outcome = WeightSetter(c, validator, settings, sleep=lambda s: None).offer(plan, graph)
    assert outcome.outcome == "set", outcome.message
    assert fake.weights[1] == dict(zip(shown["uids"], shown["weights_u16"], strict=True))


def test_a_plan_the_subnet_cannot_accept_is_a_clear_503(fake, client, store):
    fake.hyper["MinAllowedWeights"] = 8  # four uids on the subnet: no plan can pay eight
    settings = Settings(chain={"mode": "online", "netuid": NETUID})
    c = client()
    graph = LiveMetagraph(c, refresh_blocks=1, status=None)
    graph.refresh(force=True)
    deps = ApiDeps(settings, store, graph, as_sent=AsSent(c, lambda: 1))
    with ApiServer(create_app(deps)) as server:
        r = httpx.get(f"{server.url}/v1/weights", timeout=30)
    assert r.status_code == 503 and r.json()["rule"] == "WEIGHTS_IMPOSSIBLE"
    assert "requires at least 8 non-zero weights (min_allowed_weights)" in r.json()["detail"]


def test_prism_weights_prints_the_vector_a_capped_subnet_stores(fake, wallets, store,
                                                                 tmp_path, monkeypatch):
    """The command itself, online, over the strict fake (injected at the chain factory)."""
    import json
    from functools import partial

    from typer.testing import CliRunner

    import prism_challenge.chain.factory as factory
    from prism_challenge.cli.app import app

    fake.hyper["MaxWeightsLimit"] = 32768
    _scored(store, wallets["miner"].hotkey.ss58_address)
    validator = wallets["validator"]
    cfg = tmp_path / "online.yaml"
    cfg.write_text(
        f"storage:\n  url: {store.url}\n"
        f"chain:\n  mode: online\n  network: local\n  netuid: {NETUID}\n"
        f"wallet:\n  name: {validator.name}\n  path: {validator.path}\n"
        "weights:\n  winner_share: 0.9\n  research_share: 0.0\n  burn_uid: 0\n")
    monkeypatch.setattr(factory, "connect", partial(factory.connect, substrate=fake))
    out = CliRunner().invoke(app, ["weights", "-c", str(cfg), "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.stdout)
    assert (plan["uids"], plan["weights_u16"]) == ([0, 2], [65534, 65535])
    assert plan["as_sent"].startswith("clipped to the subnet's max_weight_limit 32768/65535")
    assert fake.extrinsics == []  # showing sends nothing
