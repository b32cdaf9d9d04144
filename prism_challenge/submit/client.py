"""The miner's side of intake: sign a bundle for one validator, upload it, follow its status.

Every refusal from the validator comes back as `SubmitError` carrying the HTTP status and
the server's `rule`, so callers (the CLI, scripts, tests) branch on the rule, not on text.
A request is signed for the receiving validator's hotkey: the one the metagraph lists for
its address, or (given only a URL) the one the node reports at `/v1/health`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from prism_challenge.bundle import Bundle
from prism_challenge.intake.schemas import Receipt, SubmissionView
from prism_challenge.intake.signing import SUBMISSIONS_PATH, sign_submission


class SubmitError(RuntimeError):
    def __init__(self, status: int | None, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}" if status is None else f"{status} {rule}: {detail}")
        self.status = status
        self.rule = rule
        self.detail = detail


def _refusal(response: httpx.Response) -> SubmitError:
    try:
        body = response.json()
        return SubmitError(response.status_code, str(body["rule"]), str(body["detail"]))
    except (ValueError, KeyError, TypeError):
        return SubmitError(
            response.status_code, "HTTP", response.text[:500] or response.reason_phrase
        )


class SubmissionClient:
    """Talks to one validator's API as one hotkey (`signer`: a bittensor wallet or keypair,
    optional for read-only use). `receiver` is the validator's hotkey; None: ask the node.
    The timeout covers the validator's wait for a commitment to become visible."""

    def __init__(
        self,
        base_url: str,
        *,
        signer: Any | None = None,
        receiver: str | None = None,
        timeout_s: float = 90.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.signer = signer
        self.receiver = receiver
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SubmissionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise SubmitError(None, "CONNECTION", f"{self._http.base_url}{path}: {exc}") from None

    def validator_hotkey(self) -> str:
        """The hotkey this node says it has (`GET /v1/health`)."""
        response = self._request("GET", "/v1/health")
        if response.status_code != 200:
            raise _refusal(response)
        hotkey = response.json().get("hotkey")
        if not hotkey:
            raise SubmitError(None, "NO_RECEIVER", f"{self.base_url} reports no validator "
                              "hotkey, so it cannot take signed submissions")
        return hotkey

    def submit(self, bundle: Bundle, *, nonce_ns: int | None = None) -> Receipt:
        """Sign and upload; a repeat of an earlier bundle returns its receipt (idempotent)."""
        if self.signer is None:
            raise SubmitError(None, "NO_SIGNER", "a hotkey is needed to submit")
        if self.receiver is None:
            self.receiver = self.validator_hotkey()
        body = bundle.to_wire()
        path = urlsplit(self.base_url).path.rstrip("/") + SUBMISSIONS_PATH  # as sent
        headers = sign_submission(self.signer, body, receiver=self.receiver, path=path,
                                  nonce_ns=nonce_ns)
        headers["Content-Type"] = "application/octet-stream"
        response = self._request("POST", SUBMISSIONS_PATH, content=body, headers=headers)
        if response.status_code not in (200, 201):
            raise _refusal(response)
        return Receipt.model_validate(response.json())

    def status(self, submission_id: int) -> SubmissionView:
        response = self._request("GET", f"/v1/submissions/{submission_id}")
        if response.status_code != 200:
            raise _refusal(response)
        return SubmissionView.model_validate(response.json())

    def wait(
        self,
        submission_id: int,
        *,
        poll_s: float = 5.0,
        timeout_s: float = 3600.0,
        on_change: Callable[[SubmissionView], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> SubmissionView:
        """Poll until the submission is final (rejected, scored, failed) or `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        last = None
        while True:
            view = self.status(submission_id)
            if on_change is not None and (view.status, view.reason) != last:
                on_change(view)
            last = (view.status, view.reason)
            if view.final:
                return view
            if time.monotonic() + poll_s > deadline:
                raise SubmitError(
                    None,
                    "WAIT_TIMEOUT",
                    f"submission {submission_id} is still {view.status} after {timeout_s:.0f} s",
                )
            sleep(poll_s)

    def program_brief(self, hotkey: str | None = None) -> str | None:
        """The validator's current research brief (program.md), or None where it has none;
        with `hotkey`, the brief of that hotkey's population."""
        response = self._program("/v1/program.md", {} if hotkey is None else {"hotkey": hotkey})
        return None if response is None else response.text

    def program_json(self) -> dict | None:
        """The brief's JSON twin (`GET /v1/program.json`), or None where it has none."""
        response = self._program("/v1/program.json")
        return None if response is None else response.json()

    def _program(self, path: str, params: dict | None = None) -> httpx.Response | None:
        response = self._request("GET", path, params=params or {})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise _refusal(response)
        return response
