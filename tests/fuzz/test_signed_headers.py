"""Property tests of the signed headers (bittensor's `btauth/1`, read by `intake.auth`), with
real sr25519 keys of bittensor wallets, the real `Intake` service over a real SQLite store,
and the real server for what only HTTP can carry (raw bytes in header values).

What must hold for any headers: a request is refused with an `ApiError` of a documented auth
rule (401 AUTH_HEADERS / RECEIVER / STALE / SIGNATURE, 409 NONCE_REPLAY) and a sentence that
says what to fix, never another exception; a refused request writes nothing (SQLite's commit
counter, read from another connection, does not move); and a request signed correctly for
this validator gets past the signature whatever its body and target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from bittensor import http_auth
from fuzz_kit import PROPERTY, CommitCounter, budget, make_wallet, valid_files
from hypothesis import assume, event, example, given
from hypothesis import strategies as st

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.config.settings import Settings
from prism_challenge.intake.auth import StoredNonces, authenticate
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.intake.service import Intake
from prism_challenge.intake.signing import SUBMISSIONS_PATH, sign_submission
from prism_challenge.storage import Store

NETUID = 7
NOW = 1_750_000_000.0  # the service's clock: freshness is judged against it, exactly
NOW_NS = int(NOW * 1e9)
FRESH_NS = 300 * 10**9  # intake.freshness_s, both ways
AUTH_RULES = {"AUTH_HEADERS": 401, "RECEIVER": 401, "STALE": 401, "SIGNATURE": 401,
              "NONCE_REPLAY": 409}
VERSION, HOTKEY, RECEIVER, NONCE, SIGNATURE, CRYPTO = (
    http_auth.HEADER_VERSION, http_auth.HEADER_HOTKEY, http_auth.HEADER_RECEIVER,
    http_auth.HEADER_NONCE, http_auth.HEADER_SIGNATURE, http_auth.HEADER_CRYPTO)
NAMES = (VERSION, HOTKEY, RECEIVER, NONCE, SIGNATURE, CRYPTO)


@dataclass
class Desk:
    """The intake service of one validator, at a fixed time, over a real SQLite file."""

    intake: Intake
    db: Path
    miner: object  # registered hotkeys (bittensor Keypairs)
    rival: object
    receiver: str  # the validator's own hotkey
    ledger: LocalLedger
    wallets: dict
    data_version: CommitCounter  # unchanged across a request: the request wrote nothing
    used_nonces: set[int]

    def sign(self, body: bytes, *, signer=None, nonce_ns: int = NOW_NS, receiver=None,
             target: str = SUBMISSIONS_PATH) -> dict[str, str]:
        return sign_submission(signer or self.miner, body, receiver=receiver or self.receiver,
                               path=target, nonce_ns=nonce_ns)

    def submit(self, headers, body: bytes, target: str = SUBMISSIONS_PATH):
        """(the receipt or None, the ApiError or None); any other exception fails the test."""
        try:
            return self.intake.submit(headers, body, target), None
        except ApiError as exc:
            return None, exc


@pytest.fixture(scope="module")
def desk(tmp_path_factory) -> Desk:
    root = tmp_path_factory.mktemp("signed-headers")
    wallets = {name: make_wallet(root / "wallets", name)
               for name in ("validator", "miner", "rival")}
    receiver = wallets["validator"].hotkey.ss58_address
    metagraph = StaticMetagraph.of([receiver, wallets["miner"].hotkey.ss58_address,
                                    wallets["rival"].hotkey.ss58_address], block=10)
    ledger = LocalLedger(root / "ledger.db", metagraph)
    db = root / "prism.db"
    store = Store(f"sqlite:///{db}")
    settings = Settings(chain={"netuid": NETUID, "commitment_wait_s": 0},
                        intake={"rate_limit_count": 10**6})
    intake = Intake(store, metagraph, IntakePolicy.from_settings(settings), lambda: NOW,
                    hotkey=receiver, subnet=ledger)
    counter = CommitCounter(db)
    yield Desk(intake, db, wallets["miner"].hotkey, wallets["rival"].hotkey, receiver, ledger,
               {w.hotkey.ss58_address: w for w in wallets.values()}, counter, set())
    counter.close()
    store.close()


def refused(desk: Desk, headers, body: bytes, target: str = SUBMISSIONS_PATH) -> ApiError:
    """Submit; the answer must be an auth refusal with a sentence, and nothing written."""
    before = desk.data_version()
    receipt, error = desk.submit(headers, body, target)
    assert receipt is None, f"accepted: {receipt}"
    assert error.rule in AUTH_RULES, (error.rule, error.detail)
    assert error.status == AUTH_RULES[error.rule]
    assert isinstance(error.detail, str) and len(error.detail.strip()) > 10, error.detail
    assert desk.data_version() == before, f"a refused request ({error.rule}) wrote"
    return error


# ---- what a hostile client can put in a header ------------------------------------------

_HEX = "0123456789abcdef"
_tricky = st.sampled_from([
    "", " ", "0", "-1", "1.5", "1e18", "0x10", "NaN", "inf", "1_000", "٣", "\x00", "é",
    "0x", "0x0x00", "zz", "0" * 127, "0" * 129, "0" * 4400, "9" * 5000, "1" * 70_000,
    "sr25519", "ed25519", "ecdsa", "SR25519 ", "5" * 48, "\ud800",
])
_text = st.one_of(st.text(max_size=80), _tricky)
_nonce_text = st.one_of(
    _text,
    st.integers().map(str),
    st.integers(NOW_NS - 10 * FRESH_NS, NOW_NS + 10 * FRESH_NS).map(str),
    st.floats(allow_nan=True).map(repr),
)
_signature_text = st.one_of(
    _text,
    st.binary(max_size=200).map(bytes.hex),  # hex of any length, 64 bytes included
    st.binary(max_size=200).map(lambda b: "0x" + b.hex().upper()),
    st.text(alphabet=_HEX + "g-xX ", max_size=140),  # almost hex
)
_header_value = {VERSION: st.one_of(_text, st.just("1")), HOTKEY: _text, RECEIVER: _text,
                 NONCE: _nonce_text, SIGNATURE: _signature_text, CRYPTO: _text}


@st.composite
def mangled(draw, signed: dict[str, str]) -> tuple[dict[str, str], frozenset[str]]:
    """`signed` with some headers dropped or replaced; also which ones were changed."""
    headers, changed = dict(signed), set()
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True)):
        if draw(st.booleans()):
            value = draw(_header_value[name])
            if value == signed.get(name):
                continue
            headers[name] = value
        elif name in headers:
            del headers[name]
        else:
            continue
        changed.add(name)
    if draw(st.booleans()):  # header names are case-insensitive on the wire
        headers = {name.lower() if draw(st.booleans()) else name.upper(): value
                   for name, value in headers.items()}
    return headers, frozenset(changed)


def _same_claim(headers: dict[str, str], signed: dict[str, str]) -> bool:
    """Whether mangled headers still say what was signed, each value perhaps written another
    way (`int()` and `bytes.fromhex` spellings, the scheme by name or number)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        scheme = lowered.get(CRYPTO.lower(), "sr25519").strip().lower()
        return (lowered.get(VERSION.lower()) == "1"
                and lowered.get(HOTKEY.lower()) == signed[HOTKEY]
                and lowered.get(RECEIVER.lower()) == signed[RECEIVER]
                and int(lowered[NONCE.lower()]) == int(signed[NONCE])
                and bytes.fromhex(lowered[SIGNATURE.lower()].removeprefix("0x"))
                == bytes.fromhex(signed[SIGNATURE].removeprefix("0x"))
                and (scheme == "sr25519" or (scheme.isdigit() and int(scheme) == 1)))
    except (KeyError, ValueError):
        return False


