"""The miner's side of intake: sign a bundle, upload it, and follow its status.

Every refusal from the validator comes back as `SubmitError` carrying the HTTP status and
the server's `rule`, so callers (the CLI, scripts, tests) branch on the rule, not on text.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from prism_challenge.bundle import Bundle
from prism_challenge.intake.schemas import Receipt, SubmissionView
from prism_challenge.intake.signing import Signer, sign_request


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
    """Talks to one validator's API as one hotkey (`signer`, optional for read-only use)."""

    def __init__(
        self,
        base_url: str,
        *,
        netuid: int,
        signer: Signer | None = None,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.netuid = netuid
        self.signer = signer
        self.clock = clock
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport
        )

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

    def submit(self, bundle: Bundle, *, nonce: str | None = None) -> Receipt:
        """Sign and upload; a repeat of an earlier bundle returns its receipt (idempotent)."""
        if self.signer is None:
            raise SubmitError(None, "NO_SIGNER", "a hotkey is needed to submit")
        body = bundle.to_wire()
        signed = sign_request(
            self.signer, netuid=self.netuid, body=body, timestamp=self.clock(), nonce=nonce
        )
        headers = {**signed.as_http(), "Content-Type": "application/octet-stream"}
        response = self._request("POST", "/v1/submissions", content=body, headers=headers)
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

    def program_brief(self) -> str | None:
        """The validator's current research brief (program.md), or None where it has none."""
        response = self._program("/v1/program.md")
        return None if response is None else response.text

    def program_json(self) -> dict | None:
        """The brief's JSON twin (`GET /v1/program.json`), or None where it has none."""
        response = self._program("/v1/program.json")
        return None if response is None else response.json()

    def _program(self, path: str) -> httpx.Response | None:
        response = self._request("GET", path)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise _refusal(response)
        return response
