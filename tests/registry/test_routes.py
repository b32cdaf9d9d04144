"""The registry's HTTP routes on the real API app under uvicorn."""

import hashlib

import httpx

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.server import ApiServer
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.registry import Registry
from prism_challenge.storage import Store
from prism_challenge.validator.app import create_app
from tests.registry.conftest import obs


def test_program_md_json_and_hypotheses_are_served(store):
    settings = Settings()
    reg = Registry(store, settings)
    for i in range(6):
        reg.observe(obs(i, 2.0 - 0.01 * i, opt="muon" if i % 2 else "adamw"))
    deps = ApiDeps(settings=settings, store=store, metagraph=StaticMetagraph.of([], allow_any=True))
    with ApiServer(create_app(deps)) as server, httpx.Client(base_url=server.url) as http:
        md = http.get("/v1/program.md")
        doc = http.get("/v1/program.json").json()
        hyps = http.get("/v1/hypotheses").json()
        panel = http.get("/v1/registry/panel")
        graph = http.get("/v1/registry/graph").json()
    assert md.status_code == 200
    assert md.headers["content-type"].startswith("text/markdown")
    digest = md.headers["x-prism-program-digest"]
    assert digest == hashlib.sha256(md.content).hexdigest() == doc["digest"]
    assert digest == reg.program()[1]
    assert doc["observations"] == 6
    assert [h["id"] for h in hyps] == [f"H{i:03d}" for i in range(1, 9)]
    assert hyps[0]["posterior"]["a"] == 2 + hyps[0]["wins"]
    assert panel.text.startswith('<table class="prism-posteriors">')
    assert panel.text.count("<tr>") == 9
    assert len([n for n in graph["nodes"] if n["type"] == "hypothesis"]) == 8


def test_cli_prints_the_same_brief(tmp_path):
    import json

    from typer.testing import CliRunner

    from prism_challenge.cli.app import app

    url = f"sqlite:///{tmp_path / 'p.db'}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"storage:\n  url: {url}\n")
    reg = Registry(Store(url), Settings(storage={"url": url}))
    reg.observe(obs(1, 2.0))
    out = CliRunner().invoke(app, ["program", "--config", str(cfg)])
    assert out.exit_code == 0, out.output
    assert out.output.endswith(f"<!-- sha256 {reg.program()[1]} -->\n")
    doc = json.loads(CliRunner().invoke(app, ["program", "-c", str(cfg), "--json"]).output)
    assert doc["digest"] == reg.program()[1] and doc["observations"] == 1