# ---- the properties ----------------------------------------------------------------------

GARBAGE = b"not a bundle"  # past the signature it is refused as a bundle, so nothing is written


@PROPERTY
@given(data=st.data())
def test_any_mangled_header_is_an_auth_refusal_that_writes_nothing(desk, data):
    """Refused by a documented auth rule unless the headers still say what was signed (then
    the body, not a bundle, is refused behind the signature); nothing written either way."""
    signed = desk.sign(GARBAGE)
    headers, changed = data.draw(mangled(signed))
    event("same claim" if _same_claim(headers, signed) else "changed claim")
    if _same_claim(headers, signed):
        before = desk.data_version()
        receipt, error = desk.submit(headers, GARBAGE)
        assert receipt is None and error.rule.startswith("BUNDLE_"), (changed, error.rule)
        assert desk.data_version() == before
    else:
        refused(desk, headers, GARBAGE)


@pytest.mark.parametrize("name, value, rule, words", [
    (SIGNATURE, "0x" + "ab" * 63, "AUTH_HEADERS", "signature encoding"),  # 63 bytes
    (SIGNATURE, "0x" + "ab" * 65, "AUTH_HEADERS", "signature encoding"),
    (SIGNATURE, "not hex", "AUTH_HEADERS", "not hex"),
    (NONCE, "9" * 5000, "AUTH_HEADERS", "not a decimal integer"),  # past int()'s digit limit
    (NONCE, "1.75e18", "AUTH_HEADERS", "not a decimal integer"),
    (HOTKEY, "\ud800", "AUTH_HEADERS", "not valid text"),  # once a UnicodeEncodeError
    (HOTKEY, "5" * 48, "AUTH_HEADERS", "hotkey address"),
    (CRYPTO, "ecdsa", "AUTH_HEADERS", "Crypto"),
    (VERSION, "2", "AUTH_HEADERS", "Version"),
    (RECEIVER, "", "RECEIVER", "different receiving hotkey"),
])
def test_each_kind_of_bad_header_has_its_rule_and_says_what_is_wrong(desk, name, value, rule,
                                                                     words):
    headers = {**desk.sign(GARBAGE), name: value}
    error = refused(desk, headers, GARBAGE)
    assert (error.rule, error.status) == (rule, AUTH_RULES[rule])
    assert words in error.detail, error.detail


