"""Populations: a deterministic hotkey -> population assignment per epoch, and a brief per
population (over the real API under uvicorn and through `prism program`)."""

import hashlib
import statistics
from collections import Counter

import httpx
import pytest
from typer.testing import CliRunner

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.server import ApiServer
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.cli.app import app
from prism_challenge.config.settings import RegistrySettings, Settings
from prism_challenge.registry import Registry, assign, assignment_for
from prism_challenge.registry.allocation import allocate
from prism_challenge.registry.directives import (
    CHARTER,
    START,
    best_guess,
    fitted_guess,
    program_json,
)
from prism_challenge.registry.ledger import apply
from prism_challenge.registry.populations import epoch_of, focus, salt_of
from prism_challenge.registry.seeds import SEED_HYPOTHESES
from prism_challenge.registry.state import RegistryState
from prism_challenge.storage import Store
from prism_challenge.validator.app import create_app
from tests.registry.conftest import obs

HOTKEYS = [f"5H{i:04d}" for i in range(600)]


def test_the_assignment_is_a_pure_function_of_hotkey_netuid_and_epoch():
    a = [assign(hk, netuid=7, epoch=3, count=3).index for hk in HOTKEYS]
    assert a == [assign(hk, netuid=7, epoch=3, count=3).index for hk in HOTKEYS]
    counts = Counter(a)
    assert sorted(counts) == [0, 1, 2] and min(counts.values()) >= 170  # 200 each expected
    who = assign("5H0001", netuid=7, epoch=3, count=3)
    digest = hashlib.sha256(f"{salt_of(7, 3)}|5H0001".encode()).hexdigest()
    assert who.index == int(digest, 16) % 3 and who.kind == ("explore", "exploit", "canary")[
        who.index]
    assert who.salt == hashlib.sha256(b"prism-population|7|3").hexdigest()[:16]
    moved = sum(x != assign(hk, netuid=7, epoch=4, count=3).index for x, hk in zip(
        a, HOTKEYS, strict=True))
    assert 320 <= moved <= 480  # a new epoch reshuffles about 2/3 of the hotkeys
    assert salt_of(8, 3) != salt_of(7, 3)


def test_the_epoch_comes_from_the_chain_block_online_and_from_the_ledger_locally():
    cfg = RegistrySettings(population_epoch_blocks=360, cycle_scored=50)
    state = RegistryState(n_obs=130)
    assert epoch_of(True, 7250, state, cfg)[0] == 20
    assert epoch_of(False, 7250, state, cfg) == (
        2, "local epoch counter: 130 scored // registry.cycle_scored 50")
    assert epoch_of(True, None, state, cfg)[0] == 2  # no block known: the local counter
    assert epoch_of(False, None, state, RegistrySettings(cycle_scored=0))[0] == 0
    online = Settings(chain={"mode": "online", "netuid": 9})
    assert assignment_for("5H0001", state, online, 7250).epoch == 20
    assert assignment_for("5H0001", state, online, 7250) == assign(
        "5H0001", netuid=9, epoch=20, count=3,
        epoch_source="chain block 7250 // registry.population_epoch_blocks 360")


def _registry(store, **registry) -> tuple[Registry, Settings]:
    settings = Settings(registry=registry)
    reg = Registry(store, settings)
    for i in range(12):  # muon vs adamw pairs, and a leader to exploit
        reg.observe(obs(i, 2.0 - 0.03 * (i % 2) - 0.001 * i, opt="muon" if i % 2 else "adamw"))
    return reg, settings


def _hotkey_in(settings, state, index) -> str:
    return next(hk for hk in HOTKEYS if assignment_for(hk, state, settings, None).index == index)


def test_each_population_gets_its_own_focus_and_the_global_brief(store):
    reg, settings = _registry(store)
    state = reg.state()
    global_text, global_digest, global_doc = reg.program()
    briefs = {}
    for index in range(3):
        hotkey = _hotkey_in(settings, state, index)
        text, digest, doc = reg.program_for(hotkey, settings, None)
        assert digest == hashlib.sha256(text.encode()).hexdigest() == doc["digest"]
        assert reg.program_for(hotkey, settings, None)[1] == digest  # deterministic
        assert text.startswith(CHARTER) and text.count(START) == 1
        pop = doc["population"]
        assert pop["index"] == index and pop["hotkey"] == hotkey and pop["count"] == 3
        assert f"## Your population: {index} of 3 ({pop['kind']})" in text
        assert "## State after 12 scored submissions" in text  # the global brief stays
        assert doc["explore"] == global_doc["explore"]
        briefs[pop["kind"]] = pop
    assert reg.program() == (global_text, global_digest, global_doc)
    assert "population" not in global_doc
    explore, exploit, canary = briefs["explore"], briefs["exploit"], briefs["canary"]
    scores = allocate(state, settings.registry).scores
    ranked = sorted(scores, key=lambda k: (-scores[k], k))
    # no canary or new LLM claim: the canary population explores too, and the two split the
    # ranking (ranks 0, 2, 4, ... and 1, 3, 5, ...)
    assert canary["fallback"] == "no canary or new LLM claim is open: explore instead"
    assert [r["id"] for r in explore["focus"]] == ranked[0::2][:5] == [
        "H003", "H002", "H004", "H005"]
    assert [r["id"] for r in canary["focus"]] == ranked[1::2][:5]
    assert sum(r["share"] for r in explore["focus"]) == pytest.approx(1.0, abs=1e-3)
    # exploit starts from the leader's design (observation 11: muon) under the best guess
    assert exploit["start_from"]["optimizer"] == "muon"
    assert exploit["start_from"]["batch_size"] == "8-32"
    # only claims the leader's design sits in (it declared no norm or position)
    assert [r["id"] for r in exploit["focus"]] == ["H006", "H007", "H004", "H008", "H005"]
    assert "Start from: batch_size=8-32" in reg.program_for(exploit["hotkey"], settings,
                                                             None)[0]


