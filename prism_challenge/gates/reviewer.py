"""The LLM review gate's client: one request per review through the `openai` client.

Works against any OpenAI-compatible endpoint (OpenRouter by default). The client makes no
retries of its own: a timeout, an API error, a refusal or a malformed answer raises
`ReviewUnavailable`, and the gate stage holds the submission and retries later with
backoff. Nothing is ever allowed by default.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping

from pydantic import ValidationError

from prism_challenge.config.settings import LlmSettings
from prism_challenge.gates.prompt import build_messages
from prism_challenge.gates.verdict import Verdict, json_schema


class ReviewUnavailable(RuntimeError):
    """No usable verdict this time (timeout, API error, malformed output): hold and retry."""


class LlmConfigError(ValueError):
    """The LLM gate is enabled but cannot be used as configured (e.g. no API key)."""


class LlmReviewer:
    def __init__(self, settings: LlmSettings) -> None:
        # The key comes only from the environment variable the config names.
        key = os.environ.get(settings.api_key_env)
        if not key:
            raise LlmConfigError(
                f"llm.enabled is true but the environment variable {settings.api_key_env} "
                "(llm.api_key_env) is not set; set it, or set llm.enabled: false to run "
                "without the LLM (no review: submissions are marked unreviewed; no research "
                "proposals)"
            )
        # The client belongs to the [validator] extra: a miner's install checks and evaluates
        # bundles without it, so it is imported only when a reviewer is built.
        try:
            import openai
        except ImportError:
            raise LlmConfigError("llm.enabled is true but the `openai` package is not "
                                 "installed: pip install 'prism-challenge[validator]'") from None
        self.settings = settings
        self.model = settings.model
        self.client = openai.OpenAI(
            base_url=settings.base_url, api_key=key, timeout=settings.timeout_s, max_retries=0
        )

    def _response_format(self) -> dict:
        if self.settings.response_format == "json_object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": "prism_verdict", "strict": True, "schema": json_schema()},
        }

    def review(self, files: Mapping[str, str], digest: str) -> Verdict:
        """The verdict on a bundle's text files, or `ReviewUnavailable`."""
        import openai  # present: __init__ imported it

        messages = build_messages(files, digest, tag=secrets.token_hex(12))
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=messages,
                response_format=self._response_format(),
                temperature=self.settings.temperature,
                max_tokens=self.settings.max_output_tokens,
            )
        except openai.APITimeoutError:
            raise ReviewUnavailable(f"timeout after {self.settings.timeout_s:g}s") from None
        except openai.OpenAIError as exc:
            raise ReviewUnavailable(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if not response.choices:
            raise ReviewUnavailable("the endpoint answered with no choices")
        choice = response.choices[0]
        if getattr(choice.message, "refusal", None):
            raise ReviewUnavailable(f"the model refused: {choice.message.refusal[:200]}")
        content = choice.message.content
        if not content:
            raise ReviewUnavailable("the model answered with no content")
        try:
            return Verdict.model_validate_json(_strip_fence(content))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise ReviewUnavailable(f"malformed verdict: {where}: {first['msg']}") from None


def _strip_fence(text: str) -> str:
    # json_object endpoints sometimes wrap the object in a ```json fence; nothing else is
    # tolerated.
    text = text.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3]
        if text.startswith("json"):
            text = text[4:]
    return text.strip()