@pytest.mark.parametrize("name, spell", [
    (SIGNATURE, lambda v: v.removeprefix("0x")),
    (SIGNATURE, lambda v: "0x" + v.removeprefix("0x").upper()),
    (NONCE, lambda v: f" {v} "),
    (NONCE, lambda v: "+" + v),
    (CRYPTO, lambda _: "SR25519 "),
    (CRYPTO, lambda _: "1"),
])
def test_a_signed_value_written_another_way_still_verifies(desk, name, spell):
    """What the library reads leniently (hex case and prefix, `int()` spellings, the scheme
    by name or number) means the same signed value, so the signature holds."""
    signed = desk.sign(GARBAGE)
    headers = {**signed, name: spell(signed.get(name, ""))}
    assert headers != signed and _same_claim(headers, signed)
    caller = authenticate(headers, GARBAGE, target=SUBMISSIONS_PATH, receiver=desk.receiver,
                          policy=desk.intake.policy, nonces=StoredNonces(desk.intake.store),
                          now=NOW)
    assert (caller.hotkey_ss58, caller.nonce_ns) == (desk.miner.ss58_address, NOW_NS)


@pytest.mark.parametrize("name", NAMES[:5])
def test_a_missing_header_is_refused_by_name(desk, name):
    headers = {key: value for key, value in desk.sign(GARBAGE).items() if key != name}
    error = refused(desk, headers, GARBAGE)
    assert error.rule == ("RECEIVER" if name == RECEIVER else "AUTH_HEADERS")
    assert name in error.detail or "version" in error.detail.lower(), error.detail