def test_the_best_guess_follows_any_evidence_strongest_claim_first():
    state = RegistryState()
    cfg = RegistrySettings()
    for seed in SEED_HYPOTHESES[:4]:
        apply(state, "hypothesis", {"origin": "seed", **seed}, cfg)
    state.hypotheses["H001"].wins = 1  # optimizer: muon leans (P = 0.69)
    state.hypotheses["H003"].losses = 2  # position: learned leans harder (P = 0.19)
    state.hypotheses["H002"].wins = state.hypotheses["H002"].losses = 1  # P = 0.5: no guess
    assert best_guess(state, cfg) == {"optimizer": "muon", "position": "learned"}


def test_explore_populations_split_the_ranking(store):
    reg, settings = _registry(store, populations=4)  # 0 and 3 are both explore
    state = reg.state()
    first = [reg.program_for(_hotkey_in(settings, state, i), settings, None)[2]["population"]
             for i in (0, 3)]
    assert [p["kind"] for p in first] == ["explore", "explore"]
    a, b = ({r["id"] for r in p["focus"]} for p in first)
    assert a and b and not a & b


def test_the_canary_population_is_sent_to_the_canary(store):
    reg, settings = _registry(store, axis_recurrence=1)
    reg.propose_axis({"spec": {"name": "warmup", "kind": "categorical",
                               "values": ["none", "short"]},
                      "treatment": "short", "control": "none", "cycle": 0})
    state = reg.state()
    canary_id = next(h.id for h in state.hypotheses.values() if h.canary_axis == "warmup")
    pop = reg.program_for(_hotkey_in(settings, state, 2), settings, None)[2]["population"]
    assert pop["kind"] == "canary" and [r["id"] for r in pop["focus"]] == [canary_id]
    assert pop["fallback"] == ""


def test_program_md_per_hotkey_over_http_and_through_the_cli(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"storage:\n  url: {url}\n")
    store = Store(url)
    reg, _ = _registry(store)
    settings = Settings(storage={"url": url})
    hotkey = "5EsNLFaGe9XK5LzWH3i6eC2Wqv6YqZS1442N1C4yeSdP6uxy"  # `prism program` wants SS58
    text, digest, doc = reg.program_for(hotkey, settings, None)
    deps = ApiDeps(settings=settings, store=store, metagraph=StaticMetagraph.of([], block=99))
    runner = CliRunner()
    with ApiServer(create_app(deps)) as server, httpx.Client(base_url=server.url) as http:
        md = http.get("/v1/program.md", params={"hotkey": hotkey})
        js = http.get("/v1/program.json", params={"hotkey": hotkey}).json()
        bad = [http.get("/v1/program.md", params={"hotkey": h}).status_code
               for h in ("a b", "x" * 65, "", "[axes]")]
        remote = runner.invoke(app, ["program", "--hotkey", hotkey, "--url", server.url])
        remote_json = runner.invoke(app, ["program", "--hotkey", hotkey, "--url", server.url,
                                          "--json"])
    assert md.status_code == 200 and md.text == text
    assert md.headers["x-prism-program-digest"] == digest
    assert js["population"] == doc["population"] and js["digest"] == digest
    assert bad == [422, 422, 422, 422]
    local = runner.invoke(app, ["program", "--hotkey", hotkey, "-c", str(cfg)])
    assert local.exit_code == 0, local.output
    assert local.output == f"{text}\n<!-- sha256 {digest} -->\n"
    assert remote.exit_code == 0 and remote.output == local.output
    assert remote_json.exit_code == 0 and '"population"' in remote_json.output
    refused = runner.invoke(app, ["program", "--hotkey", "[bold]x", "-c", str(cfg)])
    assert refused.exit_code == 2 and "'[bold]x' is not a hotkey" in refused.output
    down = runner.invoke(app, ["program", "--url", "http://127.0.0.1:9"])
    assert down.exit_code == 1 and "http://127.0.0.1:9/v1/program.md" in down.output
    store.close()


def test_prism_program_prints_the_charter_verbatim(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"storage:\n  url: {url}\n")
    out = CliRunner().invoke(app, ["program", "-c", str(cfg)])
    assert out.exit_code == 0
    assert "Declare the axes you chose in\n`prism.toml` under `[axes]`; the harness" in out.output
    assert out.output.startswith(CHARTER)


