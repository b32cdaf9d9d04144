"""`GET /metrics` over real HTTP, parsed with prometheus_client's own parser."""

from __future__ import annotations

import httpx
from dashboard_store import HOTKEYS, add_run, add_submission, make_record, populate
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete, event

from prism_challenge.storage import Store
from prism_challenge.storage.tables import RunRecord as RunRow


def scrape(url: str) -> dict[str, dict[tuple, float]]:
    """family name -> {(sample name, sorted labels): value}."""
    r = httpx.get(f"{url}/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(r.text):
        out[family.name] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples
        }
    return out


def by_label(family: dict[tuple, float], sample: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: v for (name, labels), v in family.items() if name == sample}


def test_metrics_values_from_the_store(store, serve):
    populate(store)
    m = scrape(serve())
    assert m["prism_store_up"] == {("prism_store_up", ()): 1.0}
    assert by_label(m["prism_submissions"], "prism_submissions", "status") == {
        "received": 1, "rejected": 0, "queued": 1, "running": 0, "scored": 4, "failed": 1,
    }
    # Attempts: four submissions ran once, the crasher three times.
    assert m["prism_run_attempts"] == {("prism_run_attempts_total", ()): 7.0}
    assert m["prism_scored"] == {
        ("prism_scored_total", (("corpus", "demo"), ("eligible", "false"))): 1.0,
        ("prism_scored_total", (("corpus", "demo"), ("eligible", "true"))): 2.0,
        ("prism_scored_total", (("corpus", "fineweb-edu"), ("eligible", "true"))): 1.0,
    }
    assert by_label(m["prism_runs"], "prism_runs_total", "exit_reason") == {"ok": 1, "crash": 1}
    # The most recent run record is the crasher's third attempt: 1.0 + 2.0 + 0.0 seconds.
    assert m["prism_last_run_duration_seconds"] == {
        ("prism_last_run_duration_seconds", ()): 3.0
    }
    assert by_label(m["prism_last_run_phase_seconds"], "prism_last_run_phase_seconds",
                    "phase") == {"startup": 1.0, "train": 2.0, "eval": 0.0}
    assert m["prism_last_run_timestamp_seconds"] == {
        ("prism_last_run_timestamp_seconds", ()): 1_700_000_900.0
    }
    assert by_label(m["prism_leader_bpb"], "prism_leader_bpb", "corpus") == {
        "demo": 1.5, "fineweb-edu": 0.9,
    }
    assert m["process_cpu_seconds"][("process_cpu_seconds_total", ())] > 0


def test_gauges_are_computed_at_scrape_time(store, serve):
    url = serve()
    before = by_label(scrape(url)["prism_submissions"], "prism_submissions", "status")
    add_submission(store, 50, HOTKEYS[0], path=("queued",))
    after = by_label(scrape(url)["prism_submissions"], "prism_submissions", "status")
    assert (before["queued"], after["queued"]) == (0, 1)


def test_each_app_has_its_own_registry(store, serve, tmp_path):
    populate(store)
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        full, empty = scrape(serve()), scrape(serve(target=other))
    finally:
        other.close()
    assert by_label(full["prism_submissions"], "prism_submissions", "status")["scored"] == 4
    assert set(by_label(empty["prism_submissions"], "prism_submissions", "status").values()) == {0}
    assert "prism_last_run_duration_seconds" not in empty
    assert empty["prism_scored"] == {} and empty["prism_leader_bpb"] == {}


def test_an_unreadable_store_is_reported_not_a_failed_scrape(store, serve):
    populate(store)
    url = serve()
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE scores")
    m = scrape(url)
    assert m["prism_store_up"] == {("prism_store_up", ()): 0.0}
    assert "prism_submissions" not in m


def test_metrics_can_be_turned_off(store, serve):
    url = serve(dashboard={"refresh_s": 0, "metrics_enabled": False})
    r = httpx.get(f"{url}/metrics", timeout=10)
    assert r.status_code == 404 and r.json()["rule"] == "NOT_FOUND"
    assert httpx.get(url, timeout=10).status_code == 200


def test_run_records_are_tallied_incrementally(store, serve):
    ids = populate(store)
    url = serve()
    statements: list[str] = []

    def on_execute(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement.lower())

    scrape(url)
    event.listen(store.engine, "before_cursor_execute", on_execute)
    try:
        scrape(url)
        assert statements and not any("json_extract" in s for s in statements)
        statements.clear()
        add_run(store, ids["second"], 1,
                make_record("2" * 64, exit_reason="deadline", startup_s=2.0, train_s=300.0,
                            eval_s=4.0),
                created_at=1_700_000_950.0)
        add_run(store, ids["cheat"], 1, make_record("3" * 64), created_at=1_700_000_100.0)
        m = scrape(url)
        # Only the two new records were read (one query for both).
        assert sum("json_extract" in s for s in statements) == 1
    finally:
        event.remove(store.engine, "before_cursor_execute", on_execute)
    assert by_label(m["prism_runs"], "prism_runs_total", "exit_reason") == {
        "ok": 2, "crash": 1, "deadline": 1,
    }
    # The latest by time is the deadline run, although the cheat's record was stored after it.
    assert m["prism_last_run_duration_seconds"] == {
        ("prism_last_run_duration_seconds", ()): 306.0
    }
    with store.session() as s:
        s.execute(delete(RunRow).where(RunRow.created_at == 1_700_000_950.0))
    m = scrape(url)
    assert by_label(m["prism_runs"], "prism_runs_total", "exit_reason") == {"ok": 2, "crash": 1}
    assert m["prism_last_run_duration_seconds"] == {
        ("prism_last_run_duration_seconds", ()): 3.0
    }


def test_http_requests_are_counted_by_route_template_and_status(store, serve):
    url = serve()
    assert httpx.get(f"{url}/v1/submissions/999", timeout=10).status_code == 404
    assert httpx.get(f"{url}/v1/submissions/998", timeout=10).status_code == 404
    assert httpx.post(f"{url}/v1/submissions", content=b"x", timeout=10).status_code == 401
    assert httpx.get(f"{url}/no/such/page", timeout=10).status_code == 404
    m = scrape(url)["prism_http_requests"]
    counts = {dict(labels)["route"] + " " + dict(labels)["status"]: v
              for (name, labels), v in m.items() if name == "prism_http_requests_total"}
    assert counts["/v1/submissions/{submission_id} 404"] == 2  # the template, not the path
    assert counts["/v1/submissions 401"] == 1  # a refusal leaves no row, but is counted
    assert counts["unmatched 404"] == 1


def test_research_cycles_are_counted_by_outcome(store, serve):
    from prism_challenge.config.settings import RegistrySettings
    from prism_challenge.registry import Registry
    from prism_challenge.registry.cycle import Answers, plan_cycle, plan_failure

    reg = Registry(store, RegistrySettings(cycle_scored=1))
    assert by_label(scrape(serve())["prism_registry_cycles"], "prism_registry_cycles_total",
                    "outcome") == {"answered": 0, "failed": 0}
    for _ in range(2):
        reg.record(lambda st: plan_failure(st, "timeout after 60s", trigger="scored", now=1.0))
    reg.record(lambda st: plan_cycle(st, Answers(hypotheses=[]), reg.cfg, trigger="scored",
                                     now=2.0))
    m = scrape(serve())
    assert by_label(m["prism_registry_cycles"], "prism_registry_cycles_total", "outcome") == {
        "answered": 1, "failed": 2}