@PROPERTY
@given(offset_s=st.one_of(st.floats(300.001, 1e9), st.floats(-1e9, -300.001)))
@example(offset_s=-300.000001)
@example(offset_s=300.000001)
@example(offset_s=-(NOW + 1))  # a nonce below zero
def test_a_nonce_outside_the_freshness_window_is_stale(desk, offset_s):
    nonce = NOW_NS + int(offset_s * 1e9)
    assume(abs(nonce - NOW_NS) > FRESH_NS)
    error = refused(desk, desk.sign(GARBAGE, nonce_ns=nonce), GARBAGE)
    assert error.rule == "STALE"
    assert ("older than" if nonce < NOW_NS else "in the future") in error.detail
    assert "system clock" in error.detail


@PROPERTY
@given(receiver=st.one_of(st.text(max_size=60), st.sampled_from(["5" * 48, "-"])))
def test_a_request_signed_for_another_receiver_is_refused(desk, receiver):
    assume(receiver != desk.receiver)
    headers = desk.sign(GARBAGE, receiver=receiver or "-")
    headers[RECEIVER] = receiver  # as signed, or emptied after signing
    error = refused(desk, headers, GARBAGE)
    assert error.rule == "RECEIVER" and "/v1/health" in error.detail


@PROPERTY
@given(signature=st.binary(min_size=64, max_size=64), body=st.binary(max_size=64))
def test_a_signature_of_the_right_length_that_is_not_the_senders_is_refused(desk, signature,
                                                                           body):
    signed = desk.sign(body)
    assume(signature.hex() != signed[SIGNATURE].removeprefix("0x"))
    error = refused(desk, {**signed, SIGNATURE: "0x" + signature.hex()}, body)
    assert error.rule == "SIGNATURE" and "signed" in error.detail


@PROPERTY
@given(body=st.binary(max_size=2048), flip=st.integers(0, 2047), tail=st.binary(max_size=4))
def test_any_change_to_a_signed_body_breaks_the_signature(desk, body, flip, tail):
    signed = desk.sign(body)
    altered = bytearray(body) + tail
    if altered == body:  # nothing appended: change one byte (of an empty body, add one)
        altered = altered or bytearray(1)
        altered[flip % len(altered)] ^= 1 + flip % 255
    assert refused(desk, signed, bytes(altered)).rule == "SIGNATURE"


@PROPERTY
@given(body=st.binary(max_size=4096), target=st.text(max_size=200),
       skew_ns=st.integers(-FRESH_NS, FRESH_NS), signer=st.sampled_from(["miner", "rival"]))
@example(body=b"", target="", skew_ns=0, signer="miner")
@example(body=b"\n" * 8, target="/v1/submissions?\n", skew_ns=FRESH_NS, signer="rival")
def test_a_correctly_signed_request_verifies_for_any_body_and_target(desk, body, target,
                                                                     skew_ns, signer):
    """The round trip: whatever the bytes, what the key signed is what the validator reads."""
    key = desk.miner if signer == "miner" else desk.rival
    headers = desk.sign(body, signer=key, nonce_ns=NOW_NS + skew_ns, target=target)
    caller = authenticate(headers, body, target=target, receiver=desk.receiver,
                          policy=desk.intake.policy, nonces=StoredNonces(desk.intake.store),
                          now=NOW)
    assert (caller.hotkey_ss58, caller.nonce_ns) == (key.ss58_address, NOW_NS + skew_ns)


@budget(15)
@given(body=st.binary(max_size=512), query=st.text(
    alphabet=st.characters(codec="ascii", exclude_characters="#\r\n"), max_size=40))