SMALL, BIG = "1e+06-1e+07", "1e+07-1e+08"


def _fit_state() -> RegistryState:
    """H001 (muon vs adamw) and H002 (rmsnorm vs layernorm) open; eight recent runs on an
    additive surface (muon -0.04, rmsnorm -0.01, the larger params bucket -0.3) where muon
    ran mostly small and adamw mostly large, so muon's plain mean is the worse one."""
    cfg = RegistrySettings()
    state = RegistryState()
    for seed in SEED_HYPOTHESES[:2]:
        apply(state, "hypothesis", {"origin": "seed", **seed}, cfg)
    cells = [("muon", SMALL)] * 3 + [("muon", BIG), ("adamw", SMALL)] + [("adamw", BIG)] * 3
    for i, (opt, params) in enumerate(cells):
        norm = ("layernorm", "rmsnorm")[i % 2]
        bpb = 2.0 - 0.04 * (opt == "muon") - 0.3 * (params == BIG) - 0.01 * (norm == "rmsnorm")
        state.recent.append({"hotkey": f"hk{i}", "bpb": bpb, "arms": {
            "optimizer": opt, "params": params, "norm": norm, "lr": "0.001-0.01"}})
    return state


def test_the_fitted_guess_adjusts_for_the_other_axes_and_counts_copies_once():
    state = _fit_state()
    mean = {o: statistics.fmean(r["bpb"] for r in state.recent if r["arms"]["optimizer"] == o)
            for o in ("muon", "adamw")}
    assert mean["muon"] == pytest.approx(1.88) and mean["adamw"] == pytest.approx(1.77)
    # the additive fit sees through the params imbalance; params and lr are claimed by no
    # live claim (and lr has a single arm), so they get no guess
    assert fitted_guess(state) == {"norm": "rmsnorm", "optimizer": "muon"}
    # an arm seen in one (hotkey, design) only does not compete, however good it looks
    lucky = {"hotkey": "lucky", "bpb": 1.0, "arms": {
        "optimizer": "lion", "params": SMALL, "norm": "layernorm", "lr": "0.001-0.01"}}
    state.recent.append(lucky)
    assert fitted_guess(state)["optimizer"] == "muon"
    # ten copies of one hotkey's design count once; the same runs from ten hotkeys move it
    farm = {"hotkey": "farm", "bpb": 1.62, "arms": {
        "optimizer": "adamw", "params": BIG, "norm": "rmsnorm", "lr": "0.001-0.01"}}
    base = list(state.recent)
    state.recent = base + [dict(farm) for _ in range(10)]
    assert fitted_guess(state)["optimizer"] == "muon"
    state.recent = base + [dict(farm, hotkey=f"f{j}") for j in range(10)]
    assert fitted_guess(state)["optimizer"] == "adamw"
    state.recent = base[:3]  # fewer than four (hotkey, design) groups: no guess
    assert fitted_guess(state) == {}


def _exploit_hotkey(state) -> str:
    epoch = state.n_obs // RegistrySettings().cycle_scored
    return next(hk for hk in HOTKEYS if assign(hk, netuid=0, epoch=epoch, count=3).kind
                == "exploit")


def test_the_exploit_design_takes_the_fit_where_no_claim_has_evidence_yet():
    cfg = RegistrySettings()
    state = _fit_state()
    state.best_arms = {"optimizer": "adamw", "params": BIG, "norm": "layernorm",
                       "lr": "0.001-0.01"}
    who = assign(_exploit_hotkey(state), netuid=0, epoch=0, count=3)
    start = program_json(state, cfg, who=who)["population"]["start_from"]
    # no matched evidence: the fit replaces the leader's arms on both claimed axes
    assert start == {"lr": "0.001-0.01", "norm": "rmsnorm", "optimizer": "muon",
                     "params": BIG}
    state.hypotheses["H001"].losses = 1  # one matched contrast says adamw: it wins the axis
    start = program_json(state, cfg, who=who)["population"]["start_from"]
    assert start["optimizer"] == "adamw" and start["norm"] == "rmsnorm"


def test_exploit_focus_follows_the_design_not_only_the_leader():
    cfg = RegistrySettings()
    state = RegistryState()
    for seed in SEED_HYPOTHESES[:4]:
        apply(state, "hypothesis", {"origin": "seed", **seed}, cfg)
    state.best_arms = {"optimizer": "sgd", "norm": "rmsnorm", "position": "alibi"}
    state.hypotheses["H001"].wins = 1  # muon leans over adamw: the design moves off sgd
    who = assign(_exploit_hotkey(state), netuid=0, epoch=0, count=3)
    scores = allocate(state, cfg).scores
    assert focus(state, who, scores, cfg)[0] == ["H002"]  # the leader's design alone
    pop = program_json(state, cfg, who=who)["population"]
    assert pop["start_from"]["optimizer"] == "muon"
    assert [r["id"] for r in pop["focus"]] == ["H001", "H002"]  # ranked by score
