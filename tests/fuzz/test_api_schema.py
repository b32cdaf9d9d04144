"""Every operation of the app's own OpenAPI schema, fuzzed on a live node (uvicorn + SQLite).

schemathesis generates requests from the schema (valid ones) and past it (wrong types, values
outside the documented bounds, missing or mangled headers, unsupported methods, bodies of
the wrong type). For each answer:

- no 5xx, ever;
- a 4xx is `{"detail": <sentence>, "rule": <ID>}`;
- a 4xx wrote nothing (SQLite's commit counter, read from another connection, is unchanged);
- the answer conforms to the schema (status documented, body valid, negative data refused).

The signed route is also sent each generated body signed for real, by a registered hotkey
and by an unregistered one, so the bytes get past the signature to the checks behind it.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from fuzz_kit import API_EXAMPLES, RANDOM, budget, valid_files
from hypothesis import example, given
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from prism_challenge.api import ApiDeps
from prism_challenge.api.params import MAX_ROW_ID
from prism_challenge.bundle import MANIFEST, wire
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.storage import Store
from prism_challenge.validator.app import create_app

_RULE = re.compile(r"[A-Z][A-Z0-9_]*")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    unsupported_method,
]


def _openapi() -> dict:
    """The schema the validator serves (`test_the_live_node_serves_this_schema` checks it)."""
    store = Store("sqlite://")
    try:
        app = create_app(ApiDeps(settings=Settings(), store=store,
                                 metagraph=StaticMetagraph.of([])))
        return app.openapi()
    finally:
        store.close()


OPENAPI = _openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)
schema.config.generation.update(max_examples=API_EXAMPLES, deterministic=not RANDOM)


def judge(response, node, version_before: int) -> None:
    """The rules that hold for every answer, whatever was asked."""
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:500]}"
    if 400 <= status < 500:
        body = response.json()
        assert set(body) == {"detail", "rule"}, body
        assert isinstance(body["detail"], str) and body["detail"].strip(), body
        assert isinstance(body["rule"], str) and _RULE.fullmatch(body["rule"]), body
        assert node.data_version() == version_before, f"a {status} {body['rule']} wrote"


def _sent_body(case, url: str) -> bytes:
    data = case.as_transport_kwargs(base_url=url).get("data", b"")
    return data.encode() if isinstance(data, str) else bytes(data or b"")


def test_the_live_node_serves_this_schema(fuzz_node):
    assert httpx.get(f"{fuzz_node.url}/openapi.json").json() == OPENAPI


@schema.parametrize()
def test_every_operation_answers_within_the_rules(case, fuzz_node):
    before = fuzz_node.data_version()
    response = case.call(base_url=fuzz_node.url, timeout=30)
    judge(response, fuzz_node, before)
    case.validate_response(response, checks=CHECKS)
    if case.method == "POST" and case.path == "/v1/submissions":
        body = _sent_body(case, fuzz_node.url)
        for signer in (fuzz_node.miner, fuzz_node.stranger):
            before = fuzz_node.data_version()
            signed = httpx.post(f"{fuzz_node.url}/v1/submissions", content=body, timeout=30,
                                headers=fuzz_node.signed(signer, body))
            judge(signed, fuzz_node, before)
            rule = signed.json().get("rule") if signed.status_code >= 400 else "ACCEPTED"
            if signer is fuzz_node.stranger:
                assert rule in ("NOT_REGISTERED", "BODY_SIZE"), signed.text
            else:  # past the signature: the size or the bundle decides
                assert rule == "BODY_SIZE" or rule.startswith("BUNDLE_"), signed.text


# The dashboard's HTML pages are not in the API schema (they are pages, not API), so their
# parameters are fuzzed here: any path segment and any query value.
_SEGMENT = st.one_of(st.integers(), st.text(max_size=40), st.floats().map(repr))


@budget(20)
@given(segment=_SEGMENT, corpus=st.one_of(st.none(), st.text(max_size=64)))
@example(segment=10**20, corpus=None)  # once a 500 (OverflowError in the SQLite driver)
@example(segment=MAX_ROW_ID + 1, corpus="x" * 33)
def test_dashboard_pages_answer_within_the_rules(fuzz_node, segment, corpus):
    params = {} if corpus is None else {"corpus": corpus}
    for path in (f"/dashboard/submissions/{quote(str(segment), safe='')}", "/dashboard"):
        before = fuzz_node.data_version()
        response = httpx.get(f"{fuzz_node.url}{path}", params=params, timeout=30)
        if response.headers["content-type"].startswith("text/html"):
            assert response.status_code in (200, 404), response.status_code
            assert response.status_code == 200 or "no submission" in response.text
            assert fuzz_node.data_version() == before
        else:
            judge(response, fuzz_node, before)


@pytest.mark.parametrize("path", ["/v1/submissions/{}", "/v1/submissions/{}/curve",
                                  "/dashboard/submissions/{}"])
@pytest.mark.parametrize("sid", [10**19, 2**63, MAX_ROW_ID + 1, 0, -1])
def test_an_id_outside_the_documented_range_is_a_422_not_a_500(fuzz_node, path, sid):
    """Regression: a 20-digit id made the SQLite driver raise OverflowError (a 500)."""
    before = fuzz_node.data_version()
    response = httpx.get(fuzz_node.url + path.format(sid))
    judge(response, fuzz_node, before)
    assert (response.status_code, response.json()["rule"]) == (422, "REQUEST")
    assert "submission_id" in response.json()["detail"]


def test_the_largest_documented_id_is_a_clean_404(fuzz_node):
    response = httpx.get(f"{fuzz_node.url}/v1/submissions/{MAX_ROW_ID}")
    assert (response.status_code, response.json()["rule"]) == (404, "NOT_FOUND")


@pytest.mark.parametrize("toml", [
    "x = " + "[" * 4000 + "]" * 4000 + "\n",  # once a RecursionError: a 500 for a signed miner
    "[axes]\nlayers = " + "9" * 5000 + "\n",  # once a ValueError (int digit limit)
])
def test_a_signed_bundle_whose_prism_toml_breaks_the_parser_is_a_422(fuzz_node, toml):
    body = wire.encode({**valid_files("toml-bomb"), MANIFEST: toml.encode()})
    before = fuzz_node.data_version()
    response = httpx.post(f"{fuzz_node.url}/v1/submissions", content=body,
                          headers=fuzz_node.signed(fuzz_node.miner, body))
    judge(response, fuzz_node, before)
    assert (response.status_code, response.json()["rule"]) == (422, "BUNDLE_TOML")
    assert "prism.toml" in response.json()["detail"]