def test_a_signed_request_with_any_body_gets_past_the_signature_and_writes_nothing(
        desk, body, query):
    """Through the whole service: the signature is accepted and the bundle check decides."""
    target = SUBMISSIONS_PATH + (f"?{query}" if query else "")
    before = desk.data_version()
    receipt, error = desk.submit(desk.sign(body, target=target), body, target)
    assert receipt is None and error.rule.startswith("BUNDLE_"), (error.rule, error.detail)
    assert desk.data_version() == before


def _commit(desk: Desk, signer, body: bytes) -> None:
    wallet = desk.wallets[signer.ss58_address]
    desk.ledger.commit(wallet, commitment_value(signer.ss58_address, Bundle.from_wire(body).digest))


NONCE_SPELLINGS = [" {n}", "{n} ", "+{n}", "0{n}", "000{n}", "{n}\t", "{a}_{b}"]


@budget(len(NONCE_SPELLINGS) * 2)
@given(tag=st.text(max_size=8), spelling=st.sampled_from(NONCE_SPELLINGS),
       skew_ns=st.integers(-FRESH_NS, FRESH_NS))
def test_an_accepted_request_replayed_under_any_spelling_of_its_nonce_is_refused(
        desk, tag, spelling, skew_ns):
    """The positive control of `refused` (an accepted request writes) and the replay rule."""
    body = Bundle(valid_files(f"replay-{tag}-{spelling}-{skew_ns}")).to_wire()
    _commit(desk, desk.miner, body)
    nonce = NOW_NS + skew_ns
    assume(nonce not in desk.used_nonces)  # each accepted nonce is spent
    desk.used_nonces.add(nonce)
    headers = desk.sign(body, nonce_ns=nonce)
    before = desk.data_version()
    receipt, error = desk.submit(headers, body)
    assert error is None and receipt.hotkey == desk.miner.ss58_address
    assert desk.data_version() != before  # written: so an unchanged counter means something
    text = str(nonce)
    spelled = spelling.format(n=text, a=text[:5], b=text[5:])
    assert int(spelled) == nonce
    error = refused(desk, {**headers, NONCE: spelled}, body)
    assert (error.rule, error.status) == ("NONCE_REPLAY", 409)


# ---- over HTTP: raw bytes in header values -------------------------------------------------

# h11 refuses CR, LF, NUL, vertical tab and form feed on the client side (it allows only
# spaces and tabs between other bytes), and HTTP strips surrounding whitespace; every other
# byte reaches the server, which reads header values as latin-1.
_wire_bytes = st.binary(max_size=120).map(
    lambda b: b.translate(None, b"\r\n\x00\x0b\x0c").strip())


@budget(30)
@given(values=st.dictionaries(st.sampled_from(NAMES), _wire_bytes, min_size=1, max_size=6),
       drop=st.lists(st.sampled_from(NAMES), max_size=3))
@example(values={HOTKEY: "é".encode("latin-1")}, drop=[])
@example(values={SIGNATURE: b"\xff" * 64, NONCE: b"\xd9\xa3"}, drop=[])  # UTF-8 of '٣'
@example(values={RECEIVER: b"x" * 100}, drop=[VERSION])
@example(values={NONCE: b"\x01\x01"}, drop=[])  # control bytes other than whitespace pass
def test_any_header_bytes_over_http_are_an_auth_refusal_that_writes_nothing(fuzz_node, values,
                                                                            drop):
    body = Bundle(valid_files("http-bytes")).to_wire()
    signed = {name: value.encode() for name, value in
              fuzz_node.signed(fuzz_node.miner, body).items()}
    headers = {**signed, **values}
    for name in drop:
        headers.pop(name, None)
    assume(headers != signed)
    before = fuzz_node.data_version()
    response = httpx.post(f"{fuzz_node.url}/v1/submissions", content=body, headers=headers,
                          timeout=30)
    assert response.status_code in (401, 409), response.text
    answer = response.json()
    assert set(answer) == {"detail", "rule"} and answer["rule"] in AUTH_RULES, answer
    assert AUTH_RULES[answer["rule"]] == response.status_code
    assert fuzz_node.data_version() == before
